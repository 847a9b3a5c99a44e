// Build-IDs for jitted code: the ones perf gave the `jitted-<pid>-<code_index>.so` files that
// `perf inject -j` writes (three eras, reproduced byte for byte so symdex can match a perf.data's
// build-ID to a jitdump CODE_LOAD), and symdex's own, which does not collide.
//
// The perf eras (tools/perf/util/genelf.c, gen_build_id() / jit_write_elf()):
//   kMd5Addr     perf <= 6.16 built with libcrypto: MD5(load_addr ‖ code), where load_addr is the
//                CODE_LOAD's code_addr as the `unsigned long` of an LP64 little-endian host (8 LE
//                bytes); 16 digest bytes + 4 zero bytes (the note's build_id[20] is static, MD5
//                fills 16). Without libcrypto perf used 20 random bytes (BUILD_ID_URANDOM), which
//                nothing can reproduce -- Debian 12's perf 6.1 is such a build.
//   kSha1Code    perf 6.17 (built-in sha1()): SHA-1(code). Identical code => identical IDs: the
//                bug, since runtimes emit byte-identical stubs under different names.
//   kSha1Symtab  the fix from the Nov 2025 linux-perf thread ("perf jitdump: Add sym/str-tables
//                to build-ID generation", Namhyung Kim): SHA-1(code ‖ symtab ‖ strtab), where
//                symtab and strtab are the exact in-memory bytes jit_write_elf puts in the DSO:
//                  symtab = Elf_Sym[2] in host byte order (Elf64_Sym is 24 bytes:
//                           u32 st_name, u8 st_info, u8 st_other, u16 st_shndx, u64 st_value,
//                           u64 st_size; Elf32_Sym is 16: u32 st_name, u32 st_value,
//                           u32 st_size, u8 st_info, u8 st_other, u16 st_shndx)
//                    [0] all zero (the undefined symbol)
//                    [1] st_name 1, st_info STB_LOCAL<<4|STT_FUNC = 0x02, st_other STV_DEFAULT 0,
//                        st_shndx 1, st_value GEN_ELF_TEXT_OFFSET, st_size code size
//                  strtab = "\0" name "\0"  (symlen = 2 + strlen(name))
//                GEN_ELF_TEXT_OFFSET = round_up(sizeof(Elf_Ehdr) + sizeof(Elf_Phdr), 16): 0x80 for
//                ELF64, 0x60 for ELF32 (sizeof(Elf_Ehdr), 0x40, before late 2022; this era is
//                after that). Hashing order: code, then symtab, then strtab -- the order the patch
//                appends them to build_id_data. Same code + same name still collide.
//   Sources read: the patch in /work/shared/seeds/000_82bcd2efe837890b.txt; torvalds/linux
//   tools/perf/util/genelf.c (the static symtab[] initializer, gen_build_id() for MD5/SHA,
//   "symlen = 2 + strlen(sym)"), tools/perf/util/genelf.h (Elf_Sym / ELF_ST_* macros,
//   GEN_ELF_TEXT_OFFSET and the commit changing it to round_up(Ehdr + Phdr, 16)),
//   tools/perf/util/jitdump.c (jit_repipe_code_load passes code_addr as load_addr and the last
//   code_size bytes of the record as the code).
//   (A later proposal in the same discussion, "perf genelf: Switch from SHA-1 to BLAKE2s", hashes
//   tagged, length-prefixed code/symtab/strtab with BLAKE2s-160; not implemented here.)
//
// symdex's own scheme (kSymdex): why, and what goes in
//   The job of a build-ID in symdex is to key one jitted code object in the index. perf's IDs
//   cannot do that: MD5/SHA-1 of code collide for every copy of a stub (V8 gives each JS function
//   its own copy of the interpreter entry trampoline under --interpreted-frames-native-stack;
//   CPython's perf trampolines are identical too), SHA-1 over code+symtab+strtab still collides
//   when the same function is jitted twice, in two processes, or in two runs, and symdex keeps
//   many processes and runs in one index. So the ID is bound to the process instance and the
//   code object, not only to its content:
//     "symdex-jit-build-id/v1"           domain separation: never equal to any other hash input
//     u32le pid                           the process ...
//     u64le dump timestamp                ... and its instance: pids are reused across runs; the
//                                         jitdump header timestamp is taken when the process opens
//                                         its dump
//     u64le len ‖ instance                optional caller-chosen instance id (e.g. the boot_id or
//                                         host name, for indexes that span machines); may be empty
//     u64le code_index                    unique per load within the process (the jitted-*.so name)
//     u64le code_addr                     where it was loaded
//     u64le len ‖ name                    the symbol
//     u64le len ‖ code                    the bytes
//   Every variable-length field is length-prefixed and the order is fixed, so two different
//   tuples never produce the same byte string (no "ab"+"c" vs "a"+"bc" ambiguity).
//   Why not plain SHA-1: SHA-1 is broken for collisions (SHAttered 2017, chosen-prefix collisions
//   in 2020), and jitted code and names are shaped by whoever wrote the JS/Python being run; with
//   the pid/instance fields an attacker cannot aim at another process's IDs, but there is no reason
//   to build a new identifier on a broken hash. (MD5 is worse, and is disabled in FIPS setups.)
//   Why SHA-256 truncated to 20 bytes: 20 bytes is what the build-ID plumbing expects (the
//   NT_GNU_BUILD_ID of `ld --build-id`, perf's PERF_RECORD_MMAP2 and build-ID cache, perf's own
//   jitted DSOs); a 160-bit prefix of SHA-256 keeps ~80-bit collision resistance, which is plenty
//   for distinct code objects; SHA-256 is in every libcrypto (FIPS included) and hardware
//   accelerated (SHA-NI, ARMv8 SHA2). lld and mold truncate BLAKE3 the same way, and the perf
//   reviewers (Eric Biggers) recommended truncated SHA-256; BLAKE3 would be a new dependency, and
//   Debian 12's OpenSSL 3.0 only offers fixed-size BLAKE2s-256 (a 160-bit BLAKE2s is a different
//   function, not a truncation).
//   Computed incrementally with EVP_DigestUpdate, one call per field: no concatenation buffer, so
//   a large code blob is never copied (the seed thread's complaint about genelf.c).
//   The IDs are for symdex's index; they match no file perf writes, which is what the perf-era
//   functions above are for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/common/build_id.h"
#include "server/common/jit_schemes.h"
#include "server/common/status.h"
#include "server/ingest/jitdump.h"

namespace symdex::jit {

// How the jitted DSO's symtab is laid out: the host perf inject ran on.
struct GenElfTarget {
  bool elf64 = true;
  bool big_endian = false;
  // GEN_ELF_TEXT_OFFSET: 0x80 for ELF64 and 0x60 for ELF32 since late 2022.
  uint64_t text_offset = 0x80;
};

// The exact .symtab / .strtab bytes genelf.c writes for one function (see the header comment).
std::string GenElfSymtab(uint64_t code_size, const GenElfTarget& target = {});
std::string GenElfStrtab(std::string_view name);

// load_addr is hashed as the target's `unsigned long`: 8 bytes (4 on ELF32) in its byte order.
absl::StatusOr<BuildId> PerfMd5AddrBuildId(uint64_t code_addr, std::string_view code, const GenElfTarget& target = {});
absl::StatusOr<BuildId> PerfSha1CodeBuildId(std::string_view code);
absl::StatusOr<BuildId> PerfSha1SymtabBuildId(std::string_view name, std::string_view code,
                                              const GenElfTarget& target = {});

struct SymdexJitIdentity {
  uint32_t pid = 0;
  uint64_t dump_timestamp = 0;  // the jitdump header's timestamp
  std::string_view instance;    // optional extra process-instance id; may be empty
  uint64_t code_index = 0;
  uint64_t code_addr = 0;
  std::string_view name;
  std::string_view code;
};
inline constexpr std::string_view kSymdexJitBuildIdTag = "symdex-jit-build-id/v1";
inline constexpr size_t kSymdexJitBuildIdSize = 20;

absl::StatusOr<BuildId> SymdexJitBuildId(const SymdexJitIdentity& identity);

// The target perf inject would have run on for a dump: the dump's byte order, ELF32 for the
// 32-bit machines genelf.h supports (EM_386, EM_ARM, EM_PPC, EM_SPARC), ELF64 otherwise.
GenElfTarget GenElfTargetFor(const ingest::JitdumpHeader& header);

// The ID `scheme` gives `load` from a dump with `header` (perf eras use GenElfTargetFor(header)).
absl::StatusOr<BuildId> JitBuildId(JitBuildIdScheme scheme, const ingest::JitdumpHeader& header,
                                   const ingest::CodeLoad& load, std::string_view instance = {});

}  // namespace symdex::jit
