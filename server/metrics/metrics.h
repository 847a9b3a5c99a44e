// A small, dependency-free Prometheus metrics library: counters, gauges and histograms kept in a
// Registry and rendered in the text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
// Hot path: Counter::Inc, Gauge::Set/Add and Histogram::Observe are lock-free atomics. The
// Registry::Get* calls take a mutex and do a map lookup, so look a metric up once and keep the
// reference: metrics live as long as their Registry and never move.
//
// Misuse that can only be a programming error — an invalid metric or label name, a duplicate
// label name, a histogram label called "le", or asking for an existing name with a different
// type — prints the reason to stderr and aborts, like a failed CHECK. It fails on the first call,
// so a test that touches the metric finds it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace symdex::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing value (requests served, errors, ...).
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds v. Counters never go down: a negative or NaN v is ignored.
  void Inc(double v = 1);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down (open connections, rows in a table, ...).
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts observations into buckets with the given upper bounds (inclusive: an observation equal
// to a bound falls into that bucket, as Prometheus' `le` says), plus their sum and count.
class Histogram {
 public:
  // Bounds are sorted and de-duplicated; NaN and +Inf are dropped (+Inf is always implicit).
  explicit Histogram(std::vector<double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // NaN lands in the +Inf bucket and makes the sum NaN, as Prometheus' own clients do.
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;        // finite upper bounds, ascending
    std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries; the last is +Inf == count
    double sum = 0;
    uint64_t count = 0;
  };
  // Not an atomic snapshot across buckets under concurrent Observe, but always self-consistent:
  // cumulative counts never decrease and count equals the +Inf bucket. The sum may lag or lead
  // the counts by the observations in flight.
  Snapshot Collect() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket (not cumulative), +Inf last
  std::atomic<double> sum_{0};
};

// 5e-6 s to 10 s in 1-2.5-5 steps (20 bounds): RPC latencies from a cache hit to a slow query.
std::vector<double> DefaultLatencyBuckets();

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry();

  // The same (name, labels) returns the same object; label order does not matter. A family's
  // help, type (and a histogram's buckets) are fixed by its first call; later calls' values for
  // them are ignored, except that a different type aborts (see the top of this file).
  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  // Empty buckets = DefaultLatencyBuckets().
  Histogram& GetHistogram(const std::string& name, const std::string& help, const Labels& labels = {},
                          std::vector<double> buckets = {});

  // Called, in the order added, at the start of every Render() and without the registry's lock
  // held, so it may call Get*() (e.g. to set gauges read from a database). Concurrent Render()s
  // run collectors concurrently.
  void AddCollector(std::function<void(Registry&)> fn);

  // Text exposition format 0.0.4: families sorted by name, series by label set; # HELP and
  // # TYPE lines; histograms as _bucket{...,le="..."} (cumulative, ending in le="+Inf"), _sum
  // and _count. Families with no series are omitted.
  std::string Render();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    Type type;
    std::string help;
    std::vector<double> buckets;      // histograms only, normalized
    std::map<Labels, Series> series;  // keys sorted by label name
  };

  Series& GetSeries(const std::string& name, const std::string& help, const Labels& labels, Type type,
                    std::vector<double> buckets) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::string_view TypeName(Type type);

  absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);

  absl::Mutex collectors_mu_;
  std::vector<std::shared_ptr<const std::function<void(Registry&)>>> collectors_ ABSL_GUARDED_BY(collectors_mu_);
};

// Exposed for tests and for callers that build exposition text themselves.
// Label values: backslash, double quote and newline escaped as \\ \" \n.
std::string EscapeLabelValue(const std::string& value);
// # HELP text: backslash and newline escaped as \\ \n.
std::string EscapeHelp(const std::string& help);
// A sample value: shortest round-trip decimal, "NaN", "+Inf" or "-Inf".
std::string FormatValue(double v);

}  // namespace symdex::metrics
