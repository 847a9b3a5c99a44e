// perf probe's argument syntax (ingest/probe_arg.h): what is a variable and its members, what
// is passed through as kprobe_events' own syntax, and what is refused with its reason.
#include "server/ingest/probe_arg.h"

#include <gtest/gtest.h>

namespace symdex::ingest {
namespace {

TEST(ProbeArgTest, VariablesMembersIndexesAndTypes) {
  auto a = ParseProbeArg("file->f_path.dentry->d_name.name:string");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kind, ProbeArg::Kind::kVariable);
  EXPECT_EQ(a->var, "file");
  EXPECT_EQ(a->type, "string");
  EXPECT_EQ(a->name, "");
  ASSERT_EQ(a->fields.size(), 4u);
  EXPECT_EQ(a->fields[0], (ProbeArgField{"f_path", true, std::nullopt}));
  EXPECT_EQ(a->fields[1], (ProbeArgField{"dentry", false, std::nullopt}));
  EXPECT_EQ(a->fields[2], (ProbeArgField{"d_name", true, std::nullopt}));
  EXPECT_EQ(a->fields[3], (ProbeArgField{"name", false, std::nullopt}));

  auto b = ParseProbeArg("id=sb->s_id[1]:u8");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->name, "id");
  ASSERT_EQ(b->fields.size(), 2u);
  EXPECT_EQ(b->fields[1].index, 1u);
  EXPECT_EQ(b->type, "u8");

  auto c = ParseProbeArg("flags:b3@2/32");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->type, "b3@2/32");
  auto s = ParseProbeArg("count:s");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->type, "s");
}

TEST(ProbeArgTest, SpecialsAndRawFetchArgs) {
  EXPECT_EQ(ParseProbeArg("$params")->kind, ProbeArg::Kind::kParams);
  EXPECT_EQ(ParseProbeArg("$vars")->kind, ProbeArg::Kind::kVars);
  auto r = ParseProbeArg("ret=$retval:s32");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->kind, ProbeArg::Kind::kRetval);
  EXPECT_EQ(r->type, "s32");
  // kprobe_events' own syntax, kept exactly as written (the kernel's parser decides).
  for (const char* raw : {"%di", "arg1=%di:u64", "+8(%si):u32", "@jiffies", "$comm", "\\5", "$stack2", "-8(%sp)"}) {
    auto p = ParseProbeArg(raw);
    ASSERT_TRUE(p.ok()) << raw << ": " << p.status();
    EXPECT_EQ(p->kind, ProbeArg::Kind::kRaw) << raw;
    EXPECT_EQ(p->text, raw);
  }
  EXPECT_EQ(ParseProbeArg("arg1=%di:u64")->name, "arg1");
}

TEST(ProbeArgTest, MalformedArgumentsSayWhy) {
  struct Bad {
    const char* text;
    const char* why;
  };
  for (const Bad& b : std::initializer_list<Bad>{
           {"", "empty"},
           {"1x=foo", "not a C name"},
           {"x=", "nothing after '='"},
           {"file->", "member name after '->'"},
           {"file.", "member name after '.'"},
           {"a[", "'[' without ']'"},
           {"a[x]", "not an index"},
           {"a[]", "not an index"},
           {"a+1", "unexpected '+1'"},
           {"count:", "nothing after ':'"},
           {"count:u128", "not a type kprobe_events reads"},
           {"count:b40@0/32", "not a type kprobe_events reads"},
           {"$params:u32", "takes no type"},
           {"p=$params", "takes no name"},
           {"$retval:int", "not a type"},
       }) {
    auto a = ParseProbeArg(b.text);
    ASSERT_FALSE(a.ok()) << b.text;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(a.status().message()).find(b.why), std::string::npos) << b.text << ": " << a.status();
  }
  EXPECT_FALSE(ParseProbeArg(std::string(kMaxProbeArgLength + 1, 'a')).ok());
  std::string deep = "a";
  for (size_t i = 0; i <= kMaxProbeArgFields; ++i) deep += ".b";
  EXPECT_FALSE(ParseProbeArg(deep).ok());
}

}  // namespace
}  // namespace symdex::ingest
