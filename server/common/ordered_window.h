// Work done by several threads and taken by one in order, the workers at most `ahead` items past
// the last one taken: what waits to be taken is bounded, whatever the number of items. (The
// index run's module files: read by threads, their symbols spilled in path order; parsed by
// workers, stored in plan order.)
//
//   OrderedWindow w(n, ahead);
//   workers:  for (size_t i; (i = w.Claim()) != OrderedWindow::kNone;) { work(i); w.Done(i); }
//   taker:    for (size_t i = 0; i < n; ++i) { w.WaitDone(i); take(i); w.Taken(i); }
//   on error: w.Stop() (workers' next Claim returns kNone), then join the workers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace symdex {

class OrderedWindow {
 public:
  static constexpr size_t kNone = static_cast<size_t>(-1);

  OrderedWindow(size_t n, size_t ahead) : n_(n), ahead_(ahead == 0 ? 1 : ahead), done_(n, 0) {}

  // The next item to work on, once it is within `ahead` of the last taken; kNone when every
  // item is claimed or the window is stopped.
  size_t Claim() {
    std::unique_lock<std::mutex> l(mu_);
    room_.wait(l, [&] { return stop_ || next_ >= n_ || next_ < taken_ + ahead_; });
    if (stop_ || next_ >= n_) return kNone;
    return next_++;
  }
  void Done(size_t i) {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_[i] = 1;
    }
    arrived_.notify_all();
  }
  void WaitDone(size_t i) {
    std::unique_lock<std::mutex> l(mu_);
    arrived_.wait(l, [&] { return done_[i] != 0; });
  }
  // Items up to and including `i` are taken: the workers may go `ahead` past it.
  void Taken(size_t i) {
    {
      std::lock_guard<std::mutex> l(mu_);
      taken_ = i + 1;
    }
    room_.notify_all();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    room_.notify_all();
  }

 private:
  const size_t n_, ahead_;
  std::mutex mu_;
  std::condition_variable arrived_, room_;
  std::vector<char> done_;
  size_t next_ = 0, taken_ = 0;
  bool stop_ = false;
};

}  // namespace symdex
