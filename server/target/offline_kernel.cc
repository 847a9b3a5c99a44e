#include "server/target/offline_kernel.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "server/common/elf_facts.h"
#include "server/common/file_util.h"
#include "server/common/mapped_file.h"
#include "server/common/scratch_buffer.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/ingest/decompress.h"
#include "server/ingest/elf_symbols.h"
#include "server/ingest/kallsyms.h"
#include "server/ingest/kernel_release.h"
#include "server/target/vmlinux_release.h"

namespace symdex::target {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxSystemMapBytes = size_t{512} << 20;
constexpr size_t kMaxModuleFileBytes = size_t{512} << 20;
constexpr size_t kMaxModuleImageBytes = size_t{1} << 30;

bool IsModuleFile(const std::string& name) {
  for (const char* ext : {".ko", ".ko.xz", ".ko.zst", ".ko.gz"}) {
    if (name.ends_with(ext)) return true;
  }
  return false;
}

struct ModuleResult {
  std::string path;
  absl::StatusOr<ingest::ElfSymbolTable> table = absl::UnknownError("not read");
};

absl::StatusOr<ingest::ElfSymbolTable> ReadModule(const std::string& path) {
  auto checked = [](absl::StatusOr<ingest::ElfSymbolTable> table) -> absl::StatusOr<ingest::ElfSymbolTable> {
    if (table.ok() && !table->relocatable) {
      return absl::InvalidArgumentError("not a relocatable object (ET_REL): not a kernel module");
    }
    return table;
  };
  // An uncompressed module is read where it lies (mapped: no copy of its ~100 KB-10 MB, of which
  // the symbol table, the notes and .modinfo are read). Anything else — compressed, empty, not a
  // regular file — is read whole, as the errors say it.
  if (auto mapped = MappedFile::MapPrivate(path); mapped.ok() && mapped->bytes().size() <= kMaxModuleFileBytes) {
    std::span<char> bytes = mapped->bytes();
    if (ingest::DetectCompression(std::string_view(bytes.data(), bytes.size())) == ingest::Compression::kNone) {
      return checked(ingest::ReadElfSymbols(bytes.data(), bytes.size()));
    }
  }
  ASSIGN_OR_RETURN(std::string raw, ReadFileBounded(path, kMaxModuleFileBytes));
  ingest::Compression c = ingest::DetectCompression(raw);
  if (c == ingest::Compression::kNone) return checked(ingest::ReadElfSymbols(raw));
  // Decompressed into this thread's buffer, kept from module to module (with a fresh one per
  // module, faulting its pages in and unmapping them was a third of reading Debian 6.12's 1,138
  // .ko.xz).
  thread_local std::string image;
  const ScratchUse use(image);
  RETURN_IF_ERROR(ingest::DecompressInto(raw, c, kMaxModuleImageBytes, image));
  return checked(ingest::ReadElfSymbols(image));
}

// The last resort: a release read off the file names.
std::string GuessReleaseFromPaths(const OfflineKernelOptions& o) {
  std::string base = fs::path(o.system_map).filename().string();
  if (base.starts_with("System.map-")) return base.substr(11);
  if (!o.modules_dir.empty()) {
    std::string d = fs::path(o.modules_dir).lexically_normal().filename().string();
    if (d.empty()) d = fs::path(o.modules_dir).lexically_normal().parent_path().filename().string();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) return d;
  }
  return {};
}

// The release, from the most trustworthy source there is (see OfflineKernelOptions::release),
// with a warning for every source that disagrees with the one used.
std::string DecideRelease(const OfflineKernelOptions& o, const std::vector<std::string>& vermagics,
                          std::vector<std::string>& warnings) {
  const ingest::ReleaseVote vote = ingest::MajorityRelease(vermagics);
  if (vote.counts.size() > 1) {
    std::string all;
    for (const auto& [r, n] : vote.counts) all += StrCat(all.empty() ? "" : ", ", n, " say ", r);
    warnings.push_back(StrCat("the modules under ", o.modules_dir, " disagree on the kernel release (vermagic: ", all,
                              "); taking the majority, ", vote.release,
                              ": modules of another kernel get no debug info of theirs"));
  }
  std::string banner;
  if (!o.vmlinux.empty()) {
    auto r = VmlinuxRelease(o.vmlinux);
    if (r.ok()) {
      banner = *r;
    } else {
      warnings.push_back(StrCat("cannot read the release from ", o.vmlinux, ": ", r.status().message()));
    }
  }
  auto disagree = [&](std::string_view used, std::string_view why) {
    if (!vote.release.empty() && vote.release != used) {
      warnings.push_back(StrCat("release ", used, " (", why, ") differs from the modules' vermagic ", vote.release));
    }
  };
  if (!o.release.empty()) {
    disagree(o.release, "--release");
    return o.release;
  }
  if (!banner.empty()) {
    disagree(banner, StrCat("linux_banner of ", o.vmlinux));
    return banner;
  }
  if (!vote.release.empty()) return vote.release;
  return GuessReleaseFromPaths(o);
}

}  // namespace

std::string ModuleNameFromPath(std::string_view path) {
  std::string base = fs::path(std::string(path)).filename().string();
  size_t ko = base.find(".ko");
  if (ko != std::string::npos) base.resize(ko);
  std::replace(base.begin(), base.end(), '-', '_');
  return base;
}

int AppendOfflineModule(KernelTarget& t, std::string name, const std::string& path, ingest::ElfSymbolTable& tab) {
  int mi = static_cast<int>(t.modules.size());
  t.modules.push_back(ModuleInfo{.name = std::move(name), .build_id = tab.build_id, .path = path});
  for (auto& s : tab.symbols) {
    if (ingest::IsMappingSymbol(s.name)) continue;
    t.symbols.push_back(SymbolEntry{
        .name = std::move(s.name),
        .addr = s.value,
        .size = s.size ? std::optional<uint64_t>(s.size) : std::nullopt,
        .section = s.section,
        .module = mi,
        .type = s.type,
        .size_exact = s.size != 0,
        .elf_facts = IsCodeSymbolType(s.type) ? std::optional<uint8_t>(ElfFacts(s.function, s.size)) : std::nullopt});
  }
  return mi;
}

absl::StatusOr<KernelTarget> LoadOfflineKernel(const OfflineKernelOptions& opts) {
  KernelTarget t;
  t.kind = "offline";
  t.source = opts.system_map;

  // (The file's text and its parse go once the symbols are moved out: a scope, not the whole load.)
  ingest::SystemMapSymbols map;
  {
    ASSIGN_OR_RETURN(std::string map_text, ReadFileBounded(opts.system_map, kMaxSystemMapBytes));
    ASSIGN_OR_RETURN(map, ingest::ParseSystemMap(map_text, opts.system_map));
  }
  std::vector<ingest::KernelSymbol> vsyms = std::move(map.symbols);
  if (vsyms.empty()) return absl::InvalidArgumentError(StrCat(opts.system_map, " has no symbols"));
  std::string dropped;
  if (map.DroppedTotal() > 0) {
    std::vector<std::string> why;
    for (const auto& [rule, n] : map.dropped) why.push_back(StrCat(n, " ", rule));
    dropped =
        StrCat(map.DroppedTotal(), " symbols left out, as the kernel's kallsyms leaves them out: ", StrJoin(why, ", "));
  }
  t.files.push_back({"system-map", opts.system_map, InputFileStatus::kUsed, dropped});
  t.symbols.reserve(vsyms.size());
  for (auto& k : vsyms) {
    if (!k.module.empty()) {
      return absl::InvalidArgumentError(StrCat(opts.system_map,
                                               ": has module-tagged symbols; this is a kallsyms dump, index it with "
                                               "--sysroot (a tree holding proc/kallsyms)"));
    }
    t.symbols.push_back(SymbolEntry{.name = std::move(k.name), .addr = k.addr, .type = k.type});
  }
  std::vector<ingest::KernelSymbol>().swap(vsyms);
  {
    std::map<std::string_view, uint64_t> anchors;
    for (const SymbolEntry& s : t.symbols) {
      if (s.name == "_text" || s.name == "_stext") anchors.emplace(s.name, s.addr);
    }
    ChooseTextAnchor(
        t,
        [&](std::string_view n) {
          auto it = anchors.find(n);
          return it == anchors.end() ? std::nullopt : std::optional<uint64_t>(it->second);
        },
        /*live=*/false);
  }
  if (!t.anchor_addr) t.warnings.push_back("System.map has no _text or _stext: _text offsets unavailable");

  std::vector<std::string> vermagics;  // each module's release, as its vermagic says
  if (!opts.modules_dir.empty()) {
    std::vector<std::string> paths;
    std::error_code ec;
    fs::recursive_directory_iterator it(opts.modules_dir, fs::directory_options::skip_permission_denied, ec);
    if (ec) {
      return absl::NotFoundError(StrCat("cannot read modules directory ", opts.modules_dir, ": ", ec.message()));
    }
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->is_regular_file(ec) && IsModuleFile(it->path().filename().string())) {
        paths.push_back(it->path().string());
      }
    }
    std::sort(paths.begin(), paths.end());
    t.source = StrCat(opts.system_map, " + ", opts.modules_dir);

    std::vector<ModuleResult> results(paths.size());
    std::atomic<size_t> next{0}, done{0};
    unsigned jobs = opts.jobs ? opts.jobs : std::max(1u, std::thread::hardware_concurrency());
    jobs = std::min<unsigned>(jobs, std::max<size_t>(1, paths.size()));
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < paths.size();) {
        results[i].path = paths[i];
        results[i].table = ReadModule(paths[i]);
        done.fetch_add(1);
      }
    };
    std::vector<std::thread> threads;
    for (unsigned j = 1; j < jobs; ++j) threads.emplace_back(worker);
    // The calling thread works too, and reports progress between modules.
    for (size_t i; (i = next.fetch_add(1)) < paths.size();) {
      results[i].path = paths[i];
      results[i].table = ReadModule(paths[i]);
      size_t d = done.fetch_add(1) + 1;
      if (opts.progress) opts.progress("modules", d, paths.size());
    }
    for (auto& th : threads) th.join();
    if (opts.progress) opts.progress("modules", paths.size(), paths.size());

    // Every module's symbols at once: the vector grows once, to its size (doubling it a few
    // times over 300k+ symbols of ~230 bytes held the old and the new arrays together).
    size_t module_symbols = 0;
    for (const ModuleResult& r : results) module_symbols += r.table.ok() ? r.table->symbols.size() : 0;
    t.symbols.reserve(t.symbols.size() + module_symbols);
    std::map<std::string, std::string> seen;  // module name -> first path
    size_t failed = 0;
    for (ModuleResult& r : results) {
      if (!r.table.ok()) {
        ++failed;
        t.files.push_back({"module", r.path, InputFileStatus::kError, std::string(r.table.status().message())});
        continue;
      }
      ingest::ElfSymbolTable& tab = *r.table;
      std::string name = !tab.modinfo_name.empty() ? tab.modinfo_name : ModuleNameFromPath(r.path);
      if (auto [pos, fresh] = seen.emplace(name, r.path); !fresh) {
        t.files.push_back(
            {"module", r.path, InputFileStatus::kSkipped, StrCat("module ", name, " already read from ", pos->second)});
        continue;
      }
      t.files.push_back({"module", r.path, InputFileStatus::kUsed, ""});
      vermagics.push_back(ingest::ReleaseFromVermagic(tab.modinfo_vermagic));
      AppendOfflineModule(t, name, r.path, tab);
      r.table = ingest::ElfSymbolTable();  // its symbols are in t now
    }
    if (failed > 0) {
      t.warnings.push_back(
          StrCat(failed, " of ", paths.size(), " module files could not be read; see 'symdex status'"));
    }
  }
  t.release = DecideRelease(opts, vermagics, t.warnings);
  t.name = !opts.name.empty() ? opts.name : (!t.release.empty() ? t.release : "offline");
  DeriveSizesAndDedupe(t);
  return t;
}

}  // namespace symdex::target
