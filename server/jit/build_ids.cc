#include "server/jit/build_ids.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <memory>

#include "server/common/strings.h"

namespace symdex::jit {

using ingest::CodeLoad;
using ingest::JitdumpHeader;
namespace {

struct EvpMdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using EvpMdCtxPtr = std::unique_ptr<EVP_MD_CTX, EvpMdCtxDeleter>;

// The most recent OpenSSL error, for messages ("unsupported" when MD5 is disabled under FIPS).
std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no OpenSSL error recorded";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

// One incremental EVP digest.
class Digest {
 public:
  static absl::StatusOr<Digest> Start(const EVP_MD* md, std::string_view what) {
    EvpMdCtxPtr ctx(EVP_MD_CTX_new());
    if (ctx == nullptr || md == nullptr || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1) {
      return absl::InternalError(StrCat("cannot start ", what, " digest: ", OpenSslError()));
    }
    return Digest(std::move(ctx), what);
  }

  void Update(std::string_view bytes) {
    if (ok_ && !bytes.empty()) ok_ = EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) == 1;
  }

  absl::StatusOr<std::string> Finish() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!ok_ || EVP_DigestFinal_ex(ctx_.get(), out, &len) != 1) {
      return absl::InternalError(StrCat(what_, " digest failed: ", OpenSslError()));
    }
    return std::string(reinterpret_cast<const char*>(out), len);
  }

 private:
  Digest(EvpMdCtxPtr ctx, std::string_view what) : ctx_(std::move(ctx)), what_(what) {}
  EvpMdCtxPtr ctx_;
  std::string what_;
  bool ok_ = true;
};

// `n` bytes of v in the given byte order.
std::string Encode(uint64_t v, size_t n, bool big_endian) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    size_t at = big_endian ? n - 1 - i : i;
    out[at] = static_cast<char>(v >> (8 * i) & 0xff);
  }
  return out;
}
std::string Le32(uint64_t v) { return Encode(v, 4, false); }
std::string Le64(uint64_t v) { return Encode(v, 8, false); }

// ELF constants as genelf.c uses them (from <elf.h>; spelled out so the layout is visible here).
constexpr uint8_t kStbLocal = 0;
constexpr uint8_t kSttFunc = 2;
constexpr uint8_t kStvDefault = 0;
constexpr uint16_t kFirstSection = 1;  // st_shndx of the function: .text is section 1

}  // namespace

std::string GenElfSymtab(uint64_t code_size, const GenElfTarget& t) {
  const bool be = t.big_endian;
  // st_info = ELF_ST_BIND(STB_LOCAL) | ELF_ST_TYPE(STT_FUNC) in genelf.c. Those macros are the
  // *extracting* ELF64_ST_BIND/ELF64_ST_TYPE (x >> 4, x & 0xf), so the expression is 0 | 2 -- the
  // same byte ELF64_ST_INFO(STB_LOCAL, STT_FUNC) would give.
  const uint8_t info = static_cast<uint8_t>(kStbLocal << 4 | kSttFunc);
  // perf stores csize (an int) into st_size; for any code smaller than 2 GiB that is code_size.
  std::string sym1;
  if (t.elf64) {
    // Elf64_Sym: st_name u32, st_info u8, st_other u8, st_shndx u16, st_value u64, st_size u64.
    sym1 = Encode(1, 4, be) + static_cast<char>(info) + static_cast<char>(kStvDefault) + Encode(kFirstSection, 2, be) +
           Encode(t.text_offset, 8, be) + Encode(code_size, 8, be);
  } else {
    // Elf32_Sym: st_name u32, st_value u32, st_size u32, st_info u8, st_other u8, st_shndx u16.
    sym1 = Encode(1, 4, be) + Encode(t.text_offset, 4, be) + Encode(code_size, 4, be) + static_cast<char>(info) +
           static_cast<char>(kStvDefault) + Encode(kFirstSection, 2, be);
  }
  return std::string(sym1.size(), '\0') + sym1;  // symbol 0 is the all-zero undefined symbol
}

std::string GenElfStrtab(std::string_view name) {
  std::string out(1, '\0');
  out += name;
  out.push_back('\0');
  return out;
}

GenElfTarget GenElfTargetFor(const JitdumpHeader& header) {
  constexpr uint32_t kEm386 = 3, kEmArm = 40, kEmPpc = 20, kEmSparc = 2;
  GenElfTarget t;
  t.big_endian = header.byte_order == std::endian::big;
  if (header.elf_mach == kEm386 || header.elf_mach == kEmArm || header.elf_mach == kEmPpc ||
      header.elf_mach == kEmSparc) {
    t.elf64 = false;
    t.text_offset = 0x60;  // round_up(sizeof(Elf32_Ehdr) 52 + sizeof(Elf32_Phdr) 32, 16)
  }
  return t;
}

absl::StatusOr<BuildId> PerfMd5AddrBuildId(uint64_t code_addr, std::string_view code, const GenElfTarget& target) {
  ASSIGN_OR_RETURN(Digest d, Digest::Start(EVP_md5(), "MD5"));
  d.Update(Encode(code_addr, target.elf64 ? 8 : 4, target.big_endian));
  d.Update(code);
  ASSIGN_OR_RETURN(std::string md5, d.Finish());
  md5.append(4, '\0');  // build_id[20]: MD5 fills the first 16 bytes, the rest stay zero
  return BuildId::FromRaw(md5);
}

absl::StatusOr<BuildId> PerfSha1CodeBuildId(std::string_view code) {
  ASSIGN_OR_RETURN(Digest d, Digest::Start(EVP_sha1(), "SHA-1"));
  d.Update(code);
  ASSIGN_OR_RETURN(std::string sha1, d.Finish());
  return BuildId::FromRaw(sha1);
}

absl::StatusOr<BuildId> PerfSha1SymtabBuildId(std::string_view name, std::string_view code,
                                              const GenElfTarget& target) {
  ASSIGN_OR_RETURN(Digest d, Digest::Start(EVP_sha1(), "SHA-1"));
  // Same bytes, same order as the patch's build_id_data: code, symtab, strtab. genelf.c stops
  // the name at its first NUL (strlen); jitdump names cannot contain one anyway.
  d.Update(code);
  d.Update(GenElfSymtab(code.size(), target));
  d.Update(GenElfStrtab(name.substr(0, name.find('\0'))));
  ASSIGN_OR_RETURN(std::string sha1, d.Finish());
  return BuildId::FromRaw(sha1);
}

absl::StatusOr<BuildId> SymdexJitBuildId(const SymdexJitIdentity& id) {
  ASSIGN_OR_RETURN(Digest d, Digest::Start(EVP_sha256(), "SHA-256"));
  d.Update(kSymdexJitBuildIdTag);
  d.Update(Le32(id.pid));
  d.Update(Le64(id.dump_timestamp));
  d.Update(Le64(id.instance.size()));
  d.Update(id.instance);
  d.Update(Le64(id.code_index));
  d.Update(Le64(id.code_addr));
  d.Update(Le64(id.name.size()));
  d.Update(id.name);
  d.Update(Le64(id.code.size()));
  d.Update(id.code);
  ASSIGN_OR_RETURN(std::string sha256, d.Finish());
  return BuildId::FromRaw(std::string_view(sha256).substr(0, kSymdexJitBuildIdSize));
}

absl::StatusOr<BuildId> JitBuildId(JitBuildIdScheme scheme, const JitdumpHeader& header, const CodeLoad& load,
                                   std::string_view instance) {
  switch (scheme) {
    case JitBuildIdScheme::kMd5Addr:
      return PerfMd5AddrBuildId(load.code_addr, load.code, GenElfTargetFor(header));
    case JitBuildIdScheme::kSha1Code:
      return PerfSha1CodeBuildId(load.code);
    case JitBuildIdScheme::kSha1Symtab:
      return PerfSha1SymtabBuildId(load.name, load.code, GenElfTargetFor(header));
    case JitBuildIdScheme::kSymdex:
      return SymdexJitBuildId(SymdexJitIdentity{
          .pid = load.pid,
          .dump_timestamp = header.timestamp,
          .instance = instance,
          .code_index = load.code_index,
          .code_addr = load.code_addr,
          .name = load.name,
          .code = load.code,
      });
  }
  return absl::InvalidArgumentError("unknown JIT build-ID scheme");
}

}  // namespace symdex::jit
