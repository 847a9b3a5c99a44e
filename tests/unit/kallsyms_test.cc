#include "server/ingest/kallsyms.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

TEST(KallsymsTest, ParsesVmlinuxAndModuleLines) {
  constexpr char kText[] = R"(ffffffff81000000 T _text
ffffffff81000000 T _stext
ffffffff8177cd20 t name_show
ffffffffc0a01000 t name_show	[uio]
ffffffffc0a02000 t name_show.cold	[uio]
ffffffff81544d00 t jhash.constprop.0
ffffffff81544e00 t tcp_v4_rcv.isra.0
ffffffffc0000000 t bpf_prog_6deef7357e7b4530_sd_fw_ingress	[bpf]
)";
  auto syms = ParseKallsyms(kText, "kallsyms");
  ASSERT_TRUE(syms.ok()) << syms.status();
  ASSERT_EQ(syms->size(), 8u);
  EXPECT_EQ((*syms)[0], (KernelSymbol{0xffffffff81000000, 'T', "_text", ""}));
  EXPECT_EQ((*syms)[3], (KernelSymbol{0xffffffffc0a01000, 't', "name_show", "uio"}));
  EXPECT_EQ((*syms)[4].name, "name_show.cold");
  EXPECT_EQ((*syms)[5].name, "jhash.constprop.0");
  EXPECT_EQ((*syms)[6].name, "tcp_v4_rcv.isra.0");
  EXPECT_EQ((*syms)[7].module, "bpf");
  EXPECT_TRUE(IsPseudoModule("bpf"));
  EXPECT_TRUE(IsPseudoModule("__builtin__ftrace"));
  EXPECT_FALSE(IsPseudoModule("uio"));
}

TEST(KallsymsTest, ToleratesOddWhitespaceBlankLinesAndCrLf) {
  constexpr char kText[] = "\n  ffffffff81000000   T\t_text  \r\n\t\nffffffffc0a01000 t\tfoo \t [mod]\r\n";
  auto syms = ParseKallsyms(kText, "x");
  ASSERT_TRUE(syms.ok()) << syms.status();
  ASSERT_EQ(syms->size(), 2u);
  EXPECT_EQ((*syms)[0].name, "_text");
  EXPECT_EQ((*syms)[1].module, "mod");
}

TEST(KallsymsTest, SystemMapShortAddresses) {
  auto syms = ParseKallsyms("0000000000000000 A __per_cpu_start\n1000 a VDSO32_NOTE_MASK\n", "System.map");
  ASSERT_TRUE(syms.ok());
  EXPECT_EQ((*syms)[1].addr, 0x1000u);
}

// Lines of Debian's arm64 6.1 System.map that the kernel's kallsyms leaves out (one of them not
// even printable), among lines it keeps.
TEST(KallsymsTest, SystemMapDropsWhatScriptsKallsymsDrops) {
  constexpr char kText[] =
      "ffff800008000000 T _text\n"
      "ffff800008000000 t __efistub__text\n"
      "0000000000000200 A PECOFF_FILE_ALIGNMENT\n"
      "ffff800008010000 T _stext\n"
      "ffff800009370000 t __kvm_nvhe_$x\n"
      "ffff800009384820 d __kvm_nvhe_.L14472\x01"
      "1\n"
      "ffff800009384900 t __kvm_nvhe___kvm_skip_instr\n"
      "ffff80000877b610 t name_show\n"
      "ffff80000877b700 t foo_veneer\n"
      "ffff8000094c29d8 D kallsyms_num_syms\n";
  auto map = ParseSystemMap(kText, "System.map-6.1.0-57-cloud-arm64");
  ASSERT_TRUE(map.ok()) << map.status();
  std::vector<std::string> kept;
  for (const auto& s : map->symbols) kept.push_back(s.name);
  EXPECT_EQ(kept, (std::vector<std::string>{"_text", "_stext", "__kvm_nvhe___kvm_skip_instr", "name_show"}));
  EXPECT_EQ(map->DroppedTotal(), 6u);
  std::map<std::string, size_t> by_rule;
  for (const auto& d : map->dropped) by_rule[d.rule] = d.count;
  EXPECT_EQ(by_rule["arm64 hypervisor local labels (__kvm_nvhe_.L)"], 1u);
  EXPECT_EQ(by_rule["arm64 hypervisor mapping symbols (__kvm_nvhe_$)"], 1u);
  EXPECT_EQ(by_rule["arm64 EFI stub aliases (__efistub_)"], 1u);
  EXPECT_EQ(by_rule["absolute symbols"], 1u);
  // The same lines as a kallsyms dump are read whole (what to keep is the caller's), and a name
  // kallsyms keeps is read in a System.map as anywhere: control bytes and all.
  auto all = ParseKallsyms(kText, "/proc/kallsyms");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 10u);
  EXPECT_EQ((*all)[5].name, std::string("__kvm_nvhe_.L14472\x01") + "1");
  auto odd = ParseSystemMap("ffff800008000000 t odd\x01name\n", "System.map");
  ASSERT_TRUE(odd.ok()) << odd.status();
  ASSERT_EQ(odd->symbols.size(), 1u);
  EXPECT_EQ(odd->symbols[0].name, "odd\x01name");
  EXPECT_EQ(KallsymsIgnoreRule("__kernel_sigtramp", 'A'), nullptr);  // kept: an absolute symbol it keeps
  EXPECT_EQ(KallsymsIgnoreRule("name_show", 't'), nullptr);
}

struct BadLine {
  const char* text;
  const char* reason;
  int line;
};

class KallsymsErrorTest : public ::testing::TestWithParam<BadLine> {};

TEST_P(KallsymsErrorTest, NamesSourceLineAndReason) {
  auto syms = ParseKallsyms(GetParam().text, "/proc/kallsyms");
  ASSERT_FALSE(syms.ok());
  EXPECT_EQ(syms.status().code(), absl::StatusCode::kInvalidArgument);
  std::string msg(syms.status().message());
  EXPECT_NE(msg.find(StrCat("/proc/kallsyms:", GetParam().line, ":")), std::string::npos) << msg;
  EXPECT_NE(msg.find(GetParam().reason), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, KallsymsErrorTest,
    ::testing::Values(
        BadLine{"ffffffff81000000 T _text\nffffffff81000001 T\n", "missing symbol name", 2},
        BadLine{"ffffffff81000000\n", "missing symbol type", 1}, BadLine{"zzzz T foo\n", "address is not", 1},
        BadLine{"11112222333344445 T foo\n", "address is not", 1}, BadLine{"ffff TT foo\n", "single letter", 1},
        BadLine{"ffff 1 foo\n", "single letter", 1}, BadLine{"a T b\nffff t foo uio\n", "[module] tag", 2},
        BadLine{"ffff t foo [uio] extra\n", "unexpected text", 1},
        BadLine{"ffff t foo\t[uio] extra\n", "unexpected text", 1}, BadLine{"ffff t foo\t[uio\n", "does not close", 1},
        BadLine{"ffff t .L1\x02 1\t[uio\n", "does not close", 1}, BadLine{"ffff t foo\t[]\n", "[module] tag", 1},
        BadLine{"ffff t \t[uio]\n", "missing symbol name", 1},
        // Truncated lines, among good ones: named by their own line.
        BadLine{"a T b\nffffffffc0a0\n", "missing symbol type", 2},
        BadLine{"a T b\nc t d\t[m]\nffffffffc0a0 t\n", "missing symbol name", 3},
        BadLine{"a T b\nffffffffc0a0g t x\t[m]\n", "address is not", 2}));

// /proc/kallsyms as the kernel writes it (s_show: "%px %c %s\n", "%px %c %s\t[%s]\n"): a name
// is every byte up to the tab before the module tag, control bytes and blanks too. Debian's arm64
// 6.12 guest lists its modules' numeric local labels so (GNU as: ".L<N>\002<instance>").
TEST(KallsymsTest, NamesAreTheKernelsBytes) {
  const std::string text = std::string("ffff800079a18245 r .L14472\x02 1\t[uio]\n") +  // blank after the byte
                           "ffff800079a18250 r .L14473\x02\t[uio]\n" +                 // no blank
                           "ffff800079a18260 t ctl\x01name\t[uio]\n" +                 // a function's
                           "ffff800079a18270 t trailing \t[uio]\n" +                   // blank before the tab
                           "ffff800008010000 T vm\x01"
                           "fn\n" +                                      // vmlinux
                           "ffff800079a18280 r .L14474\x02 2 [uio]\n" +  // tab expanded to a blank
                           "ffff96b8bb40b22c r .L14472\x02"
                           "1\t[nfnetlink_log]\n";  // the 6.12 guest's line, byte for byte
  auto syms = ParseKallsyms(text, "/proc/kallsyms");
  ASSERT_TRUE(syms.ok()) << syms.status();
  ASSERT_EQ(syms->size(), 7u);
  EXPECT_EQ((*syms)[6], (KernelSymbol{0xffff96b8bb40b22c, 'r',
                                      ".L14472\x02"
                                      "1",
                                      "nfnetlink_log"}));
  EXPECT_EQ((*syms)[0], (KernelSymbol{0xffff800079a18245, 'r', ".L14472\x02 1", "uio"}));
  EXPECT_EQ((*syms)[1].name, ".L14473\x02");
  EXPECT_EQ((*syms)[2], (KernelSymbol{0xffff800079a18260, 't', "ctl\x01name", "uio"}));
  EXPECT_EQ((*syms)[3].name, "trailing ");
  EXPECT_EQ((*syms)[4], (KernelSymbol{0xffff800008010000, 'T',
                                      "vm\x01"
                                      "fn",
                                      ""}));
  EXPECT_EQ((*syms)[5].name, ".L14474\x02 2");
  EXPECT_EQ((*syms)[5].module, "uio");
  // A name whose last byte is ']' with no '[' before it: the name's own byte, not a tag.
  auto bracket = ParseKallsyms("ffff t odd]\n", "/proc/kallsyms");
  ASSERT_TRUE(bracket.ok()) << bracket.status();
  ASSERT_EQ(bracket->size(), 1u);
  EXPECT_EQ((*bracket)[0].name, "odd]");
  auto two = ParseKallsyms("ffff t .L1447\xff o]\n", "/proc/kallsyms");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(std::string(two.status().message()).find("[module] tag"), std::string::npos) << two.status();
  // The kernel's %s never writes a NUL.
  auto nul = ParseKallsyms(std::string("ffff t fo\0o\n", 12), "/proc/kallsyms");
  ASSERT_FALSE(nul.ok());
  EXPECT_NE(std::string(nul.status().message()).find("/proc/kallsyms:1: symbol name contains a NUL byte"),
            std::string::npos)
      << nul.status();
  // Text output prints the kept names escaped (common/strings.h), every other byte as it is.
  EXPECT_EQ(EscapeControl((*syms)[0].name), ".L14472\\x02 1");
  EXPECT_EQ(EscapeControl(std::string("a\x7f\x1b[31mb\xc3\xa9")), "a\\x7f\\x1b[31mb\xc3\xa9");
  EXPECT_EQ(fmt::format("[{:<6}]", Escaped{"x\x01"}), "[x\\x01 ]");
  EXPECT_FALSE(HasControlByte("name_show"));
}

// 6.12 include/linux/module_symbol.h is_mapping_symbol: what a module's symbol table lists that
// never names an address, by rule.
TEST(KallsymsTest, ModuleSymbolIgnoreRuleIsTheKernels) {
  for (std::string_view n :
       {".L14472\x02 1", ".L14473\x02", ".Ltmp0", "L0", "L0\x01", "$x", "$d", "$x.123", "$a", "$t", "$v"}) {
    EXPECT_TRUE(IsMappingSymbol(n)) << n;
  }
  EXPECT_STREQ(ModuleSymbolIgnoreRule(".L14472\x02 1"), kLocalLabelsRule);
  EXPECT_STREQ(ModuleSymbolIgnoreRule("L0"), kLocalLabelsRule);
  EXPECT_STREQ(ModuleSymbolIgnoreRule("$x"), kMappingSymbolsRule);
  for (std::string_view n : {"name_show", "L1", "Lfoo", ".text_fn", "ctl\x01name", "x$", "_L0"}) {
    EXPECT_FALSE(IsMappingSymbol(n)) << n;
  }
  EXPECT_STREQ(MksysmapIgnoreRule("L0", 't'), kLocalLabelsRule);
}

TEST(KallsymsTest, HundredThousandLines) {
  std::string text;
  text.reserve(100000 * 40);
  for (int i = 0; i < 100000; ++i) {
    text += fmt::format("{:016x} {} sym_{}{}\n", 0xffffffff81000000ull + 16u * i, i % 2 ? 't' : 'T', i,
                        i % 10 == 0 ? "\t[mod" + std::to_string(i % 7) + "]" : "");
  }
  auto syms = ParseKallsyms(text, "big");
  ASSERT_TRUE(syms.ok()) << syms.status();
  ASSERT_EQ(syms->size(), 100000u);
  EXPECT_EQ((*syms)[99999].name, "sym_99999");
  EXPECT_EQ((*syms)[99990].module, "mod" + std::to_string(99990 % 7));
  EXPECT_EQ((*syms)[99999].addr, 0xffffffff81000000ull + 16u * 99999);
}

TEST(KallsymsTest, AllZeroAddressesDetected) {
  auto syms = ParseKallsyms("0000000000000000 T _text\n0000000000000000 t foo\t[m]\n", "k");
  ASSERT_TRUE(syms.ok());
  EXPECT_TRUE(AllAddressesZero(*syms));
  auto some = ParseKallsyms("0000000000000000 A __per_cpu_start\nffffffff81000000 T _text\n", "k");
  EXPECT_FALSE(AllAddressesZero(*some));
  EXPECT_FALSE(AllAddressesZero({}));
}

}  // namespace
}  // namespace symdex::ingest
