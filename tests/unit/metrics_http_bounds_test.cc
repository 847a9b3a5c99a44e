// The metrics endpoint's bounds against slow, idle and numerous clients, and what cpp-httplib
// adds (compression) or handles for us (a failing collector). The basic endpoint contract is in
// metrics_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "server/metrics/http_server.h"
#include "server/metrics/metrics.h"
#include "tests/unit/http_test_client.h"

namespace symdex::metrics {
namespace {

using http_test::ClientSocket;
using http_test::Exchange;
using http_test::HttpResponse;
using http_test::ParseResponse;
using http_test::WaitFor;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::unique_ptr<HttpServer> StartOrDie(Registry& registry, HttpServerOptions options = {}) {
  auto server = HttpServer::Start(registry, "127.0.0.1:0", options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  return std::move(server).value();
}

// Runs server->Stop() and aborts the test binary, with a reason, if it has not returned within
// 60 s (the tests that call it hold connections whose read timeout is an hour).
void StopOrAbort(HttpServer& server) {
  std::promise<void> stopped;
  std::future<void> done = stopped.get_future();
  std::thread stopper([&] {
    server.Stop();
    stopped.set_value();
  });
  if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "HttpServer::Stop() did not return within 60 s\n");
    std::abort();
  }
  stopper.join();
}

std::string Gunzip(const std::string& in) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return "<inflateInit2 failed>";
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
  }
  inflateEnd(&zs);
  return rc == Z_STREAM_END ? out : "<not a complete gzip stream>";
}

// A client that keeps sending a byte of header every 50 ms never resets a per-read timeout into
// an endless request: the read deadline counts from accept. The client trickles until the server
// closes; a server that restarted its deadline at every byte would keep it past the read's
// one-minute ceiling.
TEST(MetricsHttpBoundsTest, TrickledHeadersStillTimeOutAtTheReadDeadline) {
  Registry registry;
  HttpServerOptions options;
  options.read_timeout = milliseconds(300);
  auto server = StartOrDie(registry, options);
  ASSERT_NE(server, nullptr);
  auto start = Clock::now();  // before connect: the deadline counts from accept
  ClientSocket slow(server->port());
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.SendAll("GET /metrics HTTP/1.1\r\nX-Slow: "));
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      if (!slow.SendAll("a")) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  std::string raw;
  bool eof = slow.ReadToEof(raw);
  auto took = Clock::now() - start;
  done = true;
  trickle.join();
  ASSERT_TRUE(eof) << "still reading after a minute of trickled headers: " << raw;
  EXPECT_EQ(ParseResponse(raw).status, 408) << raw;
  EXPECT_GE(took, options.read_timeout);
}

// With one worker and room for two connections, a third client is not accepted (it waits in the
// kernel's backlog) while the two idle ones hold their slots; once they go, it is served. (That
// idle connections are dropped at their read deadline: ReadTimeoutAnswers408OrClosesIdleConnection.)
TEST(MetricsHttpBoundsTest, ConnectionsBeyondTheLimitWaitInTheBacklog) {
  Registry registry;
  HttpServerOptions options;
  options.threads = 1;
  options.max_connections = 2;
  options.read_timeout = std::chrono::hours(1);  // the slots are freed by the clients, below
  auto server = StartOrDie(registry, options);
  ASSERT_NE(server, nullptr);
  ClientSocket a(server->port());
  ClientSocket b(server->port());
  ClientSocket c(server->port());  // connect() completes in the backlog
  ASSERT_TRUE(a.connected() && b.connected() && c.connected());
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 2; })) << server->connections();

  ASSERT_TRUE(c.SendAll("GET /healthz HTTP/1.1\r\n\r\n"));
  // Not served while both slots are held (however long we look: a short look can only miss a
  // wrong answer on a slow machine, never invent one).
  std::string raw;
  EXPECT_FALSE(c.ReadToEof(raw, milliseconds(300))) << "served beyond max_connections: " << raw;
  EXPECT_EQ(raw, "");
  EXPECT_EQ(server->connections(), 2u) << "accepted beyond max_connections";

  a.Close();
  b.Close();
  ASSERT_TRUE(c.ReadToEof(raw)) << "not served once the slots were free";
  EXPECT_EQ(ParseResponse(raw).status, 200) << raw;
  EXPECT_EQ(ParseResponse(raw).body, "ok\n");
}

// Stop() while the accept loop waits for a free slot, every worker busy with an idle client.
TEST(MetricsHttpBoundsTest, StopWhileFullReturnsPromptly) {
  Registry registry;
  HttpServerOptions options;
  options.threads = 1;
  options.max_connections = 1;
  options.read_timeout = std::chrono::hours(1);  // Stop must not wait for it
  auto server = StartOrDie(registry, options);
  ASSERT_NE(server, nullptr);
  int port = server->port();
  ClientSocket a(port);
  ClientSocket b(port);
  ClientSocket c(port);
  ASSERT_TRUE(a.connected() && b.connected() && c.connected());
  ASSERT_TRUE(WaitFor([&] { return server->connections() == 1; }));
  std::this_thread::sleep_for(milliseconds(50));  // the accept loop now waits in the pool

  StopOrAbort(*server);
  EXPECT_EQ(server->connections(), 0u);
  std::string raw;
  ASSERT_TRUE(a.ReadToEof(raw));
  EXPECT_EQ(raw, "");
  ClientSocket late(port);
  EXPECT_FALSE(late.connected());
}

// Prometheus sends Accept-Encoding: gzip; the body is then the gzip of the same exposition text.
TEST(MetricsHttpBoundsTest, GzipWhenTheClientAsks) {
  Registry registry;
  for (int i = 0; i < 50; ++i) {
    registry.GetCounter("symdex_rpcs_total", "RPCs.", {{"rpc", fmt::format("Rpc{}", i)}}).Inc(i);
  }
  auto server = StartOrDie(registry);
  ASSERT_NE(server, nullptr);
  HttpResponse resp = Exchange(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(resp.status, 200) << resp.head;
  EXPECT_NE(resp.head.find("\r\nContent-Encoding: gzip\r\n"), std::string::npos) << resp.head;
  EXPECT_NE(resp.head.find(fmt::format("\r\nContent-Length: {}\r\n", resp.body.size())), std::string::npos)
      << resp.head;
  std::string text = Gunzip(resp.body);
  EXPECT_EQ(text, registry.Render());
  EXPECT_LT(resp.body.size(), text.size());
}

// A collector that throws (a database gone away) gives a 500 that says why, and the endpoint
// keeps serving.
TEST(MetricsHttpBoundsTest, ThrowingCollectorGives500WithTheReason) {
  Registry registry;
  std::atomic<bool> fail{true};
  registry.AddCollector([&](Registry& r) {
    if (fail) throw std::runtime_error("index database is locked");
    r.GetGauge("symdex_up", "Up.").Set(1);
  });
  auto server = StartOrDie(registry);
  ASSERT_NE(server, nullptr);
  HttpResponse resp = Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(resp.status, 500) << resp.head;
  EXPECT_EQ(resp.body, "rendering metrics failed: index database is locked\n");
  EXPECT_EQ(Exchange(server->port(), "GET /healthz HTTP/1.1\r\n\r\n").status, 200);
  fail = false;
  resp = Exchange(server->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(resp.status, 200);
  EXPECT_NE(resp.body.find("symdex_up 1\n"), std::string::npos) << resp.body;
}

}  // namespace
}  // namespace symdex::metrics
