// x86-64 instruction lengths (ingest/x86_insn.h): encodings a kernel function has, by hand, and
// every instruction of code gcc compiles here (scalar, SSE, AVX2 and AVX-512) against objdump,
// which marks where each one starts.
#include "server/ingest/x86_insn.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/test_util.h"

namespace symdex::ingest {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::Slurp;
using testing::TempDir;
using testing::WriteFile;

std::optional<size_t> Len(std::vector<uint8_t> bytes) { return X86InsnLength(bytes); }

TEST(X86InsnTest, KernelEncodings) {
  EXPECT_EQ(Len({0xf3, 0x0f, 0x1e, 0xfa}), 4u);                       // endbr64
  EXPECT_EQ(Len({0xe8, 0, 0, 0, 0}), 5u);                             // call rel32 (__fentry__)
  EXPECT_EQ(Len({0x0f, 0x1f, 0x44, 0x00, 0x00}), 5u);                 // nopl 0x0(%rax,%rax,1)
  EXPECT_EQ(Len({0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00}), 6u);           // nopw
  EXPECT_EQ(Len({0x55}), 1u);                                         // push %rbp
  EXPECT_EQ(Len({0x48, 0x89, 0xe5}), 3u);                             // mov %rsp,%rbp
  EXPECT_EQ(Len({0x48, 0x8b, 0x47, 0x18}), 4u);                       // mov 0x18(%rdi),%rax
  EXPECT_EQ(Len({0x48, 0x8b, 0x87, 0x00, 0x01, 0, 0}), 7u);           // mov 0x100(%rdi),%rax
  EXPECT_EQ(Len({0x48, 0x8b, 0x05, 1, 2, 3, 4}), 7u);                 // mov rip-relative
  EXPECT_EQ(Len({0x48, 0x8b, 0x04, 0x25, 1, 2, 3, 4}), 8u);           // mov absolute via SIB
  EXPECT_EQ(Len({0x48, 0x8b, 0x44, 0x24, 0x08}), 5u);                 // mov 0x8(%rsp),%rax
  EXPECT_EQ(Len({0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8}), 10u);          // movabs imm64
  EXPECT_EQ(Len({0xb8, 1, 2, 3, 4}), 5u);                             // mov $imm32,%eax
  EXPECT_EQ(Len({0x66, 0xb8, 1, 2}), 4u);                             // mov $imm16,%ax
  EXPECT_EQ(Len({0x48, 0xa1, 1, 2, 3, 4, 5, 6, 7, 8}), 10u);          // movabs moffs64,%rax
  EXPECT_EQ(Len({0x48, 0x81, 0xec, 0x00, 0x01, 0, 0}), 7u);           // sub $0x100,%rsp
  EXPECT_EQ(Len({0x48, 0x83, 0xec, 0x08}), 4u);                       // sub $0x8,%rsp
  EXPECT_EQ(Len({0xf6, 0x47, 0x10, 0x01}), 4u);                       // testb $0x1,0x10(%rdi)
  EXPECT_EQ(Len({0xf7, 0xc7, 1, 0, 0, 0}), 6u);                       // test $0x1,%edi
  EXPECT_EQ(Len({0xf7, 0xd8}), 2u);                                   // neg %eax (no immediate)
  EXPECT_EQ(Len({0x66, 0xf7, 0xc7, 1, 0}), 5u);                       // test $0x1,%di
  EXPECT_EQ(Len({0x0f, 0x84, 1, 2, 3, 4}), 6u);                       // je rel32
  EXPECT_EQ(Len({0x74, 0x05}), 2u);                                   // je rel8
  EXPECT_EQ(Len({0xf0, 0x48, 0x0f, 0xb1, 0x17}), 5u);                 // lock cmpxchg %rdx,(%rdi)
  EXPECT_EQ(Len({0x65, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}), 9u);  // mov %gs:0x28,%rax
  EXPECT_EQ(Len({0x0f, 0x01, 0xca}), 3u);                             // clac
  EXPECT_EQ(Len({0x0f, 0x0b}), 2u);                                   // ud2
  EXPECT_EQ(Len({0xc2, 0x08, 0x00}), 3u);                             // ret $0x8
  EXPECT_EQ(Len({0xc8, 0x10, 0x00, 0x00}), 4u);                       // enter
  EXPECT_EQ(Len({0x0f, 0xba, 0xe0, 0x03}), 4u);                       // bt $0x3,%eax
  EXPECT_EQ(Len({0x66, 0x0f, 0x3a, 0x0f, 0xc1, 0x08}), 6u);           // palignr
  EXPECT_EQ(Len({0x66, 0x0f, 0x38, 0x00, 0xc1}), 5u);                 // pshufb
  EXPECT_EQ(Len({0xc5, 0xf8, 0x77}), 3u);                             // vzeroupper
  EXPECT_EQ(Len({0xc5, 0xfd, 0x6f, 0x07}), 4u);                       // vmovdqa (%rdi),%ymm0
  EXPECT_EQ(Len({0xc4, 0xe3, 0x7d, 0x39, 0xc1, 0x01}), 6u);           // vextracti128 $1
  EXPECT_EQ(Len({0x62, 0xf1, 0x7c, 0x48, 0x10, 0x07}), 6u);           // vmovups (%rdi),%zmm0
  EXPECT_EQ(Len({0x62, 0xf1, 0x7c, 0x48, 0x10, 0x47, 0x01}), 7u);     // ... 0x40(%rdi): disp8*N
  EXPECT_EQ(Len({0xc7, 0xf8, 1, 2, 3, 4}), 6u);                       // xbegin rel32
}

TEST(X86InsnTest, NotAnInstruction) {
  EXPECT_FALSE(Len({}));
  EXPECT_FALSE(Len({0x48}));                    // REX alone
  EXPECT_FALSE(Len({0x48, 0x8b}));              // no ModRM
  EXPECT_FALSE(Len({0x48, 0x8b, 0x87, 0x00}));  // disp32 cut
  EXPECT_FALSE(Len({0x06}));                    // push %es: not in 64-bit mode
  EXPECT_FALSE(Len({0xd6}));
  EXPECT_FALSE(Len(std::vector<uint8_t>(16, 0x66)));  // prefixes past 15 bytes
}

// gcc's code for this file, and objdump's instruction starts in each function.
TEST(X86InsnTest, EveryInstructionGccEmitsAsObjdumpSplitsIt) {
  TempDir dir;
  const std::string src = dir / "code.c";
  WriteFile(src,
            "#include <string.h>\n"
            "struct s { long a; int b : 3; int c : 5; char name[16]; double d[8]; };\n"
            "long walk(struct s *p, int n) { long t = 0; for (int i = 0; i < n; i++) t += p[i].a * p[i].b + "
            "p[i].c; return t; }\n"
            "void copy(struct s *d, const struct s *s, int n) { for (int i = 0; i < n; i++) memcpy(&d[i], &s[i], "
            "sizeof *d); }\n"
            "double dot(const double *a, const double *b, int n) { double t = 0; for (int i = 0; i < n; i++) t += "
            "a[i] * b[i]; return t; }\n"
            "void scale(float *a, float k, int n) { for (int i = 0; i < n; i++) a[i] = a[i] * k + 1.5f; }\n"
            "int pick(int x) { switch (x) { case 1: return 10; case 2: return 20; case 7: return 3; case 9: return "
            "99; default: return x * 1000003; } }\n"
            "unsigned long big(unsigned long x) { return x * 0x123456789abcdefUL + (x >> 17) + (unsigned "
            "short)x; }\n"
            "int str(const char *a, const char *b) { return strcmp(a, b) + (int)strlen(a); }\n"
            "long shifts(long a, unsigned char c) { return (a << c) ^ (a >> 3) ^ __builtin_popcountl(a) ^ "
            "__builtin_ctzl(a | 1); }\n");
  const std::string obj = dir / "code.o";
  for (const char* flags : {"-O2", "-O3 -mavx2", "-O3 -mavx512f -mavx512bw", "-Os", "-O1 -fno-omit-frame-pointer"}) {
    SCOPED_TRACE(flags);
    ASSERT_EQ(RunCommand(std::string("gcc -c ") + flags + " -o '" + obj + "' '" + src + "'").exit_code, 0);
    CommandResult text = RunCommand("objcopy -O binary --only-section=.text '" + obj + "' '" + obj + ".bin'");
    ASSERT_EQ(text.exit_code, 0) << text.err;
    const std::string bin = Slurp(obj + ".bin");
    const std::span<const uint8_t> code(reinterpret_cast<const uint8_t*>(bin.data()), bin.size());
    // objdump -d: "   1c:\t48 8b ..." lines; the offsets are .text offsets.
    CommandResult dis = RunCommand("objdump -d -w -j .text '" + obj + "'");
    ASSERT_EQ(dis.exit_code, 0) << dis.err;
    std::set<uint64_t> starts;
    std::istringstream in(dis.out);
    for (std::string l; std::getline(in, l);) {
      size_t colon = l.find(":\t");
      if (colon == std::string::npos || l.empty() || l[0] != ' ') continue;
      starts.insert(std::stoull(l.substr(0, colon), nullptr, 16));
    }
    ASSERT_GT(starts.size(), 50u);
    std::set<uint64_t> ours;
    size_t undecoded = 0;
    for (uint64_t p = 0; p < code.size();) {
      ours.insert(p);
      std::optional<size_t> n = X86InsnLength(code.subspan(static_cast<size_t>(p)));
      if (!n) {
        ++undecoded;
        break;
      }
      p += *n;
    }
    EXPECT_EQ(undecoded, 0u);
    EXPECT_EQ(ours, starts);
  }
}

}  // namespace
}  // namespace symdex::ingest
