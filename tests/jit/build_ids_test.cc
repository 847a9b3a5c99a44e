#include "server/jit/build_ids.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <set>

#include "server/common/strings.h"
#include "tests/unit/test_util.h"

namespace symdex::jit {
namespace {

using ingest::CodeLoad;
using ingest::JitdumpHeader;

using symdex::testing::RunCommand;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;

// Lower-case hex digest of `bytes` by an independent tool ("sha1sum", "md5sum", "sha256sum",
// "openssl dgst -sha1 -r"): bytes go through a file, the tool prints "<hex> ...".
std::string ToolDigest(const std::string& tool, const std::string& bytes) {
  TempDir d;
  WriteFile(d / "in.bin", bytes);
  auto r = RunCommand(tool + " '" + (d / "in.bin") + "'");
  EXPECT_EQ(r.exit_code, 0) << tool << ": " << r.err;
  return r.out.substr(0, r.out.find_first_of(" \t\n"));
}

std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}
std::string Le32(uint32_t v) { return Le64(v).substr(0, 4); }

// The symtab exactly as genelf.c builds it: a static Elf_Sym[2] with designated initializers,
// using the same (extracting) ELF_ST_* macros, then st_size/st_value filled in. Raw struct bytes
// in host order -- which is what perf hashes.
std::string GenElfSymtabFromElfH64(uint64_t code_size, uint64_t text_offset) {
  Elf64_Sym symtab[] = {
      {.st_name = 0,
       .st_info = ELF64_ST_TYPE(STT_NOTYPE),
       .st_other = ELF64_ST_VISIBILITY(STV_DEFAULT),
       .st_shndx = 0,
       .st_value = 0x0,
       .st_size = 0},
      {.st_name = 1,
       .st_info = static_cast<unsigned char>(ELF64_ST_BIND(STB_LOCAL) | ELF64_ST_TYPE(STT_FUNC)),
       .st_other = ELF64_ST_VISIBILITY(STV_DEFAULT),
       .st_shndx = 1,
       .st_value = 0,
       .st_size = 0},
  };
  symtab[1].st_size = code_size;
  symtab[1].st_value = text_offset;
  return std::string(reinterpret_cast<const char*>(symtab), sizeof(symtab));
}

std::string GenElfSymtabFromElfH32(uint32_t code_size, uint32_t text_offset) {
  Elf32_Sym symtab[2];
  std::memset(symtab, 0, sizeof(symtab));
  symtab[1].st_name = 1;
  symtab[1].st_info = static_cast<unsigned char>(ELF32_ST_BIND(STB_LOCAL) | ELF32_ST_TYPE(STT_FUNC));
  symtab[1].st_other = ELF32_ST_VISIBILITY(STV_DEFAULT);
  symtab[1].st_shndx = 1;
  symtab[1].st_size = code_size;
  symtab[1].st_value = text_offset;
  return std::string(reinterpret_cast<const char*>(symtab), sizeof(symtab));
}

const std::string kTrampoline = "\x55\x48\x89\xe5\x41\x57\x41\x56\x48\x8b\x45\x10\xff\xe0\x0f\x0b";

TEST(JitBuildIdTest, HostIsLittleEndianForTheStructComparisons) {
  // The <elf.h> struct comparisons below take host order as perf does; they are written for the
  // x86-64 / arm64 little-endian hosts this project builds on.
  ASSERT_EQ(std::endian::native, std::endian::little);
}

TEST(JitBuildIdTest, GenElfSymtabMatchesElfHStructs) {
  for (uint64_t size : {0ull, 1ull, 16ull, 4096ull, 0x7fffffffull}) {
    EXPECT_EQ(GenElfSymtab(size), GenElfSymtabFromElfH64(size, 0x80)) << size;
    EXPECT_EQ(GenElfSymtab(size, {.elf64 = true, .big_endian = false, .text_offset = 0x40}),
              GenElfSymtabFromElfH64(size, 0x40));
    EXPECT_EQ(GenElfSymtab(size, {.elf64 = false, .big_endian = false, .text_offset = 0x60}),
              GenElfSymtabFromElfH32(static_cast<uint32_t>(size), 0x60));
  }
  EXPECT_EQ(GenElfSymtab(16).size(), 48u);
  EXPECT_EQ(GenElfSymtab(16, {.elf64 = false, .big_endian = false, .text_offset = 0x60}).size(), 32u);
  // Spelled out once, for the reader: symbol 1 of a 16-byte function on x86-64.
  EXPECT_EQ(GenElfSymtab(16).substr(24), std::string("\x01\0\0\0"
                                                     "\x02\0"
                                                     "\x01\0"
                                                     "\x80\0\0\0\0\0\0\0"
                                                     "\x10\0\0\0\0\0\0\0",
                                                     24));
  // Big endian: the same fields byte-swapped.
  EXPECT_EQ(GenElfSymtab(16, {.elf64 = true, .big_endian = true, .text_offset = 0x80}).substr(24),
            std::string("\0\0\0\x01"
                        "\x02\0"
                        "\0\x01"
                        "\0\0\0\0\0\0\0\x80"
                        "\0\0\0\0\0\0\0\x10",
                        24));
}

TEST(JitBuildIdTest, GenElfStrtab) {
  EXPECT_EQ(GenElfStrtab("JS:~foo"), std::string("\0JS:~foo\0", 9));
  EXPECT_EQ(GenElfStrtab(""), std::string("\0\0", 2));
}

TEST(JitBuildIdTest, Md5AddrMatchesMd5sum) {
  const uint64_t addr = 0x7f12345678a0;
  auto id = PerfMd5AddrBuildId(addr, kTrampoline);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->raw().size(), 20u);
  EXPECT_EQ(id->ToHex(), ToolDigest("md5sum", Le64(addr) + kTrampoline) + "00000000");
  EXPECT_EQ(id->ToHex(), ToolDigest("openssl dgst -md5 -r", Le64(addr) + kTrampoline) + "00000000");
  // 32-bit target: `unsigned long` is 4 bytes.
  auto id32 = PerfMd5AddrBuildId(0x8048000, kTrampoline, {.elf64 = false, .big_endian = false, .text_offset = 0x60});
  ASSERT_TRUE(id32.ok());
  EXPECT_EQ(id32->ToHex(), ToolDigest("md5sum", Le32(0x8048000) + kTrampoline) + "00000000");
}

TEST(JitBuildIdTest, Sha1CodeMatchesSha1sum) {
  auto id = PerfSha1CodeBuildId(kTrampoline);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->ToHex(), ToolDigest("sha1sum", kTrampoline));
  // Empty code is the SHA-1 of nothing.
  EXPECT_EQ(PerfSha1CodeBuildId("")->ToHex(), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

TEST(JitBuildIdTest, Sha1SymtabMatchesSha1sumOverGenElfBytes) {
  for (const char* name : {"JS:~foo /app/a.js:1", "py::bar:<stdin>", ""}) {
    SCOPED_TRACE(name);
    auto id = PerfSha1SymtabBuildId(name, kTrampoline);
    ASSERT_TRUE(id.ok()) << id.status();
    std::string input =
        kTrampoline + GenElfSymtabFromElfH64(kTrampoline.size(), 0x80) + '\0' + std::string(name) + '\0';
    EXPECT_EQ(id->ToHex(), ToolDigest("sha1sum", input));
    EXPECT_EQ(id->ToHex(), ToolDigest("openssl dgst -sha1 -r", input));
  }
}

TEST(JitBuildIdTest, LargeCodeIsHashedIncrementallyToTheSameValue) {
  std::string code;
  for (int i = 0; i < (1 << 20) + 13; ++i) code.push_back(static_cast<char>(i * 131 + (i >> 7)));
  EXPECT_EQ(PerfSha1CodeBuildId(code)->ToHex(), ToolDigest("sha1sum", code));
  EXPECT_EQ(PerfSha1SymtabBuildId("big", code)->ToHex(),
            ToolDigest("sha1sum", code + GenElfSymtabFromElfH64(code.size(), 0x80) + std::string("\0big\0", 5)));
}

// The symdex encoding, rebuilt here from the description in build_ids.h.
std::string SymdexInput(const SymdexJitIdentity& id) {
  return std::string("symdex-jit-build-id/v1") + Le32(id.pid) + Le64(id.dump_timestamp) + Le64(id.instance.size()) +
         std::string(id.instance) + Le64(id.code_index) + Le64(id.code_addr) + Le64(id.name.size()) +
         std::string(id.name) + Le64(id.code.size()) + std::string(id.code);
}

TEST(JitBuildIdTest, SymdexSchemeIsTruncatedSha256OfTheDocumentedEncoding) {
  SymdexJitIdentity id{.pid = 18712,
                       .dump_timestamp = 1764460920000000,
                       .instance = "",
                       .code_index = 42,
                       .code_addr = 0x7f5e2c0a1000,
                       .name = "JS:~foo /app/a.js:1",
                       .code = kTrampoline};
  auto got = SymdexJitBuildId(id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->raw().size(), 20u);
  EXPECT_EQ(got->ToHex(), ToolDigest("sha256sum", SymdexInput(id)).substr(0, 40));
  EXPECT_EQ(got->ToHex(), ToolDigest("openssl dgst -sha256 -r", SymdexInput(id)).substr(0, 40));
  // Frozen: IDs are stored in indexes, so the encoding must never change silently. A deliberate
  // change bumps the "/v1" tag.
  EXPECT_EQ(got->ToHex(), "f568bfae4dd725ecd17a9e859cd7b1bb0aaeeec1");

  id.instance = "boot-id-1234";
  EXPECT_EQ(SymdexJitBuildId(id)->ToHex(), ToolDigest("sha256sum", SymdexInput(id)).substr(0, 40));
}

TEST(JitBuildIdTest, SymdexSchemeSeparatesEveryField) {
  const SymdexJitIdentity base{
      .pid = 100, .dump_timestamp = 5, .instance = "", .code_index = 1, .code_addr = 0x1000, .name = "ab", .code = "c"};
  std::vector<SymdexJitIdentity> variants(9, base);
  variants[1].pid = 101;           // another process
  variants[2].dump_timestamp = 6;  // same pid, another run
  variants[3].instance = "host2";  // same pid and time, another machine
  variants[4].code_index = 2;      // same function jitted twice
  variants[5].code_addr = 0x2000;
  variants[6].name = "ab2";
  variants[7].code = "d";
  variants[8].name = "a";  // "ab"+"c" vs "a"+"bc": the length prefixes keep them apart
  variants[8].code = "bc";
  std::set<std::string> seen;
  for (const auto& v : variants) {
    auto id = SymdexJitBuildId(v);
    ASSERT_TRUE(id.ok());
    EXPECT_TRUE(seen.insert(id->ToHex()).second) << id->ToHex();
  }
}

TEST(JitBuildIdTest, WhatEachPerfEraSeparates) {
  // Same trampoline, two names, two addresses.
  auto sha1_a = PerfSha1CodeBuildId(kTrampoline), sha1_b = PerfSha1CodeBuildId(kTrampoline);
  EXPECT_EQ(*sha1_a, *sha1_b) << "sha1-code: identical code collides whatever the name (the 6.17 bug)";
  EXPECT_NE(*PerfSha1SymtabBuildId("JS:~a", kTrampoline), *PerfSha1SymtabBuildId("JS:~b", kTrampoline));
  EXPECT_EQ(*PerfSha1SymtabBuildId("JS:~a", kTrampoline), *PerfSha1SymtabBuildId("JS:~a", kTrampoline))
      << "sha1-symtab: same code + same name still collide (across processes and runs too)";
  EXPECT_NE(*PerfMd5AddrBuildId(0x1000, kTrampoline), *PerfMd5AddrBuildId(0x2000, kTrampoline));
}

TEST(JitBuildIdTest, JitBuildIdDispatchesOnScheme) {
  JitdumpHeader header;
  header.elf_mach = 62;
  header.timestamp = 5;
  CodeLoad load;
  load.pid = 100;
  load.code_index = 1;
  load.code_addr = 0x1000;
  load.name = "ab";
  load.code = "c";
  load.code_size = 1;
  EXPECT_EQ(*JitBuildId(JitBuildIdScheme::kMd5Addr, header, load), *PerfMd5AddrBuildId(0x1000, "c"));
  EXPECT_EQ(*JitBuildId(JitBuildIdScheme::kSha1Code, header, load), *PerfSha1CodeBuildId("c"));
  EXPECT_EQ(*JitBuildId(JitBuildIdScheme::kSha1Symtab, header, load), *PerfSha1SymtabBuildId("ab", "c"));
  EXPECT_EQ(*JitBuildId(JitBuildIdScheme::kSymdex, header, load, "h"), *SymdexJitBuildId({.pid = 100,
                                                                                          .dump_timestamp = 5,
                                                                                          .instance = "h",
                                                                                          .code_index = 1,
                                                                                          .code_addr = 0x1000,
                                                                                          .name = "ab",
                                                                                          .code = "c"}));
  // A 32-bit big-endian dump (EM_PPC) picks the ELF32 big-endian layout.
  header.elf_mach = 20;
  header.byte_order = std::endian::big;
  GenElfTarget t = GenElfTargetFor(header);
  EXPECT_FALSE(t.elf64);
  EXPECT_TRUE(t.big_endian);
  EXPECT_EQ(t.text_offset, 0x60u);
  EXPECT_EQ(*JitBuildId(JitBuildIdScheme::kSha1Symtab, header, load), *PerfSha1SymtabBuildId("ab", "c", t));
}

TEST(JitBuildIdTest, SchemeNamesRoundTrip) {
  for (auto s : {JitBuildIdScheme::kMd5Addr, JitBuildIdScheme::kSha1Code, JitBuildIdScheme::kSha1Symtab,
                 JitBuildIdScheme::kSymdex}) {
    EXPECT_EQ(ParseJitBuildIdScheme(JitBuildIdSchemeName(s)), s);
  }
  EXPECT_EQ(JitBuildIdSchemeName(JitBuildIdScheme::kSha1Symtab), "sha1-symtab");
  EXPECT_FALSE(ParseJitBuildIdScheme("sha256").has_value());
}

}  // namespace
}  // namespace symdex::jit
