#include "server/kernel/live_host.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>

#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/strings.h"
#include "server/ingest/elf_notes.h"
#include "server/ingest/kallsyms.h"
#include "server/ingest/proc_modules.h"

namespace symdex::kernel {
namespace {

constexpr size_t kMaxKallsymsBytes = size_t{512} << 20;
constexpr size_t kMaxSmallFileBytes = size_t{1} << 20;

std::string ZeroAddressHelp(const std::string& sysroot) {
  std::string restrict = "unknown";
  if (auto r = ReadFileBounded(SysrootPath(sysroot, "/proc/sys/kernel/kptr_restrict"), 64); r.ok()) {
    restrict = std::string(StripWhitespace(*r));
  }
  return StrCat("every address in ", SysrootPath(sysroot, "/proc/kallsyms"),
                " reads as 0: the kernel hides addresses from this process (kernel.kptr_restrict=", restrict,
                "). Run symdex as root or with CAP_SYSLOG, and if kptr_restrict is 2 lower it with "
                "'sysctl kernel.kptr_restrict=1'. Refusing to index zeros.");
}

// A sysfs file holding one address ("0xffffffffc0a01000\n").
std::optional<uint64_t> ParseHexLine(std::string_view s) { return ParseHex(StripWhitespace(s)); }

// The kernel's build-ID from /sys/kernel/notes, and the file's state.
void ReadKernelNotes(const std::string& root, KernelTarget& t) {
  const std::string notes_path = SysrootPath(root, "/sys/kernel/notes");
  if (auto notes = ReadFileBounded(notes_path, kMaxSmallFileBytes); notes.ok()) {
    auto id = ingest::FindGnuBuildId(*notes);
    if (!id.ok()) {
      t.files.push_back({"notes", notes_path, InputFileStatus::kError, std::string(id.status().message())});
    } else if (!id->has_value()) {
      t.files.push_back({"notes", notes_path, InputFileStatus::kError, "no GNU build-ID note"});
    } else {
      t.build_id = **id;
      t.files.push_back({"notes", notes_path, InputFileStatus::kUsed, ""});
    }
  } else {
    t.files.push_back({"notes", notes_path, InputFileStatus::kMissing, std::string(notes.status().message())});
  }
}

// Each loaded module's section bases and build-ID from /sys/module/M.
void ReadModulesSysfs(const std::string& root, KernelTarget& t) {
  size_t unreadable = 0;
  for (ModuleInfo& m : t.modules) {
    if (ingest::IsPseudoModule(m.name)) continue;
    const std::string base = SysrootPath(root, "/sys/module/" + m.name);
    if (auto sec = ReadFileBounded(base + "/sections/.text", 256); sec.ok()) {
      if (auto a = ParseHexLine(*sec)) m.text_addr = a;
    } else {
      ++unreadable;
    }
    // Every section base, sorted, for turning addresses into (section, offset).
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(base + "/sections", ec)) {
      if (auto v = ReadFileBounded(e.path().string(), 256); v.ok()) {
        if (auto a = ParseHexLine(*v); a && *a != 0) m.sections.emplace_back(e.path().filename().string(), *a);
      }
    }
    std::sort(m.sections.begin(), m.sections.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    if (auto n = ReadFileBounded(base + "/notes/.note.gnu.build-id", 4096); n.ok()) {
      if (auto id = ingest::FindGnuBuildId(*n); id.ok() && id->has_value()) m.build_id = **id;
    }
  }
  if (unreadable > 0) {
    t.warnings.push_back(
        StrCat(unreadable, " module(s) without a readable ", SysrootPath(root, "/sys/module/M/sections/.text")));
  }
}

}  // namespace

absl::StatusOr<KernelTarget> LoadLiveHost(const LiveHostOptions& opts) {
  const std::string& root = opts.sysroot;
  KernelTarget t;
  t.name = opts.name;
  t.kind = "live";

  const std::string kallsyms_path = SysrootPath(root, "/proc/kallsyms");
  auto text = ReadFileBounded(kallsyms_path, kMaxKallsymsBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        StrCat(text.status().message(), " (index an offline kernel with --system-map instead)"));
  }
  ASSIGN_OR_RETURN(std::vector<ingest::KernelSymbol> ksyms, ingest::ParseKallsyms(*text, kallsyms_path));
  if (ksyms.empty()) {
    return absl::InvalidArgumentError(StrCat(kallsyms_path, " has no symbols"));
  }
  if (ingest::AllAddressesZero(ksyms)) {
    return absl::FailedPreconditionError(ZeroAddressHelp(root));
  }
  t.files.push_back({"kallsyms", kallsyms_path, InputFileStatus::kUsed, ""});
  t.source = kallsyms_path;

  if (auto rel = ReadFileBounded(SysrootPath(root, "/proc/sys/kernel/osrelease"), 4096); rel.ok()) {
    t.release = std::string(StripWhitespace(*rel));
  }

  ReadKernelNotes(root, t);

  // Modules: every [tag] in kallsyms, plus /proc/modules (which also gives sizes).
  std::map<std::string, int> module_index;
  auto module_id = [&](const std::string& name) {
    auto [it, inserted] = module_index.emplace(name, static_cast<int>(t.modules.size()));
    if (inserted) t.modules.push_back(ModuleInfo{.name = name});
    return it->second;
  };
  const std::string modules_path = SysrootPath(root, "/proc/modules");
  if (auto mtext = ReadFileBounded(modules_path, kMaxSmallFileBytes * 16); mtext.ok()) {
    auto mods = ingest::ParseProcModules(*mtext, modules_path);
    if (!mods.ok()) {
      t.files.push_back({"modules", modules_path, InputFileStatus::kError, std::string(mods.status().message())});
    } else {
      for (const auto& m : *mods) {
        ModuleInfo& info = t.modules[module_id(m.name)];
        info.size = m.size;
        // The module's base (its .text on x86-64; 0 under kptr_restrict): where its address
        // range starts when /sys/module/M/sections/.text cannot be read (store/symbol_extent.h).
        if (m.addr != 0) info.text_addr = m.addr;
      }
      t.files.push_back({"modules", modules_path, InputFileStatus::kUsed, ""});
    }
  } else {
    t.files.push_back({"modules", modules_path, InputFileStatus::kMissing, std::string(mtext.status().message())});
  }

  t.symbols.reserve(ksyms.size());
  std::map<std::string_view, uint64_t> anchors;
  std::vector<DroppedSymbols> dropped;
  for (auto& k : ksyms) {
    // A module's local labels (.L14472\x021) and mapping symbols ($x, $d: arm64) are listed, but
    // never name an address.
    if (!k.module.empty()) {
      if (const char* rule = ingest::ModuleSymbolIgnoreRule(k.name)) {
        CountDropped(dropped, StrCat("module ", rule));
        continue;
      }
    }
    SymbolEntry s;
    s.name = std::move(k.name);
    s.type = k.type;
    s.addr = k.addr;
    s.module = k.module.empty() ? -1 : module_id(k.module);
    t.symbols.push_back(std::move(s));
    if (t.symbols.back().module < 0 && (t.symbols.back().name == "_text" || t.symbols.back().name == "_stext")) {
      anchors.emplace(t.symbols.back().name, t.symbols.back().addr);
    }
  }
  t.files.front().dropped = std::move(dropped);
  ChooseTextAnchor(
      t,
      [&](std::string_view n) {
        auto it = anchors.find(n);
        return it == anchors.end() ? std::nullopt : std::optional<uint64_t>(it->second);
      },
      /*live=*/true);
  if (!t.anchor_addr) t.warnings.push_back("no _text or _stext symbol: _text-relative offsets unavailable");

  ReadModulesSysfs(root, t);
  DeriveSizesAndDedupe(t);
  return t;
}

}  // namespace symdex::kernel
