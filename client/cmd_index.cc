// symdex index: build or refresh one target in the index.
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <ctime>
#include <optional>

#include "client/cli_common.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/indexer/index_request.h"

namespace symdex::cli {
namespace {

struct IndexOptions {
  std::string sysroot;
  std::string system_map;
  std::string modules_dir;
  std::string name;
  std::string release;
  std::string vmlinux;
  std::vector<std::string> debug_dirs;
  bool no_debuginfo = false;
  bool no_debuginfod = false;
  bool no_addr_map = false;
  unsigned jobs = 0;
  bool quiet = false;
  bool force = false;
  std::string kernel_config;
  std::optional<std::string> build_id;        // given (even empty: that is a bad build-ID, not "none")
  std::vector<std::string> module_build_ids;  // NAME=BUILDID, with --build-id
};

// The input paths exist, of the right kind. Checked here rather than by CLI11 (whose failures
// are usage errors, exit 2): a missing input file is an input error (exit 3), and is reported
// before the index file is created or touched.
absl::Status CheckInputPaths(const IndexOptions& o) {
  struct Want {
    const char* flag;
    const std::string* path;
    bool dir;
  };
  std::vector<Want> wants = {{"--sysroot", &o.sysroot, true},
                             {"--system-map", &o.system_map, false},
                             {"--modules-dir", &o.modules_dir, true},
                             {"--vmlinux", &o.vmlinux, false},
                             {"--kernel-config", &o.kernel_config, false}};
  for (const auto& d : o.debug_dirs) wants.push_back({"--debug-dir", &d, true});
  for (const Want& w : wants) {
    if (w.path->empty()) continue;
    struct stat st;
    if (::stat(w.path->c_str(), &st) != 0) {
      return absl::NotFoundError(StrCat(w.flag, " ", *w.path, ": ", std::strerror(errno)));
    }
    if (w.dir != S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          StrCat(w.flag, " ", *w.path, ": ", w.dir ? "not a directory" : "is a directory"));
    }
  }
  return absl::OkStatus();
}

int RunIndex(const GlobalOptions& g, const IndexOptions& o) {
  if (auto paths = CheckInputPaths(o); !paths.ok()) return Fail(g, paths, true);
  const bool tty = !o.quiet && ::isatty(STDERR_FILENO);
  indexer::IndexRequest req;
  if (tty) {
    req.progress = [](std::string_view stage, size_t done, size_t total) {
      fmt::print(stderr, "\r\033[Kreading {} {}/{}", stage, done, total);
      if (done == total) fmt::print(stderr, "\n");
    };
  }
  if (o.build_id) {
    req.build_id = BuildIdTargetOptions{.build_id = *o.build_id, .name = o.name};
    for (const std::string& m : o.module_build_ids) {
      const size_t eq = m.find('=');
      if (eq == std::string::npos || eq == 0) {
        return Fail(g, absl::InvalidArgumentError(StrCat("--module-build-id ", m, ": expected NAME=BUILDID")), true);
      }
      req.build_id->modules.push_back({m.substr(0, eq), m.substr(eq + 1)});
    }
  } else if (!o.system_map.empty()) {
    req.offline = OfflineKernelOptions{.system_map = o.system_map,
                                       .modules_dir = o.modules_dir,
                                       .name = o.name,
                                       .release = o.release,
                                       .vmlinux = o.vmlinux,
                                       .jobs = o.jobs,
                                       .progress = req.progress};
  } else {
    req.live = LiveHostOptions{.sysroot = o.sysroot, .name = o.name.empty() ? "host" : o.name};
  }
  req.debuginfo = !o.no_debuginfo;
  req.jobs = o.jobs;
  req.addr_maps = !o.no_addr_map;
  req.force = o.force;
  req.kernel_config = o.kernel_config;
  req.finder = DebugFinderOptions{.debug_dirs = o.debug_dirs,
                                  .sysroot = o.sysroot,
                                  .vmlinux = o.vmlinux,
                                  .use_debuginfod = !o.no_debuginfod,
                                  .debuginfod_progress = tty};

  auto start = std::chrono::steady_clock::now();
  auto sum = indexer::IndexInto(DbPath(g), req);
  if (!sum.ok()) return Fail(g, sum.status(), true);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const indexer::IndexSummary& s = *sum;
  // A vmlinux named with --vmlinux that cannot be read is an input error (its symbols are indexed
  // all the same); otherwise a warning: the debug files are whatever the host has.
  if (!s.vmlinux_debug_error.empty() && !g.json) {  // (--json: the "vmlinux_debug_error" field)
    fmt::print(stderr, "symdex: {}: vmlinux's debug info not read: {}\n", o.vmlinux.empty() ? "warning" : "error",
               s.vmlinux_debug_error);
  }
  const int done = o.vmlinux.empty() || s.vmlinux_debug_error.empty() ? kFound : kEnvError;
  if (g.json) {
    PrintJson({{"target", s.name},
               {"kind", s.kind},
               {"release", s.release},
               {"build_id", s.build_id},
               {"generation", s.generation},
               {"symbols", s.symbols},
               {"modules", s.modules},
               {"file_errors", s.file_errors},
               {"text_symbols", s.text_symbols},
               {"text_symbols_with_dwarf", s.text_with_dwarf},
               {"vmlinux_debug_error", s.vmlinux_debug_error},
               {"debug_files",
                {{"indexed", s.debug_indexed},
                 {"cached", s.debug_cached},
                 {"missing", s.debug_missing},
                 {"failed", s.debug_failed},
                 {"stored_as_read", s.debug_stored_as_read}}},
               {"probe_tables_read", s.probe_tables_read},
               {"entry_layout", s.entry_layout},
               {"probe_seconds", s.probe_seconds},
               {"warnings", s.warnings},
               {"db", DbPath(g)},
               {"seconds", secs},
               {"load_seconds", s.load_seconds},
               {"dwarf_seconds", s.dwarf_seconds},
               {"dwarf_parse_seconds", s.dwarf_parse_seconds},
               {"dwarf_store_seconds", s.dwarf_store_seconds},
               {"join_seconds", s.join_seconds},
               {"addr_maps", {{"built", s.addr_maps_built}, {"present", s.addr_maps_present}}},
               {"addr_map_seconds", s.addr_map_seconds},
               {"store_seconds", s.store_seconds}});
  } else {
    for (const auto& w : s.warnings) fmt::print(stderr, "symdex: warning: {}\n", w);
    if (!o.quiet) {
      fmt::print("indexed {} '{}'{}: {} symbols, {} modules in {:.2f}s -> {}\n", s.kind, s.name,
                 s.release.empty() ? "" : " (" + s.release + ")", s.symbols, s.modules, secs, DbPath(g));
      if (req.debuginfo) {
        fmt::print(
            "  debug info: {} files indexed, {} cached, {} missing, {} failed; {} of {} text symbols "
            "have source lines (symbols {:.2f}s, DWARF {:.2f}s, store {:.2f}s)\n",
            s.debug_indexed, s.debug_cached, s.debug_missing, s.debug_failed, s.text_with_dwarf, s.text_symbols,
            s.load_seconds, s.dwarf_seconds, s.store_seconds);
        if (s.addr_maps_built + s.addr_maps_present > 0) {
          fmt::print("  address maps: {} built ({:.2f}s), {} already there -> {}\n", s.addr_maps_built,
                     s.addr_map_seconds, s.addr_maps_present, AddrMapDirFor(DbPath(g)));
        }
        if (s.debug_missing + s.debug_failed > 0) fmt::print("  see 'symdex status -v' for what was tried\n");
      }
      fmt::print("  probe verdicts: fentry/blacklist/init tables of {} files ({:.2f}s){}\n", s.probe_tables_read,
                 s.probe_seconds, s.entry_layout.empty() ? "" : "; entry layout: " + s.entry_layout);
    }
  }
  return done;
}

}  // namespace

void AddIndexCommand(CLI::App& app, GlobalOptions& g, int& exit_code) {
  auto o = std::make_shared<IndexOptions>();
  CLI::App* c = app.add_subcommand("index", "Index the live host (default) or an offline kernel");
  auto* sysroot =
      c->add_option("--sysroot", o->sysroot, "Read proc/ and sys/ below DIR instead of / (fixture trees, containers)");
  auto* sm = c->add_option("--system-map", o->system_map, "Offline kernel: its System.map");
  c->add_option("--modules-dir", o->modules_dir,
                "Offline kernel: directory searched recursively for .ko/.ko.xz/.ko.zst/.ko.gz")
      ->needs(sm);
  c->add_option("--name", o->name, "Target name (default: 'host' live; the release offline)");
  c->add_option(
       "--release", o->release,
       "Offline kernel release (default: --vmlinux's linux_banner, else the modules' vermagic, else the paths)")
      ->needs(sm);
  c->add_option("--vmlinux", o->vmlinux, "vmlinux with DWARF to use (checked against the target's build-ID)");
  c->add_option("--debug-dir", o->debug_dirs,
                "Extra debug root searched before /usr/lib/debug (repeatable): DIR/.build-id/xx/..., "
                "DIR/boot/vmlinux-R, DIR/lib/modules/R/{vmlinux,**/M.ko}, then modules by build-ID in any "
                "DIR/lib/modules/*/ and a vmlinux whose linux_banner names R");
  c->add_option("--build-id", o->build_id,
                "A kernel known only by its vmlinux build-ID (hex): its debug vmlinux is found by build-ID "
                "(--debug-dir, /usr/lib/debug/.build-id, debuginfod), its symbols are that file's .symtab, its "
                "release its linux_banner; the target is named after the build-ID unless --name")
      ->excludes(sm)
      ->excludes(sysroot);
  c->add_option("--module-build-id", o->module_build_ids,
                "With --build-id: a module to include, NAME=BUILDID (repeatable; /sys/module/NAME/notes on the "
                "machine): its debug .ko found by build-ID like vmlinux's; one not found is recorded, not fatal")
      ->allow_extra_args(false);
  c->add_option("--kernel-config", o->kernel_config,
                "The kernel's .config (default: /proc/config.gz, /boot/config-R; beside the System.map offline): "
                "whether kprobe events may probe functions without an fentry site (CONFIG_KPROBE_EVENTS_ON_NOTRACE)");
  c->add_flag("--no-debuginfo", o->no_debuginfo, "Symbols only: skip DWARF (kallsyms-level answers)");
  c->add_flag("--no-debuginfod", o->no_debuginfod, "Never ask debuginfod servers (DEBUGINFOD_URLS)");
  c->add_flag("--no-addr-map", o->no_addr_map,
              "Do not precompute the address maps of vmlinux and the modules (DB-addrmaps/BUILD-ID.addrmap, "
              "~50 MB for a distro vmlinux); 'symdex addr' then reads DWARF through libdw, with the same "
              "answers, ~10x slower");
  c->add_option("-j,--jobs", o->jobs, "Threads for module reading and DWARF indexing (default: all cores)");
  c->add_flag("-q,--quiet", o->quiet, "No progress or summary");
  c->add_flag("--force", o->force,
              "Index input that looks truncated: a System.map without _etext or _end, or fewer than 90% of the "
              "vmlinux symbols the current index of the target has (which it then replaces)");
  c->get_option("--sysroot")->excludes(sm);
  c->footer(R"(The live host needs /proc/kallsyms with real addresses: run as root or with CAP_SYSLOG.
Debug info is matched by build-ID; a debug file already indexed is reused, not re-read.
debuginfod is asked for what is not found locally when DEBUGINFOD_URLS is set.
Re-indexing a target replaces it atomically; readers never see half an index.
Input that looks truncated is refused (exit 3) and the current index kept, unless --force.
Exit: 0 indexed, 2 usage, 3 input or environment error (a missing or malformed input file, ...).)");
  c->callback([&g, &exit_code, o] { exit_code = RunIndex(g, *o); });
}

}  // namespace symdex::cli
