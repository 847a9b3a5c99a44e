// symdex index: build or refresh one target in the index.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "client/cli_common.h"
#include "server/common/strings.h"
#include "server/store/index_store.h"
#include "server/target/live_host.h"
#include "server/target/offline_kernel.h"

namespace symdex::cli {
namespace {

struct IndexOptions {
  std::string sysroot;
  std::string system_map;
  std::string modules_dir;
  std::string name;
  std::string release;
  unsigned jobs = 0;
  bool quiet = false;
};

int RunIndex(const GlobalOptions& g, const IndexOptions& o) {
  auto start = std::chrono::steady_clock::now();
  const bool tty = !o.quiet && ::isatty(STDERR_FILENO);
  target::ProgressFn progress;
  if (tty) {
    progress = [](std::string_view stage, size_t done, size_t total) {
      fmt::print(stderr, "\r\033[Kreading {} {}/{}", stage, done, total);
      if (done == total) fmt::print(stderr, "\n");
    };
  }

  absl::StatusOr<target::KernelTarget> loaded;
  if (!o.system_map.empty()) {
    loaded = target::LoadOfflineKernel({.system_map = o.system_map,
                                        .modules_dir = o.modules_dir,
                                        .name = o.name,
                                        .release = o.release,
                                        .jobs = o.jobs,
                                        .progress = progress});
  } else {
    loaded = target::LoadLiveHost({.sysroot = o.sysroot, .name = o.name.empty() ? "host" : o.name});
  }
  if (!loaded.ok()) return Fail(g, loaded.status(), true);
  auto parsed = std::chrono::steady_clock::now();

  auto db = OpenForWrite(g);
  if (!db.ok()) return Fail(g, db.status(), true);
  auto gen = store::ReplaceTarget(*db, *loaded, static_cast<int64_t>(std::time(nullptr)));
  if (!gen.ok()) return Fail(g, gen.status(), true);
  auto end = std::chrono::steady_clock::now();

  const target::KernelTarget& t = *loaded;
  size_t errors = 0;
  for (const auto& f : t.files) errors += f.status == "error";
  double secs = std::chrono::duration<double>(end - start).count();
  double read_secs = std::chrono::duration<double>(parsed - start).count();
  if (g.json) {
    PrintJson({{"target", t.name},
               {"kind", t.kind},
               {"release", t.release},
               {"build_id", t.build_id ? t.build_id->ToHex() : ""},
               {"generation", *gen},
               {"symbols", t.symbols.size()},
               {"modules", t.modules.size()},
               {"file_errors", errors},
               {"warnings", t.warnings},
               {"db", DbPath(g)},
               {"seconds", secs},
               {"read_seconds", read_secs}});
  } else {
    for (const auto& w : t.warnings) fmt::print(stderr, "symdex: warning: {}\n", w);
    if (!o.quiet) {
      fmt::print("indexed {} '{}'{}: {} symbols, {} modules in {:.2f}s (read {:.2f}s) -> {}\n", t.kind, t.name,
                 t.release.empty() ? "" : " (" + t.release + ")", t.symbols.size(), t.modules.size(), secs,
                 read_secs, DbPath(g));
    }
  }
  return kFound;
}

}  // namespace

void AddIndexCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto o = std::make_shared<IndexOptions>();
  CLI::App* c = app.add_subcommand("index", "Index the live host (default) or an offline kernel");
  c->add_option("--sysroot", o->sysroot,
                "Read proc/ and sys/ below DIR instead of / (fixture trees, containers)")
      ->check(CLI::ExistingDirectory);
  auto* sm = c->add_option("--system-map", o->system_map, "Offline kernel: its System.map")
                 ->check(CLI::ExistingFile);
  c->add_option("--modules-dir", o->modules_dir,
                "Offline kernel: directory searched recursively for .ko/.ko.xz/.ko.zst/.ko.gz")
      ->check(CLI::ExistingDirectory)
      ->needs(sm);
  c->add_option("--name", o->name, "Target name (default: 'host' live; the release offline)");
  c->add_option("--release", o->release, "Offline kernel release when it cannot be guessed from the paths")
      ->needs(sm);
  c->add_option("-j,--jobs", o->jobs, "Parallel module readers (default: all cores)");
  c->add_flag("-q,--quiet", o->quiet, "No progress or summary");
  c->get_option("--sysroot")->excludes(sm);
  c->footer(
      "The live host needs /proc/kallsyms with real addresses: run as root or with CAP_SYSLOG.\n"
      "Re-indexing a target replaces it atomically; readers never see half an index.");
  c->callback([&g, &exit_code, o] { exit_code = RunIndex(g, *o); });
}

}  // namespace symdex::cli
