#include "server/kernel/offline_kernel.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>

#include "server/common/elf_facts.h"
#include "server/common/file_util.h"
#include "server/common/mapped_file.h"
#include "server/common/ordered_window.h"
#include "server/common/scratch_buffer.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/ingest/decompress.h"
#include "server/ingest/elf_symbols.h"
#include "server/ingest/kallsyms.h"
#include "server/ingest/kernel_release.h"
#include "server/kernel/symbol_spill.h"
#include "server/kernel/vmlinux_release.h"

namespace symdex::kernel {
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

std::vector<SymbolEntry> AddOfflineModule(KernelTarget& t, std::string name, const std::string& path,
                                          ingest::ElfSymbolTable& tab, std::vector<DroppedSymbols>& dropped) {
  const int mi = static_cast<int>(t.modules.size());
  t.modules.push_back(ModuleInfo{.name = std::move(name), .build_id = tab.build_id, .path = path});
  std::vector<SymbolEntry> out;
  out.reserve(tab.symbols.size());
  for (auto& s : tab.symbols) {
    if (const char* rule = ingest::ModuleSymbolIgnoreRule(s.name)) {
      CountDropped(dropped, rule);
      continue;
    }
    out.push_back(SymbolEntry{
        .name = std::move(s.name),
        .addr = s.value,
        .size = s.size ? std::optional<uint64_t>(s.size) : std::nullopt,
        .section = s.section,
        .module = mi,
        .type = s.type,
        .size_exact = s.size != 0,
        .elf_facts = IsCodeSymbolType(s.type) ? std::optional<uint8_t>(ElfFacts(s.function, s.size)) : std::nullopt});
  }
  return out;
}

int AppendOfflineModule(KernelTarget& t, std::string name, const std::string& path, ingest::ElfSymbolTable& tab,
                        std::vector<DroppedSymbols>& dropped) {
  std::vector<SymbolEntry> syms = AddOfflineModule(t, std::move(name), path, tab, dropped);
  t.symbols.insert(t.symbols.end(), std::make_move_iterator(syms.begin()), std::make_move_iterator(syms.end()));
  return static_cast<int>(t.modules.size()) - 1;
}

namespace {

// vmlinux's symbols from System.map (`path`), and the text anchor among them.
absl::Status ReadSystemMap(const std::string& path, KernelTarget& t) {
  // (The file's text and its parse go once the symbols are moved out: a scope, not the whole load.)
  ingest::SystemMapSymbols map;
  {
    ASSIGN_OR_RETURN(std::string map_text, ReadFileBounded(path, kMaxSystemMapBytes));
    ASSIGN_OR_RETURN(map, ingest::ParseSystemMap(map_text, path));
  }
  std::vector<ingest::KernelSymbol> vsyms = std::move(map.symbols);
  if (vsyms.empty()) return absl::InvalidArgumentError(StrCat(path, " has no symbols"));
  // (What scripts/kallsyms leaves out of the kernel's table is left out here, counted.)
  t.files.push_back({"system-map", path, InputFileStatus::kUsed, "", std::move(map.dropped)});
  t.symbols.reserve(vsyms.size());
  for (auto& k : vsyms) {
    if (!k.module.empty()) {
      return absl::InvalidArgumentError(StrCat(path,
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
  return absl::OkStatus();
}

// Every module file below `dir`, sorted.
absl::StatusOr<std::vector<std::string>> ModuleFiles(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    return absl::NotFoundError(StrCat("cannot read modules directory ", dir, ": ", ec.message()));
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file(ec) && IsModuleFile(it->path().filename().string())) {
      paths.push_back(it->path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

absl::StatusOr<KernelTarget> LoadOfflineKernel(const OfflineKernelOptions& opts) {
  KernelTarget t;
  t.kind = "offline";
  t.source = opts.system_map;

  RETURN_IF_ERROR(ReadSystemMap(opts.system_map, t));

  std::vector<std::string> vermagics;  // each module's release, as its vermagic says
  std::shared_ptr<SymbolSpill> spill;  // the modules' symbols, as they are read
  if (!opts.modules_dir.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> paths, ModuleFiles(opts.modules_dir));
    t.source = StrCat(opts.system_map, " + ", opts.modules_dir);

    // Read by `jobs` threads, a few files ahead; taken in path order by this thread, which
    // spills each module's symbols at once (kernel/symbol_spill.h): what the load holds of the
    // modules is the few files read ahead, whatever their number.
    spill = SymbolSpill::Create();
    std::vector<ModuleResult> results(paths.size());
    unsigned jobs = opts.jobs ? opts.jobs : std::max(1u, std::thread::hardware_concurrency());
    jobs = std::min<unsigned>(jobs, std::max<size_t>(1, paths.size()));
    OrderedWindow window(paths.size(), 4 * size_t{jobs});
    auto reader = [&] {
      for (size_t i; (i = window.Claim()) != OrderedWindow::kNone;) {
        results[i].path = paths[i];
        results[i].table = ReadModule(paths[i]);
        window.Done(i);
      }
    };
    std::map<std::string, std::string> seen;  // module name -> first path
    size_t failed = 0;
    auto take = [&](ModuleResult& r) -> absl::Status {
      if (!r.table.ok()) {
        ++failed;
        t.files.push_back({"module", r.path, InputFileStatus::kError, std::string(r.table.status().message())});
        return absl::OkStatus();
      }
      ingest::ElfSymbolTable& tab = *r.table;
      std::string name = !tab.modinfo_name.empty() ? tab.modinfo_name : ModuleNameFromPath(r.path);
      if (auto [pos, fresh] = seen.emplace(name, r.path); !fresh) {
        t.files.push_back(
            {"module", r.path, InputFileStatus::kSkipped, StrCat("module ", name, " already read from ", pos->second)});
        return absl::OkStatus();
      }
      vermagics.push_back(ingest::ReleaseFromVermagic(tab.modinfo_vermagic));
      std::vector<DroppedSymbols> dropped;
      std::vector<SymbolEntry> syms = AddOfflineModule(t, std::move(name), r.path, tab, dropped);
      t.files.push_back({"module", r.path, InputFileStatus::kUsed, "", std::move(dropped)});
      DeriveSizesAndDedupe(syms);
      return spill->Put(static_cast<int>(t.modules.size()) - 1, syms);
    };
    absl::Status took;
    {
      std::vector<std::thread> pool;
      for (unsigned j = 0; j < jobs; ++j) pool.emplace_back(reader);
      for (size_t i = 0; i < paths.size() && took.ok(); ++i) {
        window.WaitDone(i);
        took = take(results[i]);
        results[i] = ModuleResult();  // its symbols are spilled now
        window.Taken(i);
        if (opts.progress) opts.progress("modules", i + 1, paths.size());
      }
      window.Stop();
      for (auto& th : pool) th.join();
    }
    RETURN_IF_ERROR(took);
    if (failed > 0) {
      t.warnings.push_back(
          StrCat(failed, " of ", paths.size(), " module files could not be read; see 'symdex status'"));
    }
  }
  t.release = DecideRelease(opts, vermagics, t.warnings);
  t.name = !opts.name.empty() ? opts.name : (!t.release.empty() ? t.release : "offline");
  DeriveSizesAndDedupe(t.symbols);  // vmlinux's (the modules' were, as they were read)
  if (spill) {
    spill->runs.emplace_back(-1, static_cast<uint32_t>(t.symbols.size()));
    for (size_t m = 0; m < t.modules.size(); ++m) {
      if (const size_t n = spill->Count(static_cast<int>(m)); n > 0) {
        spill->runs.emplace_back(static_cast<int>(m), static_cast<uint32_t>(n));
      }
    }
    t.spill = std::move(spill);
  }
  return t;
}

}  // namespace symdex::kernel
