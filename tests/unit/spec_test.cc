#include "server/query/spec.h"

#include <gtest/gtest.h>

#include "server/query/resolver.h"

namespace symdex::query {
namespace {

TEST(SpecTest, ParsesEveryForm) {
  auto s = ParseSpec("name_show");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "name_show");
  EXPECT_TRUE(s->module.empty() && s->path.empty() && !s->line && s->offset == 0);

  s = ParseSpec("uio:name_show+0x10");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->module, "uio");
  EXPECT_EQ(s->offset, 0x10u);

  s = ParseSpec("name_show@drivers/pnp/card.c:186");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->path, "drivers/pnp/card.c");
  EXPECT_EQ(s->line, 186);

  s = ParseSpec("name_show@drivers_pnp_card_c_186");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kas_alias, "drivers_pnp_card_c_186");
  EXPECT_TRUE(s->path.empty());

  s = ParseSpec("paravirt_read_msr@paravirt.h:188#arch/x86/events/core.c+12");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->path, "paravirt.h");
  EXPECT_EQ(s->cu, "arch/x86/events/core.c");
  EXPECT_EQ(s->offset, 12u);

  s = ParseSpec("_text+6817776");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "_text");
  EXPECT_EQ(s->offset, 6817776u);

  s = ParseSpec("0xffffffff816807f0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->address, 0xffffffff816807f0u);

  s = ParseSpec("nfsd:jhash@.text+0x1a0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->at_section, ".text");
  EXPECT_EQ(s->at_addr, 0x1a0u);
  EXPECT_EQ(s->offset, 0u);

  s = ParseSpec("nfsd:jhash@.text+0x1a0+0x4");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->at_addr, 0x1a0u);
  EXPECT_EQ(s->offset, 4u);

  s = ParseSpec("cpumask_weight.constprop.0@0xffffffff810b53e0");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "cpumask_weight.constprop.0");
  EXPECT_EQ(s->at_addr, 0xffffffff810b53e0u);
}

TEST(SpecTest, FormatRoundTrips) {
  for (const char* text :
       {"name_show", "uio:name_show", "name_show@card.c", "name_show@drivers/pnp/card.c:186",
        "name_show@drivers_pnp_card_c_186", "vmlinux:jhash#lib/x.c", "load_elf_binary#compat_binfmt_elf.c",
        "f@0xffffffff81000000", "m:f@.text.unlikely+0x19", "tcp_v4_rcv+0x10", "0xffffffff816807f0"}) {
    auto s = ParseSpec(text);
    ASSERT_TRUE(s.ok()) << text;
    EXPECT_EQ(FormatSpec(*s), text);
  }
}

TEST(SpecTest, RejectsMalformedWithAReason) {
  for (const char* text :
       {"", "name@", "name@x.c:12z", "name+zz", ":name", "na me", "name#", "0xZZ", "m:@x.c", "name_show@@",
        "name_show@@x.c", "name_show@x.c@y.c", "name_show#a.c#b.c", "name_show@x.c#a.c@1"}) {
    auto s = ParseSpec(text);
    EXPECT_FALSE(s.ok()) << text;
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(std::string(s.status().message()).find("help specs"), std::string::npos);
    }
  }
}

// A name the kernel keeps with a control byte is named as it is; a line's blanks still are not a name's.
TEST(SpecTest, NamesWithControlBytes) {
  auto s = ParseSpec("uio:ctl\x01name+4");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->module, "uio");
  EXPECT_EQ(s->name, "ctl\x01name");
  EXPECT_EQ(s->offset, 4u);
  for (const char* text : {"a\tb", "a\rb", "a\nb"}) EXPECT_FALSE(ParseSpec(text).ok()) << text;
}

TEST(SpecTest, PathSuffixOnWholeComponents) {
  EXPECT_TRUE(PathSuffixMatch("drivers/pnp/card.c", "card.c"));
  EXPECT_TRUE(PathSuffixMatch("drivers/pnp/card.c", "pnp/card.c"));
  EXPECT_TRUE(PathSuffixMatch("drivers/pnp/card.c", "drivers/pnp/card.c"));
  EXPECT_FALSE(PathSuffixMatch("drivers/pnp/card.c", "rd.c"));
  EXPECT_FALSE(PathSuffixMatch("drivers/pnp/card.c", "x/drivers/pnp/card.c"));
  EXPECT_EQ(KasAlias("drivers/pnp/card.c", 186), "drivers_pnp_card_c_186");
}

}  // namespace
}  // namespace symdex::query

namespace symdex::query {
namespace {

// The linker's erratum veneers on arm64 ("e843419@0770_0000bb36_12e4") have names the spec
// grammar reads as NAME@PATH: their canonical spec is their address, which resolves back to them.
TEST(CanonicalSpecTest, ANameTheGrammarCannotSayIsNamedByItsAddress) {
  Instance veneer;
  veneer.name = "e843419@0770_0000bb36_12e4";
  veneer.type = 't';
  veneer.addr = 0xffff8000088362b8;
  EXPECT_EQ(CanonicalSpec(veneer, {veneer}), "0xffff8000088362b8");
  auto s = ParseSpec(CanonicalSpec(veneer, {veneer}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->address, veneer.addr);
  Instance plain = veneer;
  plain.name = "name_show";
  EXPECT_EQ(CanonicalSpec(plain, {plain}), "name_show");
}

}  // namespace
}  // namespace symdex::query
