#include "server/common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "server/common/strings.h"
#include "server/common/unique_fd.h"

namespace symdex {

absl::StatusOr<MappedFile> MappedFile::MapPrivate(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return absl::InternalError(StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  if (st.st_size <= 0) return absl::InvalidArgumentError(StrCat(path, ": empty file"));
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) return absl::InternalError(StrCat("cannot map ", path, ": ", std::strerror(errno)));
  return MappedFile(static_cast<char*>(p), size);
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace symdex
