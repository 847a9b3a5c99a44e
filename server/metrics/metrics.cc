#include "server/metrics/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "server/common/enum_names.h"

namespace symdex::metrics {
namespace {

[[noreturn]] void Fatal(const std::string& message) {
  std::fprintf(stderr, "symdex metrics: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

bool IsValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool IsValidLabelName(const std::string& name) {
  if (name.empty() || name.rfind("__", 0) == 0) return false;  // "__" prefix is reserved
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::vector<double> NormalizeBounds(std::vector<double> bounds) {
  bounds.erase(
      std::remove_if(bounds.begin(), bounds.end(), [](double b) { return std::isnan(b) || (std::isinf(b) && b > 0); }),
      bounds.end());
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  return bounds;
}

// `{a="x",b="y"}`, with `extra` (already escaped) appended as a last label, e.g. `le="0.5"`.
// Empty when there is nothing to print.
void AppendLabels(std::string& out, const Labels& labels, const std::string& extra_name = {},
                  const std::string& extra_value = {}) {
  if (labels.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    out += EscapeLabelValue(v);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

}  // namespace

namespace {

// Prometheus text format: backslash and newline escaped everywhere, the double quote too inside
// a label value (HELP text keeps it).
std::string Escape(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) { return Escape(value, true); }

std::string EscapeHelp(const std::string& help) { return Escape(help, false); }

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void Counter::Inc(double v) {
  if (!(v >= 0)) return;  // negative or NaN
  value_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(NormalizeBounds(std::move(bounds))), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  // First bound >= v; NaN compares false with everything and must land in +Inf, not bucket 0.
  size_t i = std::isnan(v) ? bounds_.size()
                           : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot s;
  s.bounds = bounds_;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> DefaultLatencyBuckets() {
  return {5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
          1e-2, 2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1,    2.5,  5,      10};
}

Registry::~Registry() = default;

std::string_view Registry::TypeName(Type type) {
  static constexpr std::array<EnumName<Type>, 3> kNames = {
      {{Type::kCounter, "counter"}, {Type::kGauge, "gauge"}, {Type::kHistogram, "histogram"}}};
  return NameIn(kNames, type, "untyped");
}

Registry::Series& Registry::GetSeries(const std::string& name, const std::string& help, const Labels& labels, Type type,
                                      std::vector<double> buckets) {
  if (!IsValidMetricName(name)) Fatal(fmt::format("invalid metric name '{}'", name));
  Labels key = labels;
  std::sort(key.begin(), key.end());
  for (size_t i = 0; i < key.size(); ++i) {
    if (!IsValidLabelName(key[i].first)) {
      Fatal(fmt::format("metric '{}': invalid label name '{}'", name, key[i].first));
    }
    if (i > 0 && key[i].first == key[i - 1].first) {
      Fatal(fmt::format("metric '{}': label '{}' given twice", name, key[i].first));
    }
    if (type == Type::kHistogram && key[i].first == "le") {
      Fatal(fmt::format("histogram '{}': label name 'le' is reserved for buckets", name));
    }
  }

  auto [it, inserted] = families_.try_emplace(name);
  Family& family = it->second;
  if (inserted) {
    family.type = type;
    family.help = help;
    if (type == Type::kHistogram) {
      family.buckets = NormalizeBounds(buckets.empty() ? DefaultLatencyBuckets() : std::move(buckets));
    }
  } else if (family.type != type) {
    Fatal(fmt::format("metric '{}' requested as a {} but already registered as a {}", name, TypeName(type),
                      TypeName(family.type)));
  }

  auto [sit, created] = family.series.try_emplace(std::move(key));
  Series& series = sit->second;
  if (created) {
    switch (type) {
      case Type::kCounter:
        series.counter = std::make_unique<Counter>();
        break;
      case Type::kGauge:
        series.gauge = std::make_unique<Gauge>();
        break;
      case Type::kHistogram:
        series.histogram = std::make_unique<Histogram>(family.buckets);
        break;
    }
  }
  return series;
}

Counter& Registry::GetCounter(const std::string& name, const std::string& help, const Labels& labels) {
  absl::MutexLock lock(&mu_);
  return *GetSeries(name, help, labels, Type::kCounter, {}).counter;
}

Gauge& Registry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  absl::MutexLock lock(&mu_);
  return *GetSeries(name, help, labels, Type::kGauge, {}).gauge;
}

Histogram& Registry::GetHistogram(const std::string& name, const std::string& help, const Labels& labels,
                                  std::vector<double> buckets) {
  absl::MutexLock lock(&mu_);
  return *GetSeries(name, help, labels, Type::kHistogram, std::move(buckets)).histogram;
}

void Registry::AddCollector(std::function<void(Registry&)> fn) {
  auto shared = std::make_shared<const std::function<void(Registry&)>>(std::move(fn));
  absl::MutexLock lock(&collectors_mu_);
  collectors_.push_back(std::move(shared));
}

std::string Registry::Render() {
  std::vector<std::shared_ptr<const std::function<void(Registry&)>>> collectors;
  {
    absl::MutexLock lock(&collectors_mu_);
    collectors = collectors_;
  }
  for (const auto& fn : collectors) (*fn)(*this);

  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) {
    if (family.series.empty()) continue;
    fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, EscapeHelp(family.help), name,
                   TypeName(family.type));
    for (const auto& [labels, series] : family.series) {
      switch (family.type) {
        case Type::kCounter:
        case Type::kGauge: {
          out += name;
          AppendLabels(out, labels);
          out += ' ';
          out += FormatValue(family.type == Type::kCounter ? series.counter->Value() : series.gauge->Value());
          out += '\n';
          break;
        }
        case Type::kHistogram: {
          Histogram::Snapshot s = series.histogram->Collect();
          for (size_t i = 0; i <= s.bounds.size(); ++i) {
            out += name;
            out += "_bucket";
            AppendLabels(out, labels, "le", i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf");
            out += ' ';
            out += std::to_string(s.cumulative[i]);
            out += '\n';
          }
          out += name;
          out += "_sum";
          AppendLabels(out, labels);
          out += ' ';
          out += FormatValue(s.sum);
          out += '\n';
          out += name;
          out += "_count";
          AppendLabels(out, labels);
          out += ' ';
          out += std::to_string(s.count);
          out += '\n';
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace symdex::metrics
