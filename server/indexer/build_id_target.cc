#include "server/indexer/build_id_target.h"

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "server/common/strings.h"
#include "server/debuginfo/files/symtab_file.h"
#include "server/ingest/kallsyms.h"
#include "server/kernel/offline_kernel.h"
#include "server/kernel/vmlinux_release.h"

namespace symdex::indexer {
namespace {

struct FoundModule {
  std::string path;
  ingest::ElfSymbolTable table;
};

// The module's debug file by its build-ID, checked: an ET_REL whose build-ID is the one asked
// for and whose .modinfo name (when it has one) is the module's. Thread-safe (the finder is).
absl::StatusOr<FoundModule> FindModule(debuginfo::DebugFinder& finder, const std::string& release,
                                       const ModuleByBuildId& m) {
  if (m.name.empty() || m.name.size() > 64 || m.name.find_first_of("/ \t\n") != std::string::npos) {
    return absl::InvalidArgumentError(StrCat("module name '", Excerpt(m.name, 64), "' is not a module name"));
  }
  const std::optional<BuildId> id = BuildId::FromHex(m.build_id);
  if (!id || id->raw().size() > 64) {
    return absl::InvalidArgumentError(
        StrCat("module ", m.name, ": '", Excerpt(m.build_id, 80), "' is not a build-ID (hex digits, even count)"));
  }
  debuginfo::LookupResult found = finder.Find({.module = m.name, .release = release, .build_id = id});
  if (!found.found) {
    return debuginfo::LookupFailure(found, StrCat("module ", m.name, ": no debug file with build-ID ", id->ToHex()));
  }
  FoundModule out{found.found->path, {}};
  ASSIGN_OR_RETURN(out.table, debuginfo::ReadSymtabFile(out.path));
  const ingest::ElfSymbolTable& tab = out.table;
  if (!tab.relocatable) return absl::InvalidArgumentError(StrCat(out.path, ": not a kernel module (ET_REL)"));
  if (!tab.build_id || *tab.build_id != *id) {
    return absl::InvalidArgumentError(StrCat(out.path, ": its build-ID is ",
                                             tab.build_id ? tab.build_id->ToHex() : std::string("(none)"), ", not ",
                                             id->ToHex()));
  }
  if (!tab.modinfo_name.empty() && tab.modinfo_name != m.name) {
    return absl::InvalidArgumentError(
        StrCat("build-ID ", id->ToHex(), " is module ", tab.modinfo_name, ", not ", m.name));
  }
  return out;
}

// Every module's debug file, fetched several at a time: each is a round trip to debuginfod (which
// may extract it from a package archive first), independent of the others.
std::vector<absl::StatusOr<FoundModule>> FindModules(debuginfo::DebugFinder& finder, const std::string& release,
                                                     const std::vector<ModuleByBuildId>& mods) {
  std::vector<absl::StatusOr<FoundModule>> out(mods.size(), absl::UnknownError("not looked up"));
  std::set<std::string> seen;
  std::vector<size_t> todo;
  for (size_t i = 0; i < mods.size(); ++i) {
    if (!seen.insert(mods[i].name).second) {
      out[i] = absl::InvalidArgumentError(StrCat("module ", mods[i].name, " is listed twice"));
    } else {
      todo.push_back(i);
    }
  }
  constexpr size_t kParallelFetches = 4;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < todo.size();) out[todo[k]] = FindModule(finder, release, mods[todo[k]]);
  };
  std::vector<std::thread> threads;
  for (size_t j = 1; j < std::min(kParallelFetches, todo.size()); ++j) threads.emplace_back(work);
  work();
  for (auto& th : threads) th.join();
  return out;
}

}  // namespace

absl::StatusOr<kernel::KernelTarget> LoadBuildIdTarget(const BuildIdTargetOptions& opts,
                                                       const DebugFinderOptions& finder_opts) {
  const std::optional<BuildId> id = BuildId::FromHex(opts.build_id);
  if (!id) {
    return absl::InvalidArgumentError(
        StrCat("--build-id: '", Excerpt(opts.build_id, 80), "' is not a build-ID (hex digits, even count)"));
  }
  debuginfo::DebugFinder finder(finder_opts);
  debuginfo::LookupResult found = finder.Find({.module = "", .release = "", .build_id = id});
  if (!found.found) return debuginfo::LookupFailure(found, StrCat("no vmlinux with build-ID ", id->ToHex()));
  const std::string& path = found.found->path;
  ASSIGN_OR_RETURN(ingest::ElfSymbolTable tab, debuginfo::ReadSymtabFile(path));
  if (tab.relocatable) return absl::InvalidArgumentError(StrCat(path, ": a relocatable object, not a vmlinux"));
  if (!tab.build_id || *tab.build_id != *id) {
    return absl::InvalidArgumentError(StrCat(path, ": its build-ID is ",
                                             tab.build_id ? tab.build_id->ToHex() : std::string("(none)"), ", not ",
                                             id->ToHex()));
  }
  kernel::KernelTarget t;
  t.kind = "offline";
  t.build_id = id;
  t.release = kernel::VmlinuxRelease(path).value_or("");
  t.name = !opts.name.empty() ? opts.name : id->ToHex();
  t.source = StrCat("build-ID ", id->ToHex(), ": ", path, " (", found.found->origin, ")");
  t.symbols.reserve(tab.symbols.size());
  std::map<std::string_view, uint64_t> anchors;
  std::vector<DroppedSymbols> dropped;
  for (auto& s : tab.symbols) {
    // What the kernel's own symbol table keeps of its vmlinux's: System.map's rule, then kallsyms'.
    const char* rule = ingest::MksysmapIgnoreRule(s.name, s.type);
    if (rule == nullptr) rule = ingest::KallsymsIgnoreRule(s.name, s.type);
    if (rule != nullptr) {
      CountDropped(dropped, rule);
      continue;
    }
    if (s.name == "_text" || s.name == "_stext") anchors.emplace(s.name == "_text" ? "_text" : "_stext", s.value);
    // No .symtab size: a vmlinux symbol's extent is the kernel's, up to the next symbol kallsyms
    // keeps (what it prints as "+0x4/0x50" and what a live target of the same kernel holds);
    // DeriveSizesAndDedupe derives it from the symbols kept here.
    t.symbols.push_back(kernel::SymbolEntry{.name = std::move(s.name), .addr = s.value, .type = s.type});
  }
  if (t.symbols.empty()) return absl::InvalidArgumentError(StrCat(path, " has no symbols"));
  t.files.push_back({"vmlinux", path, kernel::InputFileStatus::kUsed, "", std::move(dropped)});
  kernel::ChooseTextAnchor(
      t,
      [&](std::string_view n) {
        auto it = anchors.find(n);
        return it == anchors.end() ? std::nullopt : std::optional<uint64_t>(it->second);
      },
      /*live=*/false);
  if (!t.anchor_addr) t.warnings.push_back(StrCat(path, " has no _text or _stext: _text offsets unavailable"));
  size_t failed = 0;
  std::vector<absl::StatusOr<FoundModule>> found_modules = FindModules(finder, t.release, opts.modules);
  for (size_t i = 0; i < opts.modules.size(); ++i) {
    if (!found_modules[i].ok()) {
      ++failed;
      t.files.push_back({"module", opts.modules[i].name, kernel::InputFileStatus::kError,
                         std::string(found_modules[i].status().message())});
      continue;
    }
    std::vector<DroppedSymbols> module_dropped;
    kernel::AppendOfflineModule(t, opts.modules[i].name, found_modules[i]->path, found_modules[i]->table,
                                module_dropped);
    t.files.push_back(
        {"module", found_modules[i]->path, kernel::InputFileStatus::kUsed, "", std::move(module_dropped)});
  }
  if (failed > 0) {
    t.warnings.push_back(StrCat(failed, " of ", opts.modules.size(),
                                " modules have no usable debug file by their "
                                "build-ID; see 'symdex status'"));
  }
  kernel::DeriveSizesAndDedupe(t);
  return t;
}

}  // namespace symdex::indexer
