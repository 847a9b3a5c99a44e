#include "server/debuginfo/symtab_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "server/common/strings.h"
#include "server/common/unique_fd.h"

namespace symdex::debuginfo {
namespace {

// One private, copy-on-write mapping of a whole file, unmapped on every path. Private and
// writable because libelf's elf_memory takes a char*; the file itself is never written.
class PrivateMapping {
 public:
  PrivateMapping(void* p, size_t n) : p_(p), n_(n) {}
  PrivateMapping(const PrivateMapping&) = delete;
  PrivateMapping& operator=(const PrivateMapping&) = delete;
  ~PrivateMapping() {
    if (p_ != MAP_FAILED) ::munmap(p_, n_);
  }
  char* data() const { return static_cast<char*>(p_); }

 private:
  void* p_;
  size_t n_;
};

}  // namespace

absl::StatusOr<ingest::ElfSymbolTable> ReadSymtabFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return absl::InternalError(StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  if (st.st_size <= 0) return absl::InvalidArgumentError(StrCat(path, ": empty file"));
  const size_t size = static_cast<size_t>(st.st_size);
  PrivateMapping m(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.get(), 0), size);
  if (m.data() == MAP_FAILED) return absl::InternalError(StrCat("cannot map ", path, ": ", std::strerror(errno)));
  // A file truncated while mapped would fault in libelf; debug files are immutable once
  // found (they are keyed by build-ID), and the store rechecks their stamp before reuse.
  auto table = ingest::ReadElfSymbols(m.data(), size);
  if (!table.ok()) return absl::Status(table.status().code(), StrCat(path, ": ", table.status().message()));
  return table;
}

}  // namespace symdex::debuginfo
