#include "server/ingest/elf_notes.h"

#include <cstdint>
#include <cstring>

namespace symdex::ingest {
namespace {
constexpr uint32_t kNtGnuBuildId = 3;
constexpr size_t kMaxBuildIdBytes = 64;

uint32_t ReadU32(std::string_view s, size_t off) {
  uint32_t v;
  std::memcpy(&v, s.data() + off, 4);
  return v;
}
size_t Align4(uint64_t n) { return static_cast<size_t>((n + 3) & ~uint64_t{3}); }
}  // namespace

absl::StatusOr<std::optional<BuildId>> FindGnuBuildId(std::string_view notes) {
  size_t off = 0;
  while (off + 12 <= notes.size()) {
    uint64_t namesz = ReadU32(notes, off), descsz = ReadU32(notes, off + 4);
    uint32_t type = ReadU32(notes, off + 8);
    off += 12;
    size_t name_len = Align4(namesz), desc_len = Align4(descsz);
    if (name_len > notes.size() - off || desc_len > notes.size() - off - name_len) {
      return absl::InvalidArgumentError("ELF note runs past the end of the notes data");
    }
    std::string_view name = notes.substr(off, static_cast<size_t>(namesz));
    std::string_view desc = notes.substr(off + name_len, static_cast<size_t>(descsz));
    off += name_len + desc_len;
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
