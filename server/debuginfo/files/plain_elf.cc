#include "server/debuginfo/files/plain_elf.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/ingest/decompress.h"

namespace symdex::debuginfo {
namespace {

constexpr char kPlainCopyName[] = "the decompressed copy";

#ifndef ELFCOMPRESS_ZSTD
constexpr uint32_t ELFCOMPRESS_ZSTD = 2;  // glibc 2.36's elf.h predates it
#endif

struct Compressed {
  size_t index = 0;
  std::string name;
  Elf64_Shdr sh{};
  uint32_t type = 0;
  uint64_t size = 0, align = 1, new_offset = 0;
};

absl::Status ReadAt(int fd, void* buf, size_t n, uint64_t off, const std::string& path, std::string_view what) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return absl::InvalidArgumentError(StrCat(path, ": truncated ELF file (", what, ")"));
    p += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

absl::Status CopyAll(int from, int to, uint64_t size) {
  uint64_t done = 0;
  while (done < size) {
    loff_t in = static_cast<loff_t>(done), out = static_cast<loff_t>(done);
    const ssize_t r = ::copy_file_range(from, &in, to, &out, size - done, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;  // another file system, or none: copy by hand
    done += static_cast<uint64_t>(r);
  }
  std::vector<char> buf(size_t{1} << 20);
  while (done < size) {
    const ssize_t r = ::pread(from, buf.data(), std::min<uint64_t>(buf.size(), size - done), static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return absl::InternalError(StrCat("cannot copy the file: ", std::strerror(errno)));
    RETURN_IF_ERROR(WriteAllAt(to, std::string_view(buf.data(), static_cast<size_t>(r)), done, kPlainCopyName));
    done += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

std::string PlainElf::ReadBy(const std::string& reader) const {
  return compression_.empty() ? reader : StrCat(reader, ", ", compression_, " sections decompressed");
}

std::string PlainElf::SharedPath() const {
  return copy_ ? StrCat("/proc/", ::getpid(), "/fd/", copy_.get()) : original_;
}

absl::Status PlainElf::Explain(const absl::Status& s) const {
  if (s.ok() || path_ == original_) return s;
  std::string msg(s.message());
  for (const std::string& name : {SharedPath(), path_}) {
    for (size_t at; (at = msg.find(name)) != std::string::npos;) msg.replace(at, name.size(), original_);
  }
  return absl::Status(s.code(), msg);
}

namespace {

// Where each compressed section's bytes go in the copy (after the file's own, each at its
// alignment), and which algorithms they use.
struct CopyLayout {
  uint64_t end = 0;  // the copy's size
  bool zlib = false, zstd = false;
};
absl::StatusOr<CopyLayout> PlanLayout(int fd, const std::string& path, uint64_t file_size,
                                      const std::vector<Elf64_Shdr>& shdrs, uint64_t shstrndx,
                                      const PlainElfLimits& limits, std::vector<Compressed>& todo) {
  // Section names, for the messages (bounded: a name table is a few KiB).
  std::string names;
  if (shstrndx < shdrs.size() && shdrs[shstrndx].sh_type == SHT_STRTAB && shdrs[shstrndx].sh_size <= (1u << 24) &&
      shdrs[shstrndx].sh_offset <= file_size && shdrs[shstrndx].sh_size <= file_size - shdrs[shstrndx].sh_offset) {
    names.resize(shdrs[shstrndx].sh_size);
    RETURN_IF_ERROR(ReadAt(fd, names.data(), names.size(), shdrs[shstrndx].sh_offset, path, "section name table"));
  }
  CopyLayout out{.end = file_size};
  uint64_t& end = out.end;
  for (Compressed& c : todo) {
    c.name = c.sh.sh_name < names.size() ? std::string(names.c_str() + c.sh.sh_name) : StrCat("section ", c.index);
    const std::string where = StrCat(path, ": ", c.name);
    if (c.sh.sh_offset > file_size || c.sh.sh_size > file_size - c.sh.sh_offset || c.sh.sh_size < sizeof(Elf64_Chdr)) {
      return absl::InvalidArgumentError(StrCat(where, ": compressed section lies outside the file"));
    }
    Elf64_Chdr ch;
    RETURN_IF_ERROR(ReadAt(fd, &ch, sizeof ch, c.sh.sh_offset, path, "compression header"));
    if (ch.ch_type != ELFCOMPRESS_ZLIB && ch.ch_type != ELFCOMPRESS_ZSTD) {
      return absl::InvalidArgumentError(
          StrCat(where, ": compressed with algorithm ", ch.ch_type, " (symdex reads zlib (1) and zstd (2))"));
    }
    if (ch.ch_size > limits.max_section) {
      return absl::ResourceExhaustedError(
          StrCat(where, ": declares ", ch.ch_size, " bytes uncompressed, over the limit of ", limits.max_section));
    }
    c.type = ch.ch_type;
    c.size = ch.ch_size;
    c.align = ch.ch_addralign != 0 && (ch.ch_addralign & (ch.ch_addralign - 1)) == 0 ? ch.ch_addralign : 1;
    const uint64_t a = std::min<uint64_t>(c.align, 4096);
    c.new_offset = (end + a - 1) / a * a;
    end = c.new_offset + c.size;
    if (end > limits.max_total) {
      return absl::ResourceExhaustedError(StrCat(path, ": its decompressed sections would make a copy of ", end,
                                                 " bytes, over the limit of ", limits.max_total));
    }
    (ch.ch_type == ELFCOMPRESS_ZLIB ? out.zlib : out.zstd) = true;
  }
  return out;
}

// Each section of `todo` decompressed from `fd` into `copy` at its new offset, by `jobs` threads.
absl::Status DecompressInto(int fd, int copy, uint64_t file_size, const std::vector<Compressed>& todo, unsigned jobs,
                            const std::string& path) {
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return absl::InternalError(StrCat("cannot map ", path, ": ", std::strerror(errno)));
  const char* base = static_cast<const char*>(map);
  std::atomic<size_t> next{0};
  std::mutex mu;
  absl::Status failed;
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < todo.size();) {
      const Compressed& c = todo[k];
      const std::string_view in(base + c.sh.sh_offset + sizeof(Elf64_Chdr), c.sh.sh_size - sizeof(Elf64_Chdr));
      uint64_t at = c.new_offset;
      absl::Status s = ingest::DecompressStream(
          in, c.type == ELFCOMPRESS_ZLIB ? ingest::Compression::kZlib : ingest::Compression::kZstd, c.size,
          [&](std::string_view piece) {
            RETURN_IF_ERROR(WriteAllAt(copy, piece, at, kPlainCopyName));
            at += piece.size();
            return absl::OkStatus();
          });
      if (s.ok() && at != c.new_offset + c.size) {
        s = absl::InvalidArgumentError(StrCat("holds ", at - c.new_offset, " bytes, its header declares ", c.size));
      }
      // The compressed bytes are read once: drop their pages from this process.
      const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
      const uintptr_t lo = reinterpret_cast<uintptr_t>(in.data()) & ~(page - 1);
      ::madvise(reinterpret_cast<void*>(lo), reinterpret_cast<uintptr_t>(in.data()) + in.size() - lo, MADV_DONTNEED);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed.ok()) failed = absl::Status(s.code(), StrCat(path, ": ", c.name, ": ", s.message()));
        next = todo.size();
      }
    }
  };
  jobs = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(todo.size())));
  {
    std::vector<std::jthread> threads;
    for (unsigned t = 1; t < jobs; ++t) threads.emplace_back(work);
    work();
  }
  ::munmap(map, file_size);
  RETURN_IF_ERROR(failed);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PlainElf> PlainElf::Open(const std::string& path, unsigned jobs, const PlainElfLimits& limits) {
  PlainElf out;
  out.original_ = out.path_ = path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return out;
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr eh;
  if (file_size < sizeof eh || ::pread(fd.get(), &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh)) return out;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr)) {
    return out;  // not ours to judge: the readers after this one say what is wrong
  }
  uint64_t shnum = eh.e_shnum;
  uint64_t shstrndx = eh.e_shstrndx;
  if (eh.e_shoff > file_size || file_size - eh.e_shoff < sizeof(Elf64_Shdr)) return out;
  Elf64_Shdr first;
  RETURN_IF_ERROR(ReadAt(fd.get(), &first, sizeof first, eh.e_shoff, path, "section header 0"));
  if (shnum == 0) shnum = first.sh_size;  // SHN_LORESERVE sections or more: the count is here
  if (shstrndx == SHN_XINDEX) shstrndx = first.sh_link;
  if (shnum == 0 || shnum > (file_size - eh.e_shoff) / sizeof(Elf64_Shdr)) return out;
  std::vector<Elf64_Shdr> shdrs(shnum);
  RETURN_IF_ERROR(ReadAt(fd.get(), shdrs.data(), shnum * sizeof(Elf64_Shdr), eh.e_shoff, path, "section headers"));

  std::vector<Compressed> todo;
  for (size_t i = 1; i < shdrs.size(); ++i) {
    const Elf64_Shdr& sh = shdrs[i];
    if ((sh.sh_flags & SHF_COMPRESSED) == 0 || sh.sh_type == SHT_NOBITS) continue;
    Compressed c;
    c.index = i;
    c.sh = sh;
    todo.push_back(c);
  }
  if (todo.empty()) return out;

  ASSIGN_OR_RETURN(const CopyLayout layout, PlanLayout(fd.get(), path, file_size, shdrs, shstrndx, limits, todo));
  const uint64_t end = layout.end;

  std::string dir;
  auto made = UnlinkedScratchFile("symdex-plain", dir);
  if (!made.ok()) {
    return absl::Status(made.status().code(),
                        StrCat("cannot decompress ", path, "'s compressed sections: ", made.status().message()));
  }
  UniqueFd copy = std::move(*made);
  if (int e = ::posix_fallocate(copy.get(), 0, static_cast<off_t>(end)); e != 0 && e != EOPNOTSUPP && e != EINVAL) {
    return absl::ResourceExhaustedError(
        StrCat("no room in ", dir, " for the decompressed copy of ", path, " (", end, " bytes): ", std::strerror(e)));
  }
  if (auto s = CopyAll(fd.get(), copy.get(), file_size); !s.ok())
    return absl::Status(s.code(), StrCat(path, ": ", s.message()));

  RETURN_IF_ERROR(DecompressInto(fd.get(), copy.get(), file_size, todo, jobs, path));

  for (const Compressed& c : todo) {
    Elf64_Shdr sh = c.sh;
    sh.sh_flags &= ~static_cast<uint64_t>(SHF_COMPRESSED);
    sh.sh_offset = c.new_offset;
    sh.sh_size = c.size;
    sh.sh_addralign = c.align;
    RETURN_IF_ERROR(WriteAllAt(copy.get(), std::string_view(reinterpret_cast<const char*>(&sh), sizeof sh),
                               eh.e_shoff + c.index * sizeof(Elf64_Shdr), kPlainCopyName));
  }
  out.compression_ = layout.zlib && layout.zstd ? "zlib+zstd" : layout.zlib ? "zlib" : "zstd";
  out.sections_ = todo.size();
  out.path_ = StrCat("/proc/self/fd/", copy.get());
  out.copy_ = std::move(copy);
  return out;
}

}  // namespace symdex::debuginfo
