#include "server/debuginfo/probe_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/common/unique_fd.h"
#include "server/ingest/decompress.h"

namespace symdex::debuginfo {
namespace {

constexpr size_t kMaxCompressedModule = size_t{512} << 20;
constexpr size_t kMaxModuleImage = size_t{1} << 30;

struct Mapping {
  void* addr = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) ::munmap(addr, size);
  }
};

bool Compressed(const std::string& path) {
  for (const char* ext : {".xz", ".zst", ".gz"}) {
    if (path.ends_with(ext)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ingest::ProbeTables> ReadProbeTablesFile(const std::string& path) {
  if (Compressed(path)) {
    ASSIGN_OR_RETURN(std::string raw, ReadFileBounded(path, kMaxCompressedModule));
    const ingest::Compression c = ingest::DetectCompression(raw);
    std::string image = std::move(raw);
    if (c != ingest::Compression::kNone) {
      ASSIGN_OR_RETURN(image, ingest::Decompress(image, c, kMaxModuleImage));
    }
    auto t = ingest::ReadProbeTables(std::span<char>(image.data(), image.size()));
    if (!t.ok()) return absl::InvalidArgumentError(StrCat(path, ": ", t.status().message()));
    return t;
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  }
  if (st.st_size == 0) return absl::InvalidArgumentError(StrCat(path, ": empty file"));
  Mapping m;
  m.size = static_cast<size_t>(st.st_size);
  // Private and writable: libelf may convert in place; nothing reaches the file.
  m.addr = ::mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.get(), 0);
  if (m.addr == MAP_FAILED) return absl::InternalError(StrCat("cannot map ", path, ": ", std::strerror(errno)));
  auto t = ingest::ReadProbeTables(std::span<char>(static_cast<char*>(m.addr), m.size));
  if (!t.ok()) return absl::InvalidArgumentError(StrCat(path, ": ", t.status().message()));
  return t;
}

}  // namespace symdex::debuginfo
