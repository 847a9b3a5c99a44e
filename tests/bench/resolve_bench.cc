// In-process latency of spec resolution against a real index (the query layer the CLI and the
// daemon share), with Google Benchmark. Uses the index at $SYMDEX_DB (e.g. the Debian kernel
// indexed by tests/bench/index_dwarf.sh or tests/integration/debian_kernel.sh's steps):
//   SYMDEX_DB=/tmp/debian.db build/bin/resolve_bench
// Specs: every canonical spec of the target's duplicated text names, resolved round-robin.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>

#include "server/query/local_query.h"
#include "server/query/resolver.h"
#include "server/store/migrations.h"
#include "server/store/open_index.h"

namespace {

struct Fixture {
  symdex::store::Db db;
  symdex::TargetInfo target;
  std::vector<symdex::query::Spec> specs;
  std::vector<symdex::query::Spec> names;
  std::vector<std::string> spec_texts;
  std::unique_ptr<symdex::query::LocalQuery> service;  // the daemon's query layer, caches on
};

Fixture* Load() {
  static Fixture* f = [] {
    const char* path = std::getenv("SYMDEX_DB");
    if (path == nullptr) {
      std::cerr << "set SYMDEX_DB to an index (see the header comment)\n";
      std::exit(2);
    }
    auto db = symdex::store::OpenIndex(path, symdex::store::IndexUse::kRead);
    if (!db.ok()) {
      std::cerr << db.status().message() << "\n";
      std::exit(2);
    }
    auto* fx = new Fixture{std::move(*db)};
    fx->target = *symdex::query::SelectTarget(fx->db, "");
    auto groups = symdex::query::Dups(fx->db, fx->target, {});
    for (const auto& g : *groups) {
      for (const auto& in : g.instances) {
        std::string text = *symdex::query::CanonicalSpecFor(fx->db, fx->target, in);
        fx->specs.push_back(*symdex::query::ParseSpec(text));
        fx->spec_texts.push_back(text);
      }
      fx->names.push_back(*symdex::query::ParseSpec(g.name));
    }
    fx->service = std::move(*symdex::query::LocalQuery::Open(path, {}));
    std::cerr << fx->specs.size() << " canonical specs of " << fx->names.size() << " duplicated names\n";
    return fx;
  }();
  return f;
}

void BM_ResolveCanonicalSpec(benchmark::State& state) {
  Fixture* f = Load();
  size_t i = 0;
  for (auto _ : state) {
    auto m = symdex::query::MatchSpec(f->db, f->target, f->specs[i++ % f->specs.size()]);
    if (!m.ok() || m->size() != 1) state.SkipWithError("canonical spec did not resolve to one instance");
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_ResolveCanonicalSpec)
    ->ComputeStatistics("p50",
                        [](const std::vector<double>& v) {
                          std::vector<double> s = v;
                          std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
                          return s[s.size() / 2];
                        })
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_ResolveAmbiguousName(benchmark::State& state) {
  Fixture* f = Load();
  size_t i = 0;
  for (auto _ : state) {
    auto m = symdex::query::MatchSpec(f->db, f->target, f->names[i++ % f->names.size()]);
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_ResolveAmbiguousName)->Repetitions(5)->ReportAggregatesOnly(true);

// What a daemon Resolve call costs besides gRPC: LocalQuery::Resolve (snapshot, target, cached
// name lookup, matching, canonical spec), warm.
void BM_ServiceResolveCanonicalSpecWarm(benchmark::State& state) {
  Fixture* f = Load();
  for (const auto& t : f->spec_texts) (void)f->service->Resolve("", t);  // warm the cache
  size_t i = 0;
  for (auto _ : state) {
    auto m = f->service->Resolve("", f->spec_texts[i++ % f->spec_texts.size()]);
    if (!m.ok() || m->matches.size() != 1) state.SkipWithError("canonical spec did not resolve to one instance");
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_ServiceResolveCanonicalSpecWarm)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
