#include "server/indexer/build_id_target.h"

#include "server/common/strings.h"
#include "server/debuginfo/symtab_file.h"
#include "server/target/offline_kernel.h"
#include "server/target/vmlinux_release.h"

namespace symdex::indexer {
namespace {

// The module's debug file by its build-ID, checked: an ET_REL whose build-ID is the one asked
// for and whose .modinfo name (when it has one) is the module's.
absl::Status AddModule(target::KernelTarget& t, debuginfo::DebugFinder& finder, const ModuleByBuildId& m) {
  if (m.name.empty() || m.name.size() > 64 || m.name.find_first_of("/ \t\n") != std::string::npos) {
    return absl::InvalidArgumentError(StrCat("module name '", Excerpt(m.name, 64), "' is not a module name"));
  }
  for (const target::ModuleInfo& have : t.modules) {
    if (have.name == m.name) return absl::InvalidArgumentError(StrCat("module ", m.name, " is listed twice"));
  }
  const std::optional<BuildId> id = BuildId::FromHex(m.build_id);
  if (!id || id->raw().size() > 64) {
    return absl::InvalidArgumentError(
        StrCat("module ", m.name, ": '", Excerpt(m.build_id, 80), "' is not a build-ID (hex digits, even count)"));
  }
  debuginfo::LookupResult found = finder.Find({.module = m.name, .release = t.release, .build_id = id});
  if (!found.found) {
    return debuginfo::LookupFailure(found, StrCat("module ", m.name, ": no debug file with build-ID ", id->ToHex()));
  }
  const std::string& path = found.found->path;
  ASSIGN_OR_RETURN(ingest::ElfSymbolTable tab, debuginfo::ReadSymtabFile(path));
  if (!tab.relocatable) return absl::InvalidArgumentError(StrCat(path, ": not a kernel module (ET_REL)"));
  if (!tab.build_id || *tab.build_id != *id) {
    return absl::InvalidArgumentError(StrCat(path, ": its build-ID is ",
                                             tab.build_id ? tab.build_id->ToHex() : std::string("(none)"), ", not ",
                                             id->ToHex()));
  }
  if (!tab.modinfo_name.empty() && tab.modinfo_name != m.name) {
    return absl::InvalidArgumentError(
        StrCat("build-ID ", id->ToHex(), " is module ", tab.modinfo_name, ", not ", m.name));
  }
  t.files.push_back({"module", path, target::InputFileStatus::kUsed, ""});
  target::AppendOfflineModule(t, m.name, path, tab);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<target::KernelTarget> LoadBuildIdTarget(const BuildIdTargetOptions& opts,
                                                       const debuginfo::DebugFinderOptions& finder_opts) {
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
  target::KernelTarget t;
  t.kind = "offline";
  t.build_id = id;
  t.release = target::VmlinuxRelease(path).value_or("");
  t.name = !opts.name.empty() ? opts.name : id->ToHex();
  t.source = StrCat("build-ID ", id->ToHex(), ": ", path, " (", found.found->origin, ")");
  t.files.push_back({"vmlinux", path, target::InputFileStatus::kUsed, ""});
  t.symbols.reserve(tab.symbols.size());
  for (auto& s : tab.symbols) {
    if (s.name == "_text") t.text_addr = s.value;
    t.symbols.push_back(target::SymbolEntry{.name = std::move(s.name),
                                            .type = s.type,
                                            .addr = s.value,
                                            .size = s.size ? std::optional<uint64_t>(s.size) : std::nullopt,
                                            .size_exact = s.size != 0});
  }
  if (t.symbols.empty()) return absl::InvalidArgumentError(StrCat(path, " has no symbols"));
  if (!t.text_addr) t.warnings.push_back(StrCat(path, " has no _text: _text offsets unavailable"));
  size_t failed = 0;
  for (const ModuleByBuildId& m : opts.modules) {
    if (absl::Status s = AddModule(t, finder, m); !s.ok()) {
      ++failed;
      t.files.push_back({"module", m.name, target::InputFileStatus::kError, std::string(s.message())});
    }
  }
  if (failed > 0) {
    t.warnings.push_back(StrCat(failed, " of ", opts.modules.size(),
                                " modules have no usable debug file by their "
                                "build-ID; see 'symdex status'"));
  }
  target::DeriveSizesAndDedupe(t);
  return t;
}

}  // namespace symdex::indexer
