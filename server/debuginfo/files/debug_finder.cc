#include "server/debuginfo/files/debug_finder.h"

#include <cerrno>

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "server/common/elf_handle.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/common/unique_fd.h"
#include "server/debuginfo/files/debuginfod_lib.h"
#include "server/ingest/decompress.h"
#include "server/ingest/elf_notes.h"
#include "server/kernel/vmlinux_release.h"

namespace symdex::debuginfo {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxCompressedModule = size_t{512} << 20;
constexpr size_t kMaxDecompressedModule = size_t{2} << 30;

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
  InitLibelf();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  char magic[6] = {};
  ssize_t n = ::pread(fd.get(), magic, sizeof magic, 0);
  auto kind = ingest::DetectCompression(std::string_view(magic, n > 0 ? static_cast<size_t>(n) : 0));
  if (kind != ingest::Compression::kNone) {
    fd.Reset();
    ASSIGN_OR_RETURN(std::string raw, ReadFileBounded(path, kMaxCompressedModule));
    ASSIGN_OR_RETURN(std::string image, ingest::Decompress(raw, kind, kMaxDecompressedModule));
    ElfPtr elf(elf_memory(image.data(), image.size()));
    if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
    return ElfBuildId(elf.get());
  }
  ElfPtr elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
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
  ElfPtr elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
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

std::vector<std::string> DebugFinder::ReleaseDirs(const std::string& root, const std::string& release, bool all) {
  std::vector<std::string> out;
  std::error_code ec;
  const std::string base = root + "/lib/modules";
  if (!release.empty() && fs::is_directory(base + "/" + release, ec)) out.push_back(base + "/" + release);
  if (!all) return out;
  std::vector<std::string> others;
  for (fs::directory_iterator i(base, fs::directory_options::skip_permission_denied, ec), end; !ec && i != end;
       i.increment(ec)) {
    std::error_code ec2;
    if (i->path().filename() != release && i->is_directory(ec2)) others.push_back(i->path().string());
  }
  std::sort(others.begin(), others.end());
  out.insert(out.end(), others.begin(), others.end());
  return out;
}

const std::map<std::string, std::vector<std::string>>& DebugFinder::ModuleFiles(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = module_files_.find(dir);
  if (it != module_files_.end()) return it->second;
  std::map<std::string, std::vector<std::string>>& files = module_files_[dir];
  std::error_code ec;
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

const std::map<std::string, std::vector<std::string>>& DebugFinder::BuildIdIndex(const std::string& root) {
  // Built once per root from the name maps; the build-ID reads happen under the lock, so other
  // lookups wait for it rather than read every file again.
  std::vector<std::string> dirs = ReleaseDirs(root, "", true);
  std::vector<std::string> paths;
  for (const auto& d : dirs) {
    for (const auto& [_, v] : ModuleFiles(d)) {
      for (const auto& p : v) {
        // Uncompressed files only: reading a build-ID there is a mapped page or two, while a
        // compressed one would be decompressed whole for a file that is rarely the one.
        if (p.ends_with(".ko") || p.ends_with(".ko.debug")) paths.push_back(p);
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = build_id_index_.find(root);
  if (it != build_id_index_.end()) return it->second;
  auto& index = build_id_index_[root];
  for (const auto& p : paths) {
    auto id = ReadFileBuildId(p);
    if (id.ok() && id->has_value()) index[(*id)->ToHex()].push_back(p);
  }
  return index;
}

bool DebugFinder::TryCandidate(const std::string& path, const DebugFileRequest& req, const std::string& origin,
                               LookupResult& r, bool elsewhere) {
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
      if (!elsewhere) r.status = kernel::DebugFileStatus::kBuildIdMismatch;
      return false;
    }
    if (!(**id == *req.build_id)) {
      r.attempts.push_back(StrCat(path, ": build-ID ", (*id)->ToHex(), " != ", req.build_id->ToHex()));
      // A file where release R puts it, but of another build, is a mismatch worth reporting;
      // another kernel's file met while searching elsewhere is not.
      if (!elsewhere) r.status = kernel::DebugFileStatus::kBuildIdMismatch;
      return false;
    }
  }
  r.found = FoundDebugFile{path, origin, req.build_id.has_value(), *id};
  r.status = kernel::DebugFileStatus::kUsed;
  r.attempts.push_back(StrCat(path, ": used", req.build_id ? "" : " (unverified: the target has no build-ID)"));
  return true;
}

bool DebugFinder::FindModule(const std::string& root, const DebugFileRequest& req, LookupResult& r) {
  // By name: lib/modules/<release>/ first, then (only when the build-ID can vouch for the file)
  // every other release directory, whatever the layout calls it.
  const std::vector<std::string> dirs = ReleaseDirs(root, req.release, req.build_id.has_value());
  std::set<std::string> tried;
  for (const auto& dir : dirs) {
    const auto& files = ModuleFiles(dir);
    auto it = files.find(ModuleKey(req.module));
    if (it == files.end()) continue;
    const bool elsewhere = fs::path(dir).filename() != req.release;
    for (const auto& p : it->second) {
      tried.insert(p);
      if (TryCandidate(p, req, "local", r, elsewhere)) return true;
    }
  }
  // By build-ID alone: a debug file named unlike its module (or not at all like it).
  if (!req.build_id || dirs.empty()) return false;
  const auto& index = BuildIdIndex(root);
  auto it = index.find(req.build_id->ToHex());
  if (it == index.end()) return false;
  for (const auto& p : it->second) {
    if (!tried.count(p) && TryCandidate(p, req, "local", r, true)) return true;
  }
  return false;
}

bool DebugFinder::FindVmlinuxElsewhere(const std::string& root, const DebugFileRequest& req, LookupResult& r) {
  // An offline System.map names no build-ID: a vmlinux under another name is taken only when
  // its own linux_banner names the wanted release; with a build-ID, that decides.
  if (req.release.empty() && !req.build_id) return false;
  std::vector<std::string> candidates;
  for (const auto& dir : ReleaseDirs(root, req.release, true)) {
    if (fs::path(dir).filename() != req.release) candidates.push_back(dir + "/vmlinux");
  }
  std::error_code ec;
  for (fs::directory_iterator i(root + "/boot", fs::directory_options::skip_permission_denied, ec), end;
       !ec && i != end; i.increment(ec)) {
    const std::string name = i->path().filename().string();
    if (name.starts_with("vmlinux-") && name != "vmlinux-" + req.release) candidates.push_back(i->path().string());
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& p : candidates) {
    std::error_code ec2;
    if (!fs::is_regular_file(p, ec2)) continue;
    if (req.build_id) {
      if (TryCandidate(p, req, "local", r, true)) return true;
      continue;
    }
    auto rel = kernel::VmlinuxRelease(p);
    if (!rel.ok()) {
      r.attempts.push_back(StrCat(p, ": ", rel.status().message()));
      continue;
    }
    if (*rel != req.release) {
      r.attempts.push_back(
          StrCat(p, ": its linux_banner names release ", rel->empty() ? "none" : *rel, ", not ", req.release));
      continue;
    }
    auto id = ReadFileBuildId(p);
    r.found = FoundDebugFile{p, "local", false, id.ok() ? *id : std::nullopt};
    r.status = kernel::DebugFileStatus::kUsed;
    r.attempts.push_back(
        StrCat(p, ": used (its linux_banner names release ", req.release, "; unverified: the target has no build-ID)"));
    return true;
  }
  return false;
}

void DebugFinder::TryDebuginfod(const DebugFileRequest& req, LookupResult& r) {
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  if (!opts_.use_debuginfod || urls == nullptr || *urls == '\0' || !req.build_id) return;
  std::string error;
  const DebuginfodLib* lib = LoadDebuginfod(&error);
  if (lib == nullptr) {
    r.attempts.push_back(StrCat("debuginfod: ", error));
    return;
  }
  // One fetch at a time per process. Concurrent fetches from threads of one process (each with
  // its own client) left corrupt copies in the client cache on a loaded 2-core machine — a module
  // file 256 KiB longer than the server sent — while the same fetches from separate processes
  // were intact; libdebuginfod 0.188's thread safety is not established here, so it is not relied on.
  static std::mutex fetch_mu;
  std::lock_guard<std::mutex> one_fetch(fetch_mu);
  std::unique_ptr<debuginfod_client, void (*)(debuginfod_client*)> client(lib->begin(), lib->end);
  if (!client) {
    r.attempts.push_back("debuginfod: cannot create a client");
    return;
  }
  if (opts_.debuginfod_progress) {
    lib->set_progressfn(client.get(), [](debuginfod_client*, long a, long b) {
      if (b > 0) std::fprintf(stderr, "\r\033[Kdebuginfod: %ld/%ld", a, b);
      return 0;
    });
  }
  const std::string& raw = req.build_id->raw();
  char* path = nullptr;
  int fd = lib->find_debuginfo(client.get(), reinterpret_cast<const unsigned char*>(raw.data()),
                               static_cast<int>(raw.size()), &path);
  if (opts_.debuginfod_progress) std::fprintf(stderr, "\r\033[K");
  if (fd < 0) {
    r.attempts.push_back(StrCat("debuginfod ", urls, ": ", std::strerror(-fd)));
    r.debuginfod_errno = -fd;
    return;
  }
  UniqueFd(fd).Reset();  // only the path of debuginfod's cached copy is wanted
  std::string p = path ? path : "";
  std::free(path);
  if (TryCandidate(p, req, "debuginfod", r)) return;
  // Not the build-ID's file (a transfer gone wrong, a lying server): libdebuginfod hands back
  // its cached copy without asking again, so the copy goes and the next request fetches anew.
  // Only a path of the client cache's own layout, <cache>/<build-id>/debuginfo, is removed.
  const std::string cache_file = StrCat("/", req.build_id->ToHex(), "/debuginfo");
  if (p.size() > cache_file.size() && p.ends_with(cache_file)) {
    std::error_code ec;
    if (fs::remove(p, ec)) r.attempts.push_back(StrCat(p, ": removed from debuginfod's cache"));
  }
}

absl::Status LookupFailure(const LookupResult& r, const std::string& what) {
  const std::string msg = StrCat(what, " (", kernel::Name(r.status), "); tried: ", StrJoin(r.attempts, "; "));
  if (r.status != kernel::DebugFileStatus::kNotFound) return absl::InvalidArgumentError(msg);
  switch (r.debuginfod_errno) {
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ECONNRESET:
    case ECONNABORTED:
      return absl::UnavailableError(msg);
    case ETIME:
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    case EFBIG:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::NotFoundError(msg);
  }
}

LookupResult DebugFinder::Find(const DebugFileRequest& req) {
  LookupResult r;
  r.status = kernel::DebugFileStatus::kNotFound;
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
    } else if (FindModule(root, req, r)) {
      return r;
    }
  }
  if (req.module.empty() && !req.release.empty()) {
    if (TryCandidate(SysrootPath(opts_.sysroot, "/boot/vmlinux-" + req.release), req, "local", r)) return r;
  }
  // Only when no file is where release R puts it: a vmlinux under another name.
  if (req.module.empty()) {
    for (const auto& root : roots) {
      if (FindVmlinuxElsewhere(root, req, r)) return r;
    }
  }
  if (!done()) TryDebuginfod(req, r);
  if (!done() && r.attempts.empty()) {
    r.attempts.push_back(StrCat("no candidate under ", StrJoin(roots, ", "),
                                std::getenv("DEBUGINFOD_URLS") ? "" : " (DEBUGINFOD_URLS not set)"));
  }
  return r;
}

}  // namespace symdex::debuginfo
