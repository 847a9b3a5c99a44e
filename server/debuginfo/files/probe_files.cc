#include "server/debuginfo/files/probe_files.h"

#include <utility>

#include "server/common/file_util.h"
#include "server/common/mapped_file.h"
#include "server/common/strings.h"
#include "server/ingest/decompress.h"

namespace symdex::debuginfo {
namespace {

constexpr size_t kMaxCompressedModule = size_t{512} << 20;
constexpr size_t kMaxModuleImage = size_t{1} << 30;

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
  ASSIGN_OR_RETURN(MappedFile m, MappedFile::MapPrivate(path));
  auto t = ingest::ReadProbeTables(m.bytes());
  if (!t.ok()) return absl::InvalidArgumentError(StrCat(path, ": ", t.status().message()));
  return t;
}

}  // namespace symdex::debuginfo
