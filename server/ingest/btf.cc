#include "server/ingest/btf.h"

#include <bit>
#include <cstdint>

#include "server/common/byte_reader.h"
#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

constexpr uint16_t kBtfMagic = 0xeb9f;
constexpr uint32_t kHeaderLen = 24;
constexpr uint32_t kKindFunc = 12;

// The bytes after a record's common 12 that its kind adds (include/uapi/linux/btf.h): a fixed
// part, and vlen members of a fixed size. -1: a kind this reader does not know, whose size
// it cannot skip.
int64_t TrailingBytes(uint32_t kind, uint32_t vlen) {
  switch (kind) {
    case 2:
    case 7:
    case 8:
    case 9:
    case 10:
    case 11:
    case 12:
    case 16:
    case 18:     // PTR FWD TYPEDEF
      return 0;  // VOLATILE CONST RESTRICT FUNC FLOAT TYPE_TAG
    case 1:
    case 14:
    case 17:
      return 4;  // INT VAR DECL_TAG
    case 3:
      return 12;  // ARRAY
    case 4:
    case 5:
    case 15:
    case 19:
      return int64_t{12} * vlen;  // STRUCT UNION DATASEC ENUM64
    case 6:
    case 13:
      return int64_t{8} * vlen;  // ENUM FUNC_PROTO
    default:
      return -1;
  }
}

}  // namespace

absl::StatusOr<BtfInfo> ReadBtf(std::string_view btf, std::string_view base_strings) {
  if (btf.size() < kHeaderLen) return absl::InvalidArgumentError("BTF: shorter than its header");
  std::endian order = std::endian::little;
  if (static_cast<uint8_t>(btf[0]) == (kBtfMagic >> 8) && static_cast<uint8_t>(btf[1]) == (kBtfMagic & 0xff)) {
    order = std::endian::big;
  } else if (static_cast<uint8_t>(btf[0]) != (kBtfMagic & 0xff) || static_cast<uint8_t>(btf[1]) != (kBtfMagic >> 8)) {
    return absl::InvalidArgumentError("BTF: no BTF magic (0xeb9f)");
  }
  ByteReader h(btf, order);
  uint16_t magic = 0;
  uint8_t version = 0, flags = 0;
  uint32_t hdr_len = 0, type_off = 0, type_len = 0, str_off = 0, str_len = 0;
  h.Ints(magic, version, flags, hdr_len, type_off, type_len, str_off, str_len);
  if (version != 1) return absl::InvalidArgumentError(StrCat("BTF: version ", version, " (this reader knows 1)"));
  if (hdr_len < kHeaderLen || hdr_len > btf.size()) return absl::InvalidArgumentError("BTF: bad header length");
  const std::string_view body = btf.substr(hdr_len);
  if (type_off > body.size() || type_len > body.size() - type_off || str_off > body.size() ||
      str_len > body.size() - str_off) {
    return absl::InvalidArgumentError("BTF: a section past the end of the data");
  }
  BtfInfo out;
  out.strings = std::string(body.substr(str_off, str_len));
  // A base BTF's strings start with the empty name; a split BTF's continue its base's.
  if (base_strings.empty() && !out.strings.empty() && out.strings[0] != '\0') {
    return absl::InvalidArgumentError("BTF: split BTF (a module's): its base's strings (vmlinux's) are needed");
  }
  // A string offset below the base's string length is the base's (split BTF).
  const uint64_t start = base_strings.size();
  auto name = [&](uint32_t off) -> std::optional<std::string_view> {
    std::string_view sec = base_strings;
    uint64_t at = off;
    if (at >= start) {
      sec = out.strings;
      at -= start;
    }
    if (at >= sec.size()) return std::nullopt;
    const size_t nul = sec.find('\0', static_cast<size_t>(at));
    if (nul == std::string_view::npos) return std::nullopt;
    return sec.substr(static_cast<size_t>(at), nul - static_cast<size_t>(at));
  };
  ByteReader t(body.substr(type_off, type_len), order);
  while (t.ok() && !t.done()) {
    uint32_t name_off = 0, info = 0, size_or_type = 0;
    t.Ints(name_off, info, size_or_type);
    if (!t.ok()) break;
    const uint32_t kind = (info >> 24) & 0x1f, vlen = info & 0xffff;
    const int64_t more = TrailingBytes(kind, vlen);
    if (more < 0) {
      return absl::InvalidArgumentError(StrCat("BTF: type ", out.types + 1, " has kind ", kind, ", unknown here"));
    }
    t.Skip(static_cast<size_t>(more));
    if (!t.ok()) break;
    ++out.types;
    if (kind == kKindFunc) {
      const auto n = name(name_off);
      if (!n || n->empty()) {
        return absl::InvalidArgumentError(
            StrCat("BTF: function type ", out.types, " has no name (string offset ", name_off, ")"));
      }
      out.funcs.emplace_back(*n);
    }
  }
  if (!t.ok()) return absl::InvalidArgumentError(StrCat("BTF: type section: ", t.error()));
  return out;
}

}  // namespace symdex::ingest
