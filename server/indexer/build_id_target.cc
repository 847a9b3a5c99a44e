#include "server/indexer/build_id_target.h"

#include "server/common/strings.h"
#include "server/debuginfo/symtab_file.h"
#include "server/target/vmlinux_release.h"

namespace symdex::indexer {

absl::StatusOr<target::KernelTarget> LoadBuildIdTarget(const BuildIdTargetOptions& opts,
                                                       const debuginfo::DebugFinderOptions& finder_opts) {
  const std::optional<BuildId> id = BuildId::FromHex(opts.build_id);
  if (!id) {
    return absl::InvalidArgumentError(
        StrCat("--build-id: '", Excerpt(opts.build_id, 80), "' is not a build-ID (hex digits, even count)"));
  }
  debuginfo::DebugFinder finder(finder_opts);
  debuginfo::LookupResult found = finder.Find({.module = "", .release = "", .build_id = id});
  if (!found.found) {
    return absl::NotFoundError(StrCat("no vmlinux with build-ID ", id->ToHex(), " (", target::Name(found.status),
                                      "); tried: ", StrJoin(found.attempts, "; ")));
  }
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
  target::DeriveSizesAndDedupe(t);
  return t;
}

}  // namespace symdex::indexer
