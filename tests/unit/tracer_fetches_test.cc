// kprobe_events fetch args read back (ingest/kprobe_fetch.h) and written for the tracers that read
// arguments in a program of their own (query/tracer_fetches.h): each source, read and type, on
// both architectures, and what each refuses.
#include "server/query/tracer_fetches.h"

#include <elf.h>
#include <gtest/gtest.h>

#include "server/query/probe_forms.h"

namespace symdex {
namespace {

using ingest::KprobeFetch;
using ingest::ParseKprobeFetch;

const KernelArch& X86() { return *ArchOfMachine(EM_X86_64); }
const KernelArch& Arm64() { return *ArchOfMachine(EM_AARCH64); }

TEST(KprobeFetchTest, NestedReadsInnermostFirst) {
  auto f = ParseKprobeFetch("name=+0(+40(-24(%di))):string", 1);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->name, "name");
  EXPECT_EQ(f->source, KprobeFetch::Source::kRegister);
  EXPECT_EQ(f->reg, "di");
  ASSERT_EQ(f->reads.size(), 3u);
  EXPECT_EQ(f->reads[0].offset, -24);
  EXPECT_EQ(f->reads[1].offset, 40);
  EXPECT_EQ(f->reads[2].offset, 0);
  EXPECT_EQ(f->kind, KprobeFetch::Kind::kString);
}

TEST(KprobeFetchTest, SourcesAndTypes) {
  auto sym = ParseKprobeFetch("@_text+1234:u32", 2);
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ(sym->name, "arg2") << "unnamed: argN by its place, as the kernel names it";
  EXPECT_EQ(sym->source, KprobeFetch::Source::kSymbol);
  EXPECT_EQ(sym->symbol, "_text");
  EXPECT_EQ(sym->offset, 1234);
  ASSERT_EQ(sym->reads.size(), 1u) << "'@' reads the memory at the symbol";
  EXPECT_EQ(sym->bits, 32u);
  EXPECT_FALSE(sym->hex);

  auto addr = ParseKprobeFetch("@0xffffffff81000000", 1);
  ASSERT_TRUE(addr.ok()) << addr.status();
  EXPECT_EQ(addr->source, KprobeFetch::Source::kAddress);
  EXPECT_EQ(addr->number, 0xffffffff81000000u);
  EXPECT_TRUE(addr->hex) << "x64 is the default";

  auto user = ParseKprobeFetch("+u8(%si):ustring", 1);
  ASSERT_TRUE(user.ok()) << user.status();
  ASSERT_EQ(user->reads.size(), 1u);
  EXPECT_TRUE(user->reads[0].user);
  EXPECT_EQ(user->reads[0].offset, 8);

  auto bits = ParseKprobeFetch("f=+4(%si):b3@2/32", 1);
  ASSERT_TRUE(bits.ok()) << bits.status();
  EXPECT_EQ(bits->kind, KprobeFetch::Kind::kBitfield);
  EXPECT_EQ(bits->bits, 32u);
  EXPECT_EQ(bits->bit_width, 3u);
  EXPECT_EQ(bits->bit_offset, 2u);

  EXPECT_EQ(ParseKprobeFetch("$stack3", 1)->number, 3u);
  EXPECT_EQ(ParseKprobeFetch("$stack", 1)->source, KprobeFetch::Source::kStack);
  EXPECT_EQ(ParseKprobeFetch("$arg2", 1)->source, KprobeFetch::Source::kArg);
  EXPECT_EQ(ParseKprobeFetch("$comm", 1)->kind, KprobeFetch::Kind::kString);
  EXPECT_EQ(ParseKprobeFetch("$retval:s32", 1)->is_signed, true);
  EXPECT_EQ(ParseKprobeFetch("\\-1", 1)->number, ~uint64_t{0});
  EXPECT_EQ(ParseKprobeFetch("+0x10(%ax)", 1)->reads[0].offset, 16) << "offsets as kstrtol reads them";
}

TEST(KprobeFetchTest, MalformedAndUntranslatable) {
  for (const char* bad :
       {"", "%", "+8%di)", "+x(%di)", "@", "@+8", "%di:u7", "%di:b9@0/8", "$stack-1", "$comm:u8", "+8()", "!"}) {
    auto f = ParseKprobeFetch(bad, 1);
    EXPECT_TRUE(absl::IsInvalidArgument(f.status())) << "'" << bad << "': " << f.status();
  }
  for (const char* other : {"%di:u8[4]", "\\\"text\"", "$current", "skb"}) {
    auto f = ParseKprobeFetch(other, 1);
    EXPECT_TRUE(absl::IsFailedPrecondition(f.status())) << "'" << other << "': " << f.status();
  }
  std::string deep = "%di";
  for (int k = 0; k < 40; ++k) deep = "+8(" + deep + ")";
  EXPECT_TRUE(absl::IsInvalidArgument(ParseKprobeFetch(deep, 1).status()));
}

TEST(KprobeFetchTest, LineFetchArgs) {
  EXPECT_EQ(ingest::KprobeLineFetchArgs("p:symdex/vfs_read vfs_read name=+0(%di):string count=%dx:x64"),
            (std::vector<std::string>{"name=+0(%di):string", "count=%dx:x64"}));
  EXPECT_TRUE(ingest::KprobeLineFetchArgs("p:symdex/vfs_read _text+1234").empty());
  EXPECT_EQ(ingest::KprobeLineFetchArgs("p:a/b f s=\"a b\" x"), (std::vector<std::string>{"s=\"a b\"", "x"}));
}

std::string Bpftrace(const std::vector<std::string>& args, const KernelArch& arch) {
  auto parsed = query::ParseFetchArgs(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  auto p = query::BpftraceProgram("kprobe:vfs_read", *parsed, arch);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : "";
}

TEST(TracerFetchesTest, BpftraceReadsWhatTheKernelReads) {
  EXPECT_EQ(Bpftrace({"name=+0(+40(+24(%di))):string", "count=%dx:x64"}, X86()),
            "kprobe:vfs_read { printf(\"name=\\\"%s\\\" count=0x%lx\\n\", "
            "str(*(uint64*)(*(uint64*)(reg(\"di\") + 24) + 40)), (uint64)reg(\"dx\")); }");
  EXPECT_EQ(Bpftrace({"n=%x19:s32", "f=+8(%x0):b3@2/32", "j=@jiffies_64", "s=-8(%sp):u16"}, Arm64()),
            "kprobe:vfs_read { printf(\"n=%ld f=%lu j=0x%lx s=%lu\\n\", (int32)reg(\"r19\"), "
            "((*(uint32*)(reg(\"r0\") + 8) >> 2) & 0x7), *(uint64*)(kaddr(\"jiffies_64\")), "
            "*(uint16*)(reg(\"sp\") - 8)); }");
  EXPECT_EQ(Bpftrace({"$retval", "$comm", "$arg2", "$stack1"}, X86()),
            "kprobe:vfs_read { printf(\"arg1=0x%lx arg2=\\\"%s\\\" arg3=0x%lx arg4=0x%lx\\n\", (uint64)retval, comm, "
            "(uint64)arg1, *(uint64*)(reg(\"sp\") + 8)); }");
  EXPECT_EQ(Bpftrace({"u=+u0(%si):ustring", "y=+8(%si):symbol"}, X86()),
            "kprobe:vfs_read { printf(\"u=\\\"%s\\\" y=%s\\n\", str(uptr(reg(\"si\"))), "
            "ksym(*(uint64*)(reg(\"si\") + 8))); }");
}

TEST(TracerFetchesTest, BpftraceRefusesWhatItCannotRead) {
  auto refused = [](const std::vector<std::string>& args, const KernelArch& arch) {
    auto parsed = query::ParseFetchArgs(args);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return query::BpftraceProgram("kprobe:f", *parsed, arch).status();
  };
  absl::Status wrong_arch = refused({"%di"}, Arm64());
  EXPECT_TRUE(absl::IsFailedPrecondition(wrong_arch)) << wrong_arch;
  EXPECT_NE(wrong_arch.message().find("aarch64 has no register %di"), std::string::npos) << wrong_arch;
  EXPECT_TRUE(absl::IsFailedPrecondition(refused({"$arg7"}, X86()))) << "a seventh argument is on the stack";
  EXPECT_TRUE(absl::IsFailedPrecondition(refused({"+8(+u0(%si))"}, X86()))) << "user memory inside a chain";
}

TEST(TracerFetchesTest, CStructOfFetches) {
  auto parsed = query::ParseFetchArgs(
      {"name=+0(+40(+24(%x0))):string", "count=%x2:x64", "j=@jiffies_64:u32", "b=%x1:b4@1/8", "$comm"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto c = query::CFetchStruct("vfs_read", "p:symdex/vfs_read vfs_read ...", *parsed, Arm64());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c,
            "/* p:symdex/vfs_read vfs_read ...\n"
            " * read as kprobe_events reads it, on aarch64 (vmlinux.h, bpf/bpf_helpers.h) */\n"
            "extern const void jiffies_64 __ksym;\n"
            "\n"
            "struct vfs_read_args {\n"
            "\tchar name[64];\n"
            "\t__u64 count;\n"
            "\t__u32 j;\n"
            "\t__u8 b;\n"
            "\tchar arg5[16];\n"
            "};\n"
            "\n"
            "static __always_inline void vfs_read_fetch(struct pt_regs *ctx, struct vfs_read_args *a)\n"
            "{\n"
            "\t__u64 v;\n"
            "\n"
            "\t/* name=+0(+40(+24(%x0))):string */\n"
            "\tv = ((const struct user_pt_regs *)ctx)->regs[0];\n"
            "\tbpf_probe_read_kernel(&v, sizeof(v), (const void *)(v + 24));\n"
            "\tbpf_probe_read_kernel(&v, sizeof(v), (const void *)(v + 40));\n"
            "\tbpf_probe_read_kernel_str(a->name, sizeof(a->name), (const void *)(v));\n"
            "\t/* count=%x2:x64 */\n"
            "\ta->count = (__u64)((const struct user_pt_regs *)ctx)->regs[2];\n"
            "\t/* j=@jiffies_64:u32 */\n"
            "\tv = (__u64)&jiffies_64;\n"
            "\tbpf_probe_read_kernel(&a->j, sizeof(a->j), (const void *)(v));\n"
            "\t/* b=%x1:b4@1/8 */\n"
            "\ta->b = (((const struct user_pt_regs *)ctx)->regs[1] >> 1) & 0xf;\n"
            "\t/* $comm */\n"
            "\tbpf_get_current_comm(a->arg5, sizeof(a->arg5));\n"
            "}\n");
  auto dotted = query::ParseFetchArgs({"@foo.constprop.0"});
  ASSERT_TRUE(dotted.ok()) << dotted.status();
  EXPECT_TRUE(absl::IsFailedPrecondition(query::CFetchStruct("e", "", *dotted, X86()).status()))
      << "a __ksym needs a C name";
}

}  // namespace
}  // namespace symdex
