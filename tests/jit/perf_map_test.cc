#include "server/ingest/perf_map.h"

#include <gtest/gtest.h>

#include <random>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

TEST(PerfMapTest, ParsesV8StyleLines) {
  // As `node --perf-basic-prof` writes them, plus the variants the format allows.
  constexpr char kText[] =
      "3ef414c0 398 Builtin:ArgumentsAdaptorTrampoline\n"
      "0x7f5e2c0a1000 0x40 LazyCompile:~foo /app/my dir/a.js:3:10\n"
      "7F5E2C0A2000\t1a\tJS:*bar   with  spaces \r\n"
      "\n"
      "   \t\n"
      "  7f5e2c0a3000  8  indented\n";
  auto parsed = ParsePerfMap(kText, "/tmp/perf-1.map");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->malformed_lines, 0u);
  EXPECT_FALSE(parsed->incomplete_tail);
  EXPECT_EQ(parsed->consumed_bytes, sizeof(kText) - 1);
  EXPECT_EQ(parsed->next_line_number, 7u);
  ASSERT_EQ(parsed->entries.size(), 4u);
  EXPECT_EQ(parsed->entries[0], (PerfMapEntry{0x3ef414c0, 0x398, "Builtin:ArgumentsAdaptorTrampoline", 1}));
  EXPECT_EQ(parsed->entries[1], (PerfMapEntry{0x7f5e2c0a1000, 0x40, "LazyCompile:~foo /app/my dir/a.js:3:10", 2}));
  EXPECT_EQ(parsed->entries[2], (PerfMapEntry{0x7f5e2c0a2000, 0x1a, "JS:*bar   with  spaces ", 3}));
  EXPECT_EQ(parsed->entries[3], (PerfMapEntry{0x7f5e2c0a3000, 0x8, "indented", 6}));
}

TEST(PerfMapTest, MalformedLinesAreSkippedCountedAndDescribed) {
  constexpr char kText[] =
      "1000 10 good_one\n"
      "zzzz 10 bad_start\n"
      "2000\n"
      "2000 1g bad_size\n"
      "3000 10\n"
      "0x 10 empty_hex\n"
      "12345678901234567 10 seventeen_digits\n"
      "ffffffffffffff00 101 wraps\n"
      "4000 10 good_two\n";
  auto parsed = ParsePerfMap(kText, "/tmp/perf-9.map");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->entries.size(), 2u);
  EXPECT_EQ(parsed->entries[0].name, "good_one");
  EXPECT_EQ(parsed->entries[1].name, "good_two");
  EXPECT_EQ(parsed->entries[1].line, 9u);
  EXPECT_EQ(parsed->malformed_lines, 7u);
  ASSERT_EQ(parsed->issues.size(), 7u);
  EXPECT_EQ(parsed->issues[0], "/tmp/perf-9.map:2: start address is not 1-16 hex digits: 'zzzz 10 bad_start'");
  EXPECT_EQ(parsed->issues[1], "/tmp/perf-9.map:3: missing size: '2000'");
  EXPECT_EQ(parsed->issues[2], "/tmp/perf-9.map:4: size is not 1-16 hex digits: '2000 1g bad_size'");
  EXPECT_EQ(parsed->issues[3], "/tmp/perf-9.map:5: missing symbol name: '3000 10'");
  EXPECT_EQ(parsed->issues[4], "/tmp/perf-9.map:6: start address is not 1-16 hex digits: '0x 10 empty_hex'");
  EXPECT_EQ(parsed->issues[5],
            "/tmp/perf-9.map:7: start address is not 1-16 hex digits: '12345678901234567 10 seventeen_digits'");
  EXPECT_EQ(parsed->issues[6],
            "/tmp/perf-9.map:8: range wraps past the end of the address space: 'ffffffffffffff00 101 wraps'");
}

TEST(PerfMapTest, NulBytesAndControlCharactersInExcerpts) {
  std::string text = std::string("1000 10 a\0b\n", 12) + "2000 10 ok\n";
  auto parsed = ParsePerfMap(text, "m");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->entries.size(), 1u);
  EXPECT_EQ(parsed->issues[0], "m:1: line contains a NUL byte: '1000 10 a?b'");
}

TEST(PerfMapTest, StrictModeFailsOnTheFirstMalformedLine) {
  PerfMapParseOptions options;
  options.strict = true;
  auto parsed = ParsePerfMap("1000 10 a\nnope\n2000 10 b\n", "/tmp/perf-2.map", options);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(parsed.status().message()), "/tmp/perf-2.map:2: start address is not 1-16 hex digits: 'nope'");
}

TEST(PerfMapTest, IssuesAreCappedButAllCounted) {
  std::string text;
  for (int i = 0; i < 250; ++i) text += "not a line\n";
  auto parsed = ParsePerfMap(text, "m");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->malformed_lines, 250u);
  EXPECT_EQ(parsed->issues.size(), 100u);
  EXPECT_EQ(parsed->issues.back(), "m:100: start address is not 1-16 hex digits: 'not a line'");
}

TEST(PerfMapTest, UnterminatedLastLineIsHeldBackAsIncomplete) {
  constexpr std::string_view kText = "1000 10 a\n2000 10 half_writ";
  auto parsed = ParsePerfMap(kText, "m");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->entries.size(), 1u);
  EXPECT_TRUE(parsed->incomplete_tail);
  EXPECT_EQ(parsed->consumed_bytes, 10u);
  EXPECT_EQ(parsed->next_line_number, 2u);

  PerfMapParseOptions complete;
  complete.last_line_may_be_partial = false;
  parsed = ParsePerfMap(kText, "m", complete);
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->entries.size(), 2u);
  EXPECT_EQ(parsed->entries[1].name, "half_writ");
  EXPECT_FALSE(parsed->incomplete_tail);
  EXPECT_EQ(parsed->consumed_bytes, kText.size());
}

TEST(PerfMapTest, GrowingFileContinuesWithLineNumbers) {
  const std::string full = "1000 10 a\n2000 10 b\nbogus\n3000 10 c\n4000 10 d\n";
  PerfMap map;
  std::vector<PerfMapEntry> all;
  std::vector<std::string> issues;
  size_t consumed = 0, next_line = 1;
  for (size_t visible = 0; visible <= full.size(); visible += 3) {
    PerfMapParseOptions o;
    o.first_line_number = next_line;
    auto parsed = ParsePerfMap(std::string_view(full).substr(consumed, visible - consumed), "m", o);
    ASSERT_TRUE(parsed.ok());
    consumed += parsed->consumed_bytes;
    next_line = parsed->next_line_number;
    all.insert(all.end(), parsed->entries.begin(), parsed->entries.end());
    issues.insert(issues.end(), parsed->issues.begin(), parsed->issues.end());
    map.Add(parsed->entries);
  }
  PerfMapParseOptions o;
  o.first_line_number = next_line;
  auto rest = ParsePerfMap(std::string_view(full).substr(consumed), "m", o);
  ASSERT_TRUE(rest.ok());
  all.insert(all.end(), rest->entries.begin(), rest->entries.end());

  auto whole = ParsePerfMap(full, "m");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(all, whole->entries);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0], "m:3: start address is not 1-16 hex digits: 'bogus'");
  EXPECT_EQ(all.back().line, 5u);
}

TEST(PerfMapTest, LookupRangeBoundaries) {
  PerfMap map;
  map.Add(PerfMapEntry{0x1000, 0x10, "a", 1});
  map.Add(PerfMapEntry{0x1010, 0x10, "b", 2});
  EXPECT_FALSE(map.Lookup(0xfff).has_value());
  EXPECT_EQ(map.Lookup(0x1000)->name, "a");
  EXPECT_EQ(map.Lookup(0x100f)->name, "a");
  EXPECT_EQ(map.Lookup(0x1010)->name, "b");
  EXPECT_EQ(map.Lookup(0x101f)->name, "b");
  EXPECT_FALSE(map.Lookup(0x1020).has_value());
}

TEST(PerfMapTest, LaterLinesWin) {
  auto parsed = ParsePerfMap(
      "1000 100 old\n"
      "1000 100 same_range_newer\n"  // same range: replaces
      "1040 20 inside\n"             // splits it
      "10f0 20 straddles_end\n"      // overlaps its tail and goes past
      "0 0 zero_size\n"
      "ffffffffffffff00 100 top_of_address_space\n",
      "m");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->malformed_lines, 0u) << parsed->issues[0];
  PerfMap map;
  map.Add(parsed->entries);
  EXPECT_EQ(map.Lookup(0x1000)->name, "same_range_newer");
  EXPECT_EQ(map.Lookup(0x103f)->name, "same_range_newer");
  EXPECT_EQ(map.Lookup(0x1040)->name, "inside");
  EXPECT_EQ(map.Lookup(0x105f)->name, "inside");
  EXPECT_EQ(map.Lookup(0x1060)->name, "same_range_newer");
  EXPECT_EQ(map.Lookup(0x10ef)->name, "same_range_newer");
  EXPECT_EQ(map.Lookup(0x10f0)->name, "straddles_end");
  EXPECT_EQ(map.Lookup(0x110f)->name, "straddles_end");
  EXPECT_FALSE(map.Lookup(0x1110).has_value());
  EXPECT_FALSE(map.Lookup(0).has_value());
  EXPECT_EQ(map.Lookup(UINT64_MAX)->name, "top_of_address_space");
  EXPECT_EQ(map.Lookup(UINT64_MAX)->line, 6u);
  EXPECT_EQ(map.entries().size(), 6u);
  // An older, wider entry added later still wins where it lands (order of Add is what counts).
  map.Add(PerfMapEntry{0x0, 0x2000, "everything", 7});
  EXPECT_EQ(map.Lookup(0x1050)->name, "everything");
  EXPECT_EQ(map.segment_count(), 2u);
}

// Randomised: the segment map must agree with the definition -- the latest entry covering the
// address -- computed by brute force.
TEST(PerfMapTest, LookupMatchesBruteForce) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    PerfMap map;
    std::vector<PerfMapEntry> added;
    for (int i = 0; i < 40; ++i) {
      PerfMapEntry e{rng() % 512, rng() % 64, StrCat("f", i), static_cast<size_t>(i + 1)};
      map.Add(e);
      added.push_back(e);
    }
    for (uint64_t addr = 0; addr < 600; ++addr) {
      std::optional<std::string> want;
      for (const auto& e : added) {
        if (e.size > 0 && addr >= e.start && addr - e.start < e.size) want = e.name;
      }
      auto got = map.Lookup(addr);
      ASSERT_EQ(got.has_value(), want.has_value()) << "round " << round << " addr " << addr;
      if (want) {
        ASSERT_EQ(got->name, *want) << "round " << round << " addr " << addr;
      }
    }
  }
}

}  // namespace
}  // namespace symdex::ingest
