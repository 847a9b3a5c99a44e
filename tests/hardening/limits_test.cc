// The limiter and the fair pool the daemon's calls go through (server/api/limits.h).
#include "server/api/limits.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace symdex::api {
namespace {

Peer P(const std::string& key, bool privileged = false) { return Peer{key, key, privileged, ""}; }

TEST(LimiterTest, PerPeerAndOverallLimitsRefuseAtOnceAndHoldsGiveBack) {
  CallLimits l;
  l.streams_per_peer = 2;
  l.streams = 3;
  Limiter lim(l);
  auto a1 = lim.Take(P("uid:1"), Limiter::Kind::kStream);
  auto a2 = lim.Take(P("uid:1"), Limiter::Kind::kStream);
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = lim.Take(P("uid:1"), Limiter::Kind::kStream);
  ASSERT_FALSE(a3.ok());
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("uid:1 is at its limit of 2 open streams"), std::string::npos)
      << a3.status().message();
  // Another peer has its own budget, up to the overall limit (privileged or not).
  auto b1 = lim.Take(P("uid:2", true), Limiter::Kind::kStream);
  ASSERT_TRUE(b1.ok());
  auto b2 = lim.Take(P("uid:2", true), Limiter::Kind::kStream);
  ASSERT_FALSE(b2.ok());
  EXPECT_NE(b2.status().message().find("daemon is at its limit of 3 open streams"), std::string::npos)
      << b2.status().message();
  EXPECT_EQ(lim.InUse(Limiter::Kind::kStream), 3u);
  {
    Limiter::Hold moved = std::move(*a1);  // moving does not give back twice
    EXPECT_EQ(lim.InUse(Limiter::Kind::kStream), 3u);
  }
  EXPECT_EQ(lim.InUse(Limiter::Kind::kStream), 2u);
  EXPECT_TRUE(lim.Take(P("uid:1"), Limiter::Kind::kStream).ok());  // taken and given back at once
  a2->Release();
  b1->Release();
  EXPECT_EQ(lim.InUse(Limiter::Kind::kStream), 0u);
}

TEST(LimiterTest, AddressesCountByTheNumberAsked) {
  CallLimits l;
  l.addresses_per_peer = 100000;
  Limiter lim(l);
  auto a = lim.Take(P("uid:1"), Limiter::Kind::kAddresses, 65536);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(lim.Take(P("uid:1"), Limiter::Kind::kAddresses, 65536).ok());
  EXPECT_TRUE(lim.Take(P("uid:1"), Limiter::Kind::kAddresses, 30000).ok());
}

TEST(LimiterTest, SymbolListingsHaveTheirOwnLimit) {
  CallLimits l;  // defaults: 2 per peer, 8 overall
  Limiter lim(l);
  auto a1 = lim.Take(P("uid:1"), Limiter::Kind::kListing);
  auto a2 = lim.Take(P("uid:1"), Limiter::Kind::kListing);
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = lim.Take(P("uid:1"), Limiter::Kind::kListing);
  ASSERT_FALSE(a3.ok());
  EXPECT_NE(a3.status().message().find("limit of 2 symbol listings in progress"), std::string::npos)
      << a3.status().message();
  // Streams and heavy calls are counted apart: the peer may still do other work.
  EXPECT_TRUE(lim.Take(P("uid:1"), Limiter::Kind::kStream).ok());
  EXPECT_EQ(lim.InUse(Limiter::Kind::kListing), 2u);
}

TEST(FairPoolTest, APeerWithABacklogDelaysOnlyItself) {
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<bool> go{false}, blocked{false};
  {
    FairPool pool(1);
    // Block the only thread, queue 10 calls of peer A, then one of peer B.
    pool.Submit("A", [&] {
      blocked = true;
      while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (!blocked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int i = 0; i < 10; ++i) {
      pool.Submit("A", [&] {
        std::lock_guard<std::mutex> l(mu);
        order.push_back("A");
      });
    }
    pool.Submit("B", [&] {
      std::lock_guard<std::mutex> l(mu);
      order.push_back("B");
    });
    EXPECT_EQ(pool.queued(), 11u);
    go = true;
  }  // the pool's destructor returns once every queued call has run
  ASSERT_EQ(order.size(), 11u);
  // B ran second at the latest: turns alternate between peers with work waiting.
  auto b = std::find(order.begin(), order.end(), "B") - order.begin();
  EXPECT_LE(b, 1) << "B waited behind " << b << " of A's calls";
}

}  // namespace
}  // namespace symdex::api
