#include "server/metrics/metrics.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics/http_server.h"
#include "tests/unit/http_test_client.h"

namespace symdex::metrics {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using http_test::ClientSocket;
using http_test::Exchange;
using http_test::HttpResponse;
using http_test::ParseResponse;
using http_test::WaitFor;

// ---------------------------------------------------------------------------------------------
// Registry and rendering

TEST(MetricsRenderTest, CounterGaugeHistogramExactText) {
  Registry r;
  r.GetCounter("symdex_requests_total", "Requests served.", {{"method", "Which"}}).Inc(3);
  r.GetCounter("symdex_requests_total", "Help of a later call is ignored.", {{"method", "Resolve"}}).Inc();
  r.GetCounter("symdex_requests_total", "", {{"method", "Resolve"}}).Inc(0.5);
  r.GetGauge("symdex_index_symbols", "Symbols in the index.\nSecond line, back\\slash \"quoted\".").Set(244493);
  r.GetGauge("symdex_escaping", "Label escaping.", {{"path", "a\\b\"c\nd"}, {"empty", ""}}).Set(-1.5);
  Histogram& h = r.GetHistogram("symdex_rpc_seconds", "RPC latency.", {{"rpc", "which"}}, {1, 0.125, 0.5});
  h.Observe(0.0625);
  h.Observe(0.125);  // on a bound: counted in that bucket (le is inclusive)
  h.Observe(0.25);
  h.Observe(2);  // above every bound: only in +Inf

  constexpr char kExpected[] =
      "# HELP symdex_escaping Label escaping.\n"
      "# TYPE symdex_escaping gauge\n"
      "symdex_escaping{empty=\"\",path=\"a\\\\b\\\"c\\nd\"} -1.5\n"
      "# HELP symdex_index_symbols Symbols in the index.\\nSecond line, back\\\\slash \"quoted\".\n"
      "# TYPE symdex_index_symbols gauge\n"
      "symdex_index_symbols 244493\n"
      "# HELP symdex_requests_total Requests served.\n"
      "# TYPE symdex_requests_total counter\n"
      "symdex_requests_total{method=\"Resolve\"} 1.5\n"
      "symdex_requests_total{method=\"Which\"} 3\n"
      "# HELP symdex_rpc_seconds RPC latency.\n"
      "# TYPE symdex_rpc_seconds histogram\n"
      "symdex_rpc_seconds_bucket{rpc=\"which\",le=\"0.125\"} 2\n"
      "symdex_rpc_seconds_bucket{rpc=\"which\",le=\"0.5\"} 3\n"
      "symdex_rpc_seconds_bucket{rpc=\"which\",le=\"1\"} 3\n"
      "symdex_rpc_seconds_bucket{rpc=\"which\",le=\"+Inf\"} 4\n"
      "symdex_rpc_seconds_sum{rpc=\"which\"} 2.4375\n"
      "symdex_rpc_seconds_count{rpc=\"which\"} 4\n";
  EXPECT_EQ(r.Render(), kExpected);
}

TEST(MetricsRenderTest, UnlabelledHistogramWithDefaultBuckets) {
  Registry r;
  Histogram& h = r.GetHistogram("lat_seconds", "Latency.");
  EXPECT_EQ(h.bounds(), DefaultLatencyBuckets());
  ASSERT_EQ(h.bounds().size(), 20u);
  EXPECT_EQ(h.bounds().front(), 5e-6);
  EXPECT_EQ(h.bounds().back(), 10);
  for (size_t i = 1; i < h.bounds().size(); ++i) {
    double step = h.bounds()[i] / h.bounds()[i - 1];
    EXPECT_GE(step, 1.99) << i;
    EXPECT_LE(step, 2.51) << i;
  }
  h.Observe(3e-6);
  h.Observe(20);
  std::string text = r.Render();
  EXPECT_NE(text.find("\nlat_seconds_bucket{le=\"5e-06\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nlat_seconds_bucket{le=\"10\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nlat_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nlat_seconds_count 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nlat_seconds_sum 20.000003\n"), std::string::npos) << text;
}

TEST(MetricsRenderTest, SpecialValues) {
  EXPECT_EQ(FormatValue(NAN), "NaN");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(EscapeLabelValue("\\\"\n\t"), "\\\\\\\"\\n\t");
  EXPECT_EQ(EscapeHelp("\\\"\n"), "\\\\\"\\n");
}

TEST(MetricsRegistryTest, SameNameAndLabelsReturnSameObjectRegardlessOfLabelOrder) {
  Registry r;
  Counter& a = r.GetCounter("c_total", "C.", {{"b", "1"}, {"a", "2"}});
  Counter& b = r.GetCounter("c_total", "C.", {{"a", "2"}, {"b", "1"}});
  Counter& other = r.GetCounter("c_total", "C.", {{"a", "2"}, {"b", "3"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &other);
  EXPECT_EQ(&r.GetGauge("g", "G."), &r.GetGauge("g", "G."));
  Histogram& h1 = r.GetHistogram("h", "H.", {}, {1, 2});
  Histogram& h2 = r.GetHistogram("h", "H.", {}, {7});  // buckets fixed by the first call
  EXPECT_EQ(&h1, &h2);
  EXPECT_EQ(h2.bounds(), (std::vector<double>{1, 2}));
  // New series of an existing histogram family get the family's buckets too.
  EXPECT_EQ(r.GetHistogram("h", "H.", {{"x", "y"}}, {9}).bounds(), (std::vector<double>{1, 2}));
  a.Inc();
  EXPECT_NE(r.Render().find("c_total{a=\"2\",b=\"1\"} 1\n"), std::string::npos);
}

TEST(MetricsRegistryTest, CounterIgnoresNegativeAndNaN) {
  Registry r;
  Counter& c = r.GetCounter("c_total", "C.");
  c.Inc(2);
  c.Inc(-5);
  c.Inc(NAN);
  EXPECT_EQ(c.Value(), 2);
  Gauge& g = r.GetGauge("g", "G.");
  g.Set(10);
  g.Add(-12.5);
  EXPECT_EQ(g.Value(), -2.5);
}

TEST(MetricsRegistryTest, HistogramBucketsNormalizedAndCumulative) {
  Histogram h({5, 1, NAN, 1, INFINITY, 2});
  EXPECT_EQ(h.bounds(), (std::vector<double>{1, 2, 5}));
  for (double v : {0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 6.0, 100.0}) h.Observe(v);
  Histogram::Snapshot s = h.Collect();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 6, 8}));
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.sum, 119);
  h.Observe(NAN);  // counted, in +Inf only; poisons the sum like Prometheus' own clients
  s = h.Collect();
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 6, 9}));
  EXPECT_TRUE(std::isnan(s.sum));
}

TEST(MetricsRegistryTest, CollectorsRunAtStartOfEveryRender) {
  Registry r;
  int calls = 0;
  r.AddCollector([&calls](Registry& reg) {
    ++calls;
    reg.GetGauge("symdex_targets", "Targets in the database.").Set(calls * 10);
  });
  EXPECT_NE(r.Render().find("\nsymdex_targets 10\n"), std::string::npos);
  EXPECT_NE(r.Render().find("\nsymdex_targets 20\n"), std::string::npos);
  EXPECT_EQ(calls, 2);
}

TEST(MetricsRegistryTest, ConcurrentIncFrom8ThreadsSumsExactly) {
  Registry r;
  constexpr int kThreads = 8;
  constexpr int kIncs = 100'000;
  Counter& shared = r.GetCounter("hits_total", "Hits.");
  std::atomic<bool> go{false};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      // Also exercise the registry from every thread: look-ups, new series, observations.
      Counter& mine = r.GetCounter("hits_total", "Hits.");
      Histogram& h = r.GetHistogram("work_seconds", "Work.", {{"thread", std::to_string(t % 2)}});
      for (int i = 0; i < kIncs; ++i) {
        mine.Inc();
        if (i % 10 == 0) h.Observe(i * 1e-6);
      }
    });
  }
  std::thread renderer([&] {
    while (!done.load()) {
      std::string text = r.Render();
      ASSERT_EQ(text.rfind("# HELP", 0), 0u);
    }
  });
  go = true;
  for (auto& t : threads) t.join();
  done = true;
  renderer.join();
  EXPECT_EQ(shared.Value(), double{kThreads} * kIncs);
  uint64_t observed = 0;
  for (const char* t : {"0", "1"}) {
    Histogram::Snapshot s = r.GetHistogram("work_seconds", "", {{"thread", t}}).Collect();
    EXPECT_EQ(s.cumulative.back(), s.count);
    EXPECT_TRUE(std::is_sorted(s.cumulative.begin(), s.cumulative.end()));
    observed += s.count;
  }
  EXPECT_EQ(observed, uint64_t{kThreads} * (kIncs / 10));
  EXPECT_NE(r.Render().find("\nhits_total 800000\n"), std::string::npos);
}

TEST(MetricsDeathTest, MisuseAbortsWithReason) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Registry r;
        r.GetCounter("x", "X.");
        r.GetGauge("x", "X.");
      },
      "metric 'x' requested as a gauge but already registered as a counter");
  EXPECT_DEATH({ Registry().GetCounter("1bad", "."); }, "invalid metric name '1bad'");
  EXPECT_DEATH({ Registry().GetGauge("g", ".", {{"a-b", "1"}}); }, "invalid label name 'a-b'");
  EXPECT_DEATH({ Registry().GetGauge("g", ".", {{"a", "1"}, {"a", "2"}}); }, "label 'a' given twice");
  EXPECT_DEATH({ Registry().GetHistogram("h", ".", {{"le", "1"}}); }, "'le' is reserved");
}

// ---------------------------------------------------------------------------------------------
// HTTP server over real loopback sockets

class MetricsHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.GetCounter("symdex_rpcs_total", "RPCs.", {{"rpc", "Which"}}).Inc(7);
    registry_.GetHistogram("symdex_rpc_seconds", "Latency.", {}, {0.5}).Observe(0.25);
  }
  std::unique_ptr<HttpServer> StartOrDie(HttpServerOptions options = {}) {
    auto server = HttpServer::Start(registry_, "127.0.0.1:0", options);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    EXPECT_GT((*server)->port(), 0);
    return std::move(server).value();
  }
  Registry registry_;
};

TEST_F(MetricsHttpTest, GetMetricsReturnsRenderedText) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  HttpResponse resp = Exchange(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(resp.status, 200) << resp.head;
  EXPECT_NE(resp.head.find("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos)
      << resp.head;
  EXPECT_NE(resp.head.find("\r\nConnection: close\r\n"), std::string::npos) << resp.head;
  EXPECT_NE(resp.head.find(fmt::format("\r\nContent-Length: {}\r\n", resp.body.size())), std::string::npos)
      << resp.head;
  EXPECT_EQ(resp.body, registry_.Render());
  EXPECT_NE(resp.body.find("symdex_rpcs_total{rpc=\"Which\"} 7\n"), std::string::npos);

  // Each scrape renders afresh; a query string is ignored; bare-LF requests are accepted.
  registry_.GetCounter("symdex_rpcs_total", "RPCs.", {{"rpc", "Which"}}).Inc();
  resp = Exchange(server->port(), "GET /metrics?debug=1 HTTP/1.0\n\n");
  EXPECT_EQ(resp.status, 200);
  EXPECT_NE(resp.body.find("symdex_rpcs_total{rpc=\"Which\"} 8\n"), std::string::npos) << resp.body;
}

TEST_F(MetricsHttpTest, HealthzNotFoundMethodNotAllowedBadRequest) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  HttpResponse resp = Exchange(server->port(), "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(resp.body, "ok\n");

  resp = Exchange(server->port(), "GET /x HTTP/1.1\r\n\r\n");
  EXPECT_EQ(resp.status, 404) << resp.head;
  resp = Exchange(server->port(), "GET /metricsx HTTP/1.1\r\n\r\n");
  EXPECT_EQ(resp.status, 404) << resp.head;

  // With a body the server never reads: the response must still arrive intact.
  resp = Exchange(server->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world");
  EXPECT_EQ(resp.status, 405) << resp.head;
  EXPECT_NE(resp.head.find("\r\nAllow: GET\r\n"), std::string::npos) << resp.head;
  resp = Exchange(server->port(), "HEAD /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(resp.status, 405);

  for (const char* bad :
       {"GET /metrics\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n", "GET /metrics FTP/1.0\r\n\r\n", "\r\n\r\n"}) {
    resp = Exchange(server->port(), bad);
    EXPECT_EQ(resp.status, 400) << bad;
  }
}

TEST_F(MetricsHttpTest, OversizedHeadersGet431AndLimitIsExact) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  const std::string prefix = "GET /healthz HTTP/1.1\r\nX-Pad: ";
  const std::string suffix = "\r\n\r\n";
  // Exactly 8192 bytes of request line and headers: accepted.
  std::string at_limit = prefix + std::string(8192 - prefix.size() - suffix.size(), 'a') + suffix;
  ASSERT_EQ(at_limit.size(), 8192u);
  HttpResponse resp = Exchange(server->port(), at_limit);
  EXPECT_EQ(resp.status, 200);
  // One byte more: rejected.
  std::string over = prefix + std::string(8193 - prefix.size() - suffix.size(), 'a') + suffix;
  resp = Exchange(server->port(), over);
  EXPECT_EQ(resp.status, 431) << resp.head;
  // Far more, and never terminated: rejected as soon as the limit is passed, response intact.
  resp = Exchange(server->port(), prefix + std::string(40000, 'b'));
  EXPECT_EQ(resp.status, 431) << resp.head;
  EXPECT_EQ(resp.body, "request headers too large\n");
}

TEST_F(MetricsHttpTest, RequestSplitAcrossWritesAndSlowClientDoesNotBlockOthers) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  ClientSocket slow(server->port());
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.SendAll("GET /hea"));
  // Another client is served while the slow one is mid-request.
  HttpResponse other = Exchange(server->port(), "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(other.status, 200);
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_TRUE(slow.SendAll("lthz HTTP/1.1\r\n"));
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_TRUE(slow.SendAll("\r\n"));
  std::string raw;
  ASSERT_TRUE(slow.ReadToEof(raw));
  EXPECT_EQ(ParseResponse(raw).status, 200) << raw;
  EXPECT_EQ(ParseResponse(raw).body, "ok\n");
}

// The configured read timeout, not the default (2 s): longer than the default, so that a lower
// bound tells them apart (a lower bound holds however loaded the machine is; the reads' ceiling
// says the timeout fires at all).
TEST_F(MetricsHttpTest, ReadTimeoutAnswers408OrClosesIdleConnection) {
  HttpServerOptions options;
  options.read_timeout = milliseconds(3000);
  ASSERT_GT(options.read_timeout, HttpServerOptions{}.read_timeout);
  auto server = StartOrDie(options);
  ASSERT_NE(server, nullptr);
  auto start = Clock::now();  // before the connections: the deadline counts from their accept
  ClientSocket partial(server->port());
  ClientSocket idle(server->port());
  ASSERT_TRUE(partial.connected() && idle.connected());
  ASSERT_TRUE(partial.SendAll("GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  std::string raw;
  ASSERT_TRUE(partial.ReadToEof(raw));
  EXPECT_EQ(ParseResponse(raw).status, 408) << raw;
  std::string idle_raw;
  ASSERT_TRUE(idle.ReadToEof(idle_raw));
  EXPECT_EQ(idle_raw, "");
  EXPECT_GE(Clock::now() - start, options.read_timeout);
  partial.Close();
  idle.Close();
  EXPECT_TRUE(WaitFor([&] { return server->connections() == 0; }));
}

TEST_F(MetricsHttpTest, StartOnPortInUseGivesClearError) {
  auto first = StartOrDie();
  ASSERT_NE(first, nullptr);
  std::string addr = fmt::format("127.0.0.1:{}", first->port());
  auto second = HttpServer::Start(registry_, addr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), fmt::format("metrics listen {}: Address already in use", addr));
  // The first server is unaffected.
  EXPECT_EQ(Exchange(first->port(), "GET /healthz HTTP/1.1\r\n\r\n").status, 200);
}

TEST_F(MetricsHttpTest, StartRejectsMalformedAddresses) {
  for (const char* addr : {"127.0.0.1", "127.0.0.1:", ":9464", "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:http",
                           "example.com:9464", "::1:9464", "1.2.3:9464"}) {
    auto server = HttpServer::Start(registry_, addr);
    ASSERT_FALSE(server.ok()) << addr;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << addr;
    EXPECT_NE(std::string(server.status().message()).find(addr), std::string::npos) << server.status();
  }
  auto local = HttpServer::Start(registry_, "localhost:0");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(Exchange((*local)->port(), "GET /healthz HTTP/1.1\r\n\r\n").status, 200);
}

TEST_F(MetricsHttpTest, StopWhileClientHoldsConnectionReturnsPromptly) {
  HttpServerOptions options;
  options.read_timeout = std::chrono::hours(1);  // Stop must not wait for it
  auto server = StartOrDie(options);
  ASSERT_NE(server, nullptr);
  int port = server->port();
  ClientSocket holder(port);
  ClientSocket idle(port);
  ASSERT_TRUE(holder.connected() && idle.connected());
  ASSERT_TRUE(holder.SendAll("GET /metrics HTTP/1.1\r\n"));
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 2; })) << server->connections();

  {
    // A Stop() that waited for the held connections' read timeout would hang the test binary
    // for an hour: abort with a reason after a minute instead.
    std::promise<void> stopped;
    std::future<void> done = stopped.get_future();
    std::thread stopper([&] {
      server->Stop();
      stopped.set_value();
    });
    if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      std::fprintf(stderr, "HttpServer::Stop() did not return within 60 s\n");
      std::abort();
    }
    stopper.join();
  }
  EXPECT_EQ(server->connections(), 0u);

  // The held connections were closed (EOF or reset) by Stop, long before the read timeout.
  std::string raw;
  ASSERT_TRUE(holder.ReadToEof(raw));
  EXPECT_EQ(raw, "");
  ASSERT_TRUE(idle.ReadToEof(raw));
  // And nothing listens any more.
  ClientSocket late(port);
  EXPECT_FALSE(late.connected());

  server->Stop();  // idempotent
}

TEST_F(MetricsHttpTest, ConcurrentScrapesAndStopFromAnotherThread) {
  auto server = StartOrDie();
  ASSERT_NE(server, nullptr);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        ClientSocket s(server->port());
        if (!s.connected() || !s.SendAll("GET /metrics HTTP/1.1\r\n\r\n")) continue;
        std::string raw;
        if (s.ReadToEof(raw) && ParseResponse(raw).status == 200) ++ok;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 160);
  std::thread stopper([&] { server->Stop(); });
  server->Stop();
  stopper.join();
}

}  // namespace
}  // namespace symdex::metrics
