#include "server/debuginfo/debug_finder.h"

#include <elfutils/debuginfod.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/common/unique_fd.h"
#include "server/ingest/decompress.h"
#include "server/ingest/elf_notes.h"

namespace symdex::debuginfo {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxCompressedModule = size_t{512} << 20;
constexpr size_t kMaxDecompressedModule = size_t{2} << 30;

struct ElfEnd {
  void operator()(Elf* e) const { elf_end(e); }
};

std::string ModuleKey(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

bool IsModuleFileName(const std::string& n) {
  return n.ends_with(".ko") || n.ends_with(".ko.xz") || n.ends_with(".ko.zst") || n.ends_with(".ko.gz") ||
         n.ends_with(".ko.debug");
}

}  // namespace

std::optional<BuildId> ElfBuildId(Elf* elf) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_NOTE) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (d == nullptr || d->d_buf == nullptr) continue;
    auto id = ingest::FindGnuBuildId(std::string_view(static_cast<const char*>(d->d_buf), d->d_size));
    if (id.ok() && id->has_value()) return **id;
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<BuildId>> ReadFileBuildId(const std::string& path) {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  char magic[6] = {};
  ssize_t n = ::pread(fd.get(), magic, sizeof magic, 0);
  auto kind = ingest::DetectCompression(std::string_view(magic, n > 0 ? static_cast<size_t>(n) : 0));
  if (kind != ingest::Compression::kNone) {
    fd.Reset();
    ASSIGN_OR_RETURN(std::string raw, ReadFileBounded(path, kMaxCompressedModule));
    ASSIGN_OR_RETURN(std::string image, ingest::Decompress(raw, kind, kMaxDecompressedModule));
    std::unique_ptr<Elf, ElfEnd> elf(elf_memory(image.data(), image.size()));
    if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
    return ElfBuildId(elf.get());
  }
  std::unique_ptr<Elf, ElfEnd> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  std::optional<BuildId> id;
  bool is_elf = elf && elf_kind(elf.get()) == ELF_K_ELF;
  if (is_elf) id = ElfBuildId(elf.get());
  elf.reset();
  fd.Reset();
  if (!is_elf) return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
  return id;
}

void ForEachSymtabSymbol(Elf* elf, const std::function<bool(const GElf_Sym&, const char*)>& fn) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (d == nullptr) continue;
    size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t i = 1; i < n; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(d, static_cast<int>(i), &sym) == nullptr) break;
      if (!fn(sym, elf_strptr(elf, sh.sh_link, sym.st_name))) return;
    }
  }
}

absl::StatusOr<std::optional<uint64_t>> ReadElfSymbolValue(const std::string& path, const std::string& name) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  std::unique_ptr<Elf, ElfEnd> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  std::optional<uint64_t> value;
  if (elf && elf_kind(elf.get()) == ELF_K_ELF) {
    ForEachSymtabSymbol(elf.get(), [&](const GElf_Sym& sym, const char* s) {
      if (s && name == s) value = sym.st_value;
      return !value;
    });
  }
  elf.reset();
  return value;
}

DebugFinder::DebugFinder(DebugFinderOptions opts) : opts_(std::move(opts)) {}
DebugFinder::~DebugFinder() = default;

std::vector<std::string> DebugFinder::Roots() const {
  std::vector<std::string> roots = opts_.debug_dirs;
  roots.push_back(SysrootPath(opts_.sysroot, "/usr/lib/debug"));
  return roots;
}

const std::map<std::string, std::vector<std::string>>& DebugFinder::ModuleFiles(const std::string& root,
                                                                                const std::string& release) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = root + "\n" + release;
  auto it = module_files_.find(key);
  if (it != module_files_.end()) return it->second;
  std::map<std::string, std::vector<std::string>>& files = module_files_[key];
  std::error_code ec;
  std::string dir = root + "/lib/modules/" + release;
  if (release.empty() || !fs::is_directory(dir, ec)) return files;
  for (fs::recursive_directory_iterator i(dir, fs::directory_options::skip_permission_denied, ec), end; i != end;
       i.increment(ec)) {
    if (ec) break;
    std::string name = i->path().filename().string();
    if (!IsModuleFileName(name)) continue;
    files[ModuleKey(name.substr(0, name.find(".ko")))].push_back(i->path().string());
  }
  for (auto& [_, v] : files) std::sort(v.begin(), v.end());
  return files;
}

bool DebugFinder::TryCandidate(const std::string& path, const DebugFileRequest& req, const std::string& origin,
                               LookupResult& r) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  auto id = ReadFileBuildId(path);
  if (!id.ok()) {
    r.attempts.push_back(StrCat(path, ": ", id.status().message()));
    return false;
  }
  if (req.build_id) {
    if (!id->has_value()) {
      r.attempts.push_back(StrCat(path, ": has no build-ID"));
      r.status = target::DebugFileStatus::kBuildIdMismatch;
      return false;
    }
    if (!(**id == *req.build_id)) {
      r.attempts.push_back(StrCat(path, ": build-ID ", (*id)->ToHex(), " != ", req.build_id->ToHex()));
      r.status = target::DebugFileStatus::kBuildIdMismatch;
      return false;
    }
  }
  r.found = FoundDebugFile{path, origin, req.build_id.has_value(), *id};
  r.status = target::DebugFileStatus::kUsed;
  r.attempts.push_back(StrCat(path, ": used", req.build_id ? "" : " (unverified: the target has no build-ID)"));
  return true;
}

void DebugFinder::TryDebuginfod(const DebugFileRequest& req, LookupResult& r) {
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  if (!opts_.use_debuginfod || urls == nullptr || *urls == '\0' || !req.build_id) return;
  std::unique_ptr<debuginfod_client, void (*)(debuginfod_client*)> client(debuginfod_begin(), debuginfod_end);
  if (!client) {
    r.attempts.push_back("debuginfod: cannot create a client");
    return;
  }
  if (opts_.debuginfod_progress) {
    debuginfod_set_progressfn(client.get(), [](debuginfod_client*, long a, long b) {
      if (b > 0) std::fprintf(stderr, "\r\033[Kdebuginfod: %ld/%ld", a, b);
      return 0;
    });
  }
  const std::string& raw = req.build_id->raw();
  char* path = nullptr;
  int fd = debuginfod_find_debuginfo(client.get(), reinterpret_cast<const unsigned char*>(raw.data()),
                                     static_cast<int>(raw.size()), &path);
  if (opts_.debuginfod_progress) std::fprintf(stderr, "\r\033[K");
  if (fd < 0) {
    r.attempts.push_back(StrCat("debuginfod ", urls, ": ", std::strerror(-fd)));
    return;
  }
  UniqueFd(fd).Reset();  // only the path of debuginfod's cached copy is wanted
  std::string p = path ? path : "";
  std::free(path);
  TryCandidate(p, req, "debuginfod", r);
}

LookupResult DebugFinder::Find(const DebugFileRequest& req) {
  LookupResult r;
  r.status = target::DebugFileStatus::kNotFound;
  std::vector<std::string> roots = Roots();
  const std::string hex = req.build_id ? req.build_id->ToHex() : "";
  auto done = [&] { return r.found.has_value(); };

  if (req.module.empty() && !opts_.vmlinux.empty() && TryCandidate(opts_.vmlinux, req, "local", r)) return r;
  for (const auto& root : roots) {
    if (hex.size() > 2 &&
        TryCandidate(StrCat(root, "/.build-id/", hex.substr(0, 2), "/", hex.substr(2), ".debug"), req, "local", r)) {
      return r;
    }
    if (req.module.empty()) {
      for (const auto& p :
           {StrCat(root, "/boot/vmlinux-", req.release), StrCat(root, "/lib/modules/", req.release, "/vmlinux")}) {
        if (!req.release.empty() && TryCandidate(p, req, "local", r)) return r;
      }
    } else {
      const auto& files = ModuleFiles(root, req.release);
      auto it = files.find(ModuleKey(req.module));
      if (it != files.end()) {
        for (const auto& p : it->second) {
          if (TryCandidate(p, req, "local", r)) return r;
        }
      }
    }
  }
  if (req.module.empty() && !req.release.empty()) {
    if (TryCandidate(SysrootPath(opts_.sysroot, "/boot/vmlinux-" + req.release), req, "local", r)) return r;
  }
  if (!done()) TryDebuginfod(req, r);
  if (!done() && r.attempts.empty()) {
    r.attempts.push_back(StrCat("no candidate under ", StrJoin(roots, ", "),
                                std::getenv("DEBUGINFOD_URLS") ? "" : " (DEBUGINFOD_URLS not set)"));
  }
  return r;
}

}  // namespace symdex::debuginfo
