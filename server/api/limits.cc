#include "server/api/limits.h"

#include "server/api/methods.h"
#include "server/common/strings.h"

namespace symdex::api {
namespace {

std::string KindName(Limiter::Kind k) {
  switch (k) {
    case Limiter::Kind::kCall:
      return "calls in progress";
    case Limiter::Kind::kStream:
      return "open streams";
    case Limiter::Kind::kHeavy:
      return StrCat("heavy calls (", HeavyMethodNames(), ") queued or running");
    case Limiter::Kind::kAddresses:
      return "addresses in answers not yet read";
    case Limiter::Kind::kListing:
      return "symbol listings in progress";
  }
  return "?";
}

}  // namespace

Limiter::Hold& Limiter::Hold::operator=(Hold&& o) noexcept {
  if (this != &o) {
    Release();
    limiter_ = o.limiter_;
    key_ = std::move(o.key_);
    per_peer_ = o.per_peer_;
    kind_ = o.kind_;
    n_ = o.n_;
    o.limiter_ = nullptr;
  }
  return *this;
}

void Limiter::Hold::Release() {
  if (limiter_ == nullptr) return;
  limiter_->Give(key_, per_peer_, kind_, n_);
  limiter_ = nullptr;
}

absl::StatusOr<Limiter::Hold> Limiter::Take(const Peer& peer, Kind kind, size_t n) {
  const int k = static_cast<int>(kind);
  // Each kind's bounds, per peer and in all, in Kind's order.
  const std::pair<size_t, size_t> bounds[] = {
      {limits_.calls_per_peer, limits_.calls},       {limits_.streams_per_peer, limits_.streams},
      {limits_.heavy_per_peer, limits_.heavy},       {limits_.addresses_per_peer, limits_.addresses},
      {limits_.listings_per_peer, limits_.listings},
  };
  const auto [peer_limit, total_limit] = bounds[k];
  const bool per_peer = true;
  std::lock_guard<std::mutex> l(mu_);
  if (total_.v[k] + n > total_limit) {
    return absl::ResourceExhaustedError(StrCat("the daemon is at its limit of ", total_limit, " ", KindName(kind), " (",
                                               total_.v[k], " held); retry later"));
  }
  if (per_peer) {
    Counts& c = peers_[peer.key];
    if (c.v[k] + n > peer_limit) {
      return absl::ResourceExhaustedError(StrCat(peer.description, " is at its limit of ", peer_limit, " ",
                                                 KindName(kind), " (", c.v[k], " held); finish or read those first"));
    }
    c.v[k] += n;
  }
  total_.v[k] += n;
  Hold h;
  h.limiter_ = this;
  h.key_ = peer.key;
  h.per_peer_ = per_peer;
  h.kind_ = kind;
  h.n_ = n;
  return h;
}

absl::Status Limiter::TakeEach(const Peer& peer, const std::vector<Kind>& kinds, std::vector<Hold>& holds) {
  for (Kind kind : kinds) {
    ASSIGN_OR_RETURN(Hold h, Take(peer, kind));
    holds.push_back(std::move(h));
  }
  return absl::OkStatus();
}

void Limiter::Give(const std::string& key, bool per_peer, Kind kind, size_t n) {
  const int k = static_cast<int>(kind);
  std::lock_guard<std::mutex> l(mu_);
  total_.v[k] -= n;
  if (!per_peer) return;
  auto it = peers_.find(key);
  if (it == peers_.end()) return;
  it->second.v[k] -= n;
  bool empty = true;
  for (size_t v : it->second.v) empty &= v == 0;
  if (empty) peers_.erase(it);
}

size_t Limiter::InUse(Kind kind) {
  std::lock_guard<std::mutex> l(mu_);
  return total_.v[static_cast<int>(kind)];
}

FairPool::FairPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Worker(); });
}

FairPool::~FairPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void FairPool::Submit(const std::string& peer, std::function<void()> task) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queues_[peer].push_back(std::move(task));
    ++queued_;
  }
  cv_.notify_one();
}

size_t FairPool::queued() {
  std::lock_guard<std::mutex> l(mu_);
  return queued_;
}

void FairPool::Worker() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || queued_ > 0; });
      if (queued_ == 0) return;  // stopping, nothing left
      // The first peer after the one served last (wrapping around).
      auto it = queues_.upper_bound(last_);
      if (it == queues_.end()) it = queues_.begin();
      task = std::move(it->second.front());
      it->second.pop_front();
      last_ = it->first;
      if (it->second.empty()) queues_.erase(it);
      --queued_;
    }
    task();
  }
}

}  // namespace symdex::api
