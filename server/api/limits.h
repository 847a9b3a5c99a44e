// Bounded work per caller.
//
// Every call takes a slot before it does anything: calls in progress (until the answer is
// ready), open streams, and "heavy"
// calls while queued or running (those that parse DWARF, scan a kernel's symbols or build large
// answers: Symbolize, streams' requests, Lines, ListDuplicates, Status, the JIT calls) are counted
// per peer (peers.h: a uid, a certificate name or an IP address) and overall, and so are the
// addresses whose answers are built but not yet read by the client (what bounds the memory that
// unread answers hold). Past a limit the call is refused at once with
// RESOURCE_EXHAUSTED naming the limit — nothing queues without bound. Privileged peers are held
// to the same limits (a peer is a uid: a load generator's 16 threads share one budget, so the
// per-peer defaults leave room for that).
//
// Heavy calls run on a small pool of their own threads, taken from per-peer queues in turn
// (round robin), so a peer with many calls waiting delays only its own; cheap calls (Which,
// Resolve, ProbeDefinition, ListTargets, health) run at once on gRPC's threads and never wait
// behind heavy ones. A queued call whose client has cancelled or whose deadline has passed is
// dropped without running.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/api/peers.h"
#include "server/common/status.h"

namespace symdex::api {

struct CallLimits {
  int calls_per_peer = 256;  // calls in progress (unary and streams)
  int calls = 4096;
  int streams_per_peer = 32;  // server / bidi streams open
  int streams = 512;
  int heavy_per_peer = 32;  // heavy calls queued or running
  int heavy = 256;
  size_t addresses_per_peer = 131072;  // addresses in answers built and not yet read
  size_t addresses = 524288;
  // Whole-target listings (ListSymbols) being built or streamed: each holds a kernel's symbol
  // list (~100 MB for a distro kernel with its modules) until the client has read it.
  int listings_per_peer = 2;
  int listings = 8;
  int heavy_threads = 2;
};

class Limiter {
 public:
  enum class Kind { kCall, kStream, kHeavy, kAddresses, kListing };
  explicit Limiter(CallLimits l) : limits_(l) {}

  // What a peer holds; released when destroyed. Movable, not copyable.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& o) noexcept { *this = std::move(o); }
    Hold& operator=(Hold&& o) noexcept;
    ~Hold() { Release(); }
    void Release();
    bool held() const { return limiter_ != nullptr; }

   private:
    friend class Limiter;
    Limiter* limiter_ = nullptr;
    std::string key_;
    bool per_peer_ = false;
    Kind kind_ = Kind::kCall;
    size_t n_ = 0;
  };

  // ResourceExhausted naming the limit when `peer` (n units of `kind`) would pass it.
  absl::StatusOr<Hold> Take(const Peer& peer, Kind kind, size_t n = 1);
  // One of each kind, in order, appended to `holds`; the first refusal, as Take says it.
  absl::Status TakeEach(const Peer& peer, const std::vector<Kind>& kinds, std::vector<Hold>& holds);
  const CallLimits& limits() const { return limits_; }
  // Units held now, overall (metrics).
  size_t InUse(Kind kind);

 private:
  struct Counts {
    size_t v[5] = {0, 0, 0, 0, 0};
  };
  void Give(const std::string& key, bool per_peer, Kind kind, size_t n);
  CallLimits limits_;
  std::mutex mu_;
  std::map<std::string, Counts> peers_;
  Counts total_;
};

// Runs heavy calls on `threads` threads, one per-peer queue at a time in turn.
class FairPool {
 public:
  explicit FairPool(int threads);
  ~FairPool();
  void Submit(const std::string& peer, std::function<void()> task);
  size_t queued();

 private:
  void Worker();
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::deque<std::function<void()>>> queues_;
  std::string last_;  // the peer served last: the next turn goes to the one after it
  size_t queued_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace symdex::api
