#include "server/ingest/elf_notes.h"

#include <cstdint>
#include <cstring>

#include "server/common/byte_reader.h"

namespace symdex::ingest {
namespace {
constexpr uint32_t kNtGnuBuildId = 3;
constexpr size_t kMaxBuildIdBytes = 64;

size_t Align4(uint64_t n) { return static_cast<size_t>((n + 3) & ~uint64_t{3}); }
}  // namespace

absl::StatusOr<std::optional<BuildId>> FindGnuBuildId(std::string_view notes) {
  // Notes are in the byte order of the file they come from: the host's (x86-64 kernels).
  ByteReader rd(notes, std::endian::native);
  while (rd.remaining() >= 12) {
    const uint64_t namesz = rd.Int<uint32_t>(), descsz = rd.Int<uint32_t>();
    const uint32_t type = rd.Int<uint32_t>();
    std::string_view name = rd.Bytes(Align4(namesz)).substr(0, static_cast<size_t>(namesz));
    std::string_view desc = rd.Bytes(Align4(descsz)).substr(0, static_cast<size_t>(descsz));
    if (!rd.ok()) return absl::InvalidArgumentError("ELF note runs past the end of the notes data");
    if (type == kNtGnuBuildId && name == std::string_view("GNU\0", 4)) {
      if (desc.empty() || desc.size() > kMaxBuildIdBytes) {
        return absl::InvalidArgumentError("GNU build-ID note has an implausible size");
      }
      return std::optional<BuildId>(BuildId::FromRaw(desc));
    }
  }
  return std::optional<BuildId>();
}

}  // namespace symdex::ingest
