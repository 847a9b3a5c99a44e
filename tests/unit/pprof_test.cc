// pprof profiles read and rewritten (ingest/pprof_wire.h): what symbolizing needs is read, and the
// rewrite changes nothing but the symbolized locations, the new functions and strings.
#include "server/ingest/pprof_wire.h"

#include <gtest/gtest.h>

namespace symdex::ingest {
namespace {

void Varint(std::string& o, uint64_t v) {
  while (v >= 0x80) {
    o.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  o.push_back(static_cast<char>(v));
}
void Num(std::string& o, uint32_t n, uint64_t v) {
  Varint(o, n << 3);
  Varint(o, v);
}
void Msg(std::string& o, uint32_t n, const std::string& b) {
  Varint(o, (n << 3) | 2);
  Varint(o, b.size());
  o += b;
}

// Two mappings (kernel, user), three locations, two samples (one packed), a function, a comment.
std::string Profile() {
  std::string p, s1, s2, ids, m1, m2, f;
  Varint(ids, 1), Varint(ids, 2);
  Msg(s1, 1, ids);  // packed: leaf 1, caller 2
  Num(s1, 2, 5);
  Num(s2, 1, 3), Num(s2, 1, 2);  // unpacked: leaf 3, caller 2
  Num(s2, 2, 1);
  Msg(p, 2, s1), Msg(p, 2, s2);
  Num(m1, 1, 1), Num(m1, 5, 1), Num(m1, 6, 2), Num(m1, 2, 0xffffffff81000000ull);
  Num(m2, 1, 2), Num(m2, 5, 3);
  Msg(p, 3, m1), Msg(p, 3, m2);
  for (uint64_t id : {1, 2, 3}) {
    std::string l;
    Num(l, 1, id), Num(l, 2, id == 3 ? 2 : 1), Num(l, 3, 0xffffffff81000100ull + id);
    Msg(p, 4, l);
  }
  Num(f, 1, 9), Num(f, 2, 4);
  Msg(p, 5, f);
  Num(p, 13, 4);  // comment: a string index, kept as it is
  for (const char* str : {"", "[kernel.kallsyms]", "abcdef0123", "/usr/bin/cat", "main"}) Msg(p, 6, str);
  return p;
}

TEST(PprofTest, ReadsMappingsLocationsAndRoles) {
  auto p = ParsePprof(Profile());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->mappings.size(), 2u);
  EXPECT_EQ(p->mappings[0].filename, "[kernel.kallsyms]");
  EXPECT_EQ(p->mappings[0].build_id, "abcdef0123");
  EXPECT_EQ(p->mappings[0].memory_start, 0xffffffff81000000ull);
  EXPECT_EQ(p->mappings[1].filename, "/usr/bin/cat");
  ASSERT_EQ(p->locations.size(), 3u);
  EXPECT_TRUE(p->locations[0].leaf);
  EXPECT_FALSE(p->locations[0].caller);
  EXPECT_TRUE(p->locations[1].caller) << "location 2 is below another in both samples";
  EXPECT_FALSE(p->locations[1].leaf);
  EXPECT_TRUE(p->locations[2].leaf);
  EXPECT_EQ(p->max_function_id, 9u);
  EXPECT_EQ(p->samples, 2u);
}

TEST(PprofTest, RewriteTouchesOnlyWhatItSymbolizes) {
  const std::string in = Profile();
  auto p = ParsePprof(in);
  ASSERT_TRUE(p.ok());
  std::map<uint64_t, std::vector<PprofFrame>> lines;
  lines[1] = {{"inlined_fn", "inlined_fn", "include/x.h", 0, 12, 3},
              {"name_show@card.c", "name_show", "a.c", 186, 190, 9}};
  std::string out = RewritePprof(in, *p, lines, {1});
  auto q = ParsePprof(out);
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->locations[0].lines, 2u);
  EXPECT_EQ(q->locations[1].lines, 0u);
  EXPECT_EQ(q->locations[2].lines, 0u);
  EXPECT_EQ(q->max_function_id, 11u) << "two functions added after the profile's own id 9";
  ASSERT_GE(q->strings.size(), p->strings.size());
  for (size_t i = 0; i < p->strings.size(); ++i) EXPECT_EQ(q->strings[i], p->strings[i]) << "string ids keep";
  EXPECT_NE(std::find(q->strings.begin(), q->strings.end(), "name_show@card.c"), q->strings.end());
  // Nothing symbolized: the same bytes (the string table moves to the end, already there).
  EXPECT_EQ(RewritePprof(in, *p, {}, {}), in);
}

TEST(PprofTest, DamagedProfilesAreRefusedWithAReason) {
  std::string in = Profile();
  for (size_t cut : {in.size() - 1, in.size() / 2, size_t{3}}) {
    auto p = ParsePprof(std::string_view(in).substr(0, cut));
    EXPECT_FALSE(p.ok()) << cut;
    if (!p.ok()) {
      EXPECT_NE(std::string(p.status().message()).find("not a pprof profile"), std::string::npos);
    }
  }
  EXPECT_FALSE(ParsePprof("hello, world").ok());
}

}  // namespace
}  // namespace symdex::ingest
