// Frame lines as kernels and perf print them (ingest/frame_text.h).
#include "server/ingest/frame_text.h"

#include <gtest/gtest.h>

namespace symdex::ingest {
namespace {

FrameText Parse(std::string_view line) {
  auto f = ParseFrameText(line);
  EXPECT_TRUE(f.ok()) << line << ": " << f.status().message();
  return f.ok() ? *f : FrameText{};
}

TEST(FrameTextTest, DumpStackLineWithModule) {
  FrameText f = Parse("[   12.345678]  ? name_show+0x1c/0x40 [pnp]");
  EXPECT_FALSE(f.address);
  EXPECT_EQ(f.symbol, "name_show");
  EXPECT_EQ(f.offset, 0x1cu);
  ASSERT_TRUE(f.size);
  EXPECT_EQ(*f.size, 0x40u);
  EXPECT_EQ(f.module, "pnp");
  EXPECT_TRUE(f.unreliable);
  EXPECT_EQ(f.module_build_id, "");
}

TEST(FrameTextTest, RipLineWithBuildIdAndCloneSuffix) {
  FrameText f = Parse("RIP: 0010:ext4_map_blocks.cold+0x5/0x900 [ext4 0123456789ABCDEF0123456789abcdef01234567]");
  EXPECT_EQ(f.symbol, "ext4_map_blocks.cold");
  EXPECT_EQ(f.offset, 5u);
  EXPECT_EQ(f.module, "ext4");
  EXPECT_EQ(f.module_build_id, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_FALSE(f.unreliable);
}

TEST(FrameTextTest, OldKernelAddressThenSymbol) {
  FrameText f = Parse(" [<ffffffff8123abcd>] name_show+0x1c/0x40");
  ASSERT_TRUE(f.address);
  EXPECT_EQ(*f.address, 0xffffffff8123abcdull);
  EXPECT_EQ(f.symbol, "name_show");
  EXPECT_EQ(f.module, "");
}

TEST(FrameTextTest, PerfScriptLines) {
  FrameText k = Parse("\tffffffff8123abcd name_show+0x1c ([kernel.kallsyms])");
  ASSERT_TRUE(k.address);
  EXPECT_EQ(*k.address, 0xffffffff8123abcdull);
  EXPECT_EQ(k.symbol, "name_show");
  EXPECT_FALSE(k.size);
  EXPECT_EQ(k.module, "");
  FrameText m = Parse("ffffffffc0a01234 nft_do_chain+0x9a ([nf_tables])");
  EXPECT_EQ(m.module, "nf_tables");
}

// CONFIG_KALLSYMS_LINEINFO's "(file:line)" after the frame, with and without a module; a perf
// DSO in parentheses is not one, nor is a parenthesis without a line number.
TEST(FrameTextTest, LineinfoSourceAnnotation) {
  FrameText v = Parse("[   11.206749]  dump_stack_lvl+0x5d/0x80 (lib/dump_stack.c:123)");
  EXPECT_EQ(v.symbol, "dump_stack_lvl");
  EXPECT_EQ(v.source_file, "lib/dump_stack.c");
  EXPECT_EQ(v.source_line, 123u);
  FrameText m = Parse(" my_func+0x30/0x100 [my_driver] (drivers/foo/bar.c:77)");
  EXPECT_EQ(m.module, "my_driver");
  EXPECT_EQ(m.source_file, "drivers/foo/bar.c");
  EXPECT_EQ(m.source_line, 77u);
  FrameText b = Parse(" f+0x1/0x2 [mod 0123456789abcdef0123456789abcdef01234567] (a/b.c:9)");
  EXPECT_EQ(b.module_build_id, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(b.source_file, "a/b.c");
  FrameText perf = Parse("ffffffff8123abcd name_show+0x1c ([kernel.kallsyms])");
  EXPECT_EQ(perf.source_file, "");
  for (const char* no : {" f+0x1/0x2 (lib/x.c)", " f+0x1/0x2 (lib/x.c:)", " f+0x1/0x2 (:12)", " f+0x1/0x2 (a b.c:1)",
                         " f+0x1/0x2 (lib/x.c:12a)", " f+0x1/0x2 (lib/x.c:1234567890)"}) {
    EXPECT_EQ(Parse(no).source_file, "") << no;
  }
}

TEST(FrameTextTest, BareAddresses) {
  EXPECT_EQ(*Parse("0xffffffffc0a01234").address, 0xffffffffc0a01234ull);
  EXPECT_EQ(*Parse("ffffffff81000000").address, 0xffffffff81000000ull);
  EXPECT_EQ(*Parse("0x10").address, 0x10u);
}

TEST(FrameTextTest, NotFramesAreRefusedWithAnExcerpt) {
  for (std::string_view bad : {"", "Call Trace:", "[   12.345678]", "name_show", "name_show+0xzz/0x40",
                               "0x123456789abcdef01", "name_show+0x1/", "deadbeef"}) {
    auto f = ParseFrameText(bad);
    // "deadbeef" is 8 hex digits: an address (a kernel log never prints one that short, but a
    // profiler's 32-bit ip might).
    if (bad == "deadbeef") {
      EXPECT_TRUE(f.ok());
      continue;
    }
    EXPECT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  auto longline = ParseFrameText(std::string(kMaxFrameLineLength + 1, 'a'));
  ASSERT_FALSE(longline.ok());
  EXPECT_NE(longline.status().message().find("limit"), std::string::npos);
  auto quoted = ParseFrameText(std::string(500, 'x') + "\x01");
  ASSERT_FALSE(quoted.ok());
  EXPECT_LT(quoted.status().message().size(), 200u) << "the error quotes an excerpt, not the line";
}

TEST(FrameTextTest, ASymbolTooLongIsNotOne) {
  std::string name(kMaxFrameSymbolLength + 1, 'a');
  EXPECT_FALSE(ParseFrameText(name + "+0x1/0x2").ok());
  EXPECT_TRUE(ParseFrameText(std::string(kMaxFrameSymbolLength, 'a') + "+0x1/0x2").ok());
}

}  // namespace
}  // namespace symdex::ingest
