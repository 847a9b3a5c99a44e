#include "server/ingest/jitdump.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "server/common/strings.h"
#include "tests/jit/jitdump_writer.h"

namespace symdex::ingest {
namespace {

using jit::testing::JitdumpWriter;

constexpr char kCodeA[] = "\x55\x48\x89\xe5\x5d\xc3";  // push rbp; mov rbp,rsp; pop rbp; ret
constexpr char kCodeB[] = "\x90\x90\xc3";

// A dump with every record kind: UNWINDING_INFO + DEBUG_INFO (with the "\xff\0" marker) for the
// first CODE_LOAD, a CODE_MOVE, an unknown record id, a second CODE_LOAD, CLOSE.
JitdumpWriter EveryKindDump(std::endian order) {
  JitdumpWriter w(order);
  w.Header();
  w.UnwindingInfo(100, "EHFRAME!", "HDR1", 12);
  w.DebugInfo(101, 0x7f0000001000,
              {{0x7f0000001080, 10, 3, "/app/a.js"},
               {0x7f0000001084, 11, 1, "\xff"},
               {0x7f0000001088, 12, 0, "/app/b.js"},
               {0x7f000000108c, 13, 0, "\xff"}});
  w.CodeLoad(102, 4242, 4243, 0x7f0000001000, 0, "JS:~foo /app/a.js:10", std::string_view(kCodeA, 6));
  w.CodeMove(103, 4242, 4243, 0x7f0000001000, 0x7f0000002000, 6, 0);
  w.Record(9, 104, std::string(24, '\x01'));
  w.CodeLoad(105, 4242, 4244, 0x7f0000003000, 1, "Builtin:Trampoline", std::string_view(kCodeB, 3));
  w.Close(106);
  return w;
}

void ExpectEveryKind(const Jitdump& dump, std::endian order) {
  EXPECT_EQ(dump.header.byte_order, order);
  EXPECT_EQ(dump.header.version, 1u);
  EXPECT_EQ(dump.header.total_size, 40u);
  EXPECT_EQ(dump.header.elf_mach, 62u);
  EXPECT_EQ(dump.header.pad1, 0xdeadbeefu);
  EXPECT_EQ(dump.header.pid, 4242u);
  EXPECT_EQ(dump.header.timestamp, 1700000000000000u);
  EXPECT_FALSE(dump.header.arch_timestamps());
  EXPECT_TRUE(dump.closed);
  EXPECT_FALSE(dump.truncated);
  EXPECT_FALSE(dump.dangling_attachments);
  ASSERT_EQ(dump.records.size(), 5u);

  const auto& load = std::get<CodeLoad>(dump.records[0]);
  EXPECT_EQ(load.prefix.timestamp, 102u);
  EXPECT_EQ(load.pid, 4242u);
  EXPECT_EQ(load.tid, 4243u);
  EXPECT_EQ(load.vma, 0x7f0000001000u);
  EXPECT_EQ(load.code_addr, 0x7f0000001000u);
  EXPECT_EQ(load.code_size, 6u);
  EXPECT_EQ(load.code_index, 0u);
  EXPECT_EQ(load.name, "JS:~foo /app/a.js:10");
  EXPECT_EQ(load.code, std::string(kCodeA, 6));

  ASSERT_TRUE(load.debug_info.has_value());
  EXPECT_EQ(load.debug_info->prefix.timestamp, 101u);
  EXPECT_EQ(load.debug_info->code_addr, 0x7f0000001000u);
  ASSERT_EQ(load.debug_info->entries.size(), 4u);
  const auto& e = load.debug_info->entries;
  EXPECT_EQ(e[0], (DebugEntry{0x7f0000001080, 10, 3, "/app/a.js", false}));
  EXPECT_EQ(e[1], (DebugEntry{0x7f0000001084, 11, 1, "/app/a.js", true}));
  EXPECT_EQ(e[2], (DebugEntry{0x7f0000001088, 12, 0, "/app/b.js", false}));
  EXPECT_EQ(e[3], (DebugEntry{0x7f000000108c, 13, 0, "/app/b.js", true}));

  ASSERT_TRUE(load.unwinding_info.has_value());
  EXPECT_EQ(load.unwinding_info->prefix.timestamp, 100u);
  EXPECT_EQ(load.unwinding_info->unwinding_size, 12u);
  EXPECT_EQ(load.unwinding_info->eh_frame_hdr_size, 4u);
  EXPECT_EQ(load.unwinding_info->mapped_size, 12u);
  EXPECT_EQ(load.unwinding_info->eh_frame(), "EHFRAME!");
  EXPECT_EQ(load.unwinding_info->eh_frame_hdr(), "HDR1");

  const auto& move = std::get<CodeMove>(dump.records[1]);
  EXPECT_EQ(move.prefix.timestamp, 103u);
  EXPECT_EQ(move.old_code_addr, 0x7f0000001000u);
  EXPECT_EQ(move.new_code_addr, 0x7f0000002000u);
  EXPECT_EQ(move.vma, 0x7f0000002000u);
  EXPECT_EQ(move.code_size, 6u);
  EXPECT_EQ(move.code_index, 0u);

  const auto& unknown = std::get<UnknownRecord>(dump.records[2]);
  EXPECT_EQ(unknown.prefix.id, 9u);
  EXPECT_EQ(unknown.prefix.total_size, 40u);
  EXPECT_EQ(TimestampOf(dump.records[2]), 104u);

  const auto& load2 = std::get<CodeLoad>(dump.records[3]);
  EXPECT_EQ(load2.name, "Builtin:Trampoline");
  EXPECT_EQ(load2.code, std::string(kCodeB, 3));
  EXPECT_EQ(load2.code_index, 1u);
  EXPECT_FALSE(load2.debug_info.has_value()) << "attachments apply to the next CODE_LOAD only";
  EXPECT_FALSE(load2.unwinding_info.has_value());

  EXPECT_TRUE(std::holds_alternative<CodeClose>(dump.records[4]));
  EXPECT_EQ(TimestampOf(dump.records[4]), 106u);
}

TEST(JitdumpTest, LittleEndianDumpWithEveryRecordKind) {
  JitdumpWriter w = EveryKindDump(std::endian::little);
  auto dump = ParseJitdump(w.bytes(), "jit-4242.dump");
  ASSERT_TRUE(dump.ok()) << dump.status();
  ExpectEveryKind(*dump, std::endian::little);
  // Offsets point at the records in the file.
  EXPECT_EQ(PrefixOf(dump->records[0]).file_offset, w.record_offsets()[2]);
  EXPECT_EQ(PrefixOf(dump->records[4]).file_offset, w.record_offsets()[6]);
}

TEST(JitdumpTest, BigEndianDumpGivesTheSameRecords) {
  JitdumpWriter le = EveryKindDump(std::endian::little);
  JitdumpWriter be = EveryKindDump(std::endian::big);
  ASSERT_EQ(le.bytes().size(), be.bytes().size());
  ASSERT_NE(le.bytes(), be.bytes());
  EXPECT_EQ(be.bytes().substr(0, 4), "JiTD");  // the magic byte-swapped
  auto dump_le = ParseJitdump(le.bytes(), "le.dump");
  auto dump_be = ParseJitdump(be.bytes(), "be.dump");
  ASSERT_TRUE(dump_be.ok()) << dump_be.status();
  ExpectEveryKind(*dump_be, std::endian::big);
  ASSERT_TRUE(dump_le.ok());
  EXPECT_EQ(dump_le->records, dump_be->records);
}

TEST(JitdumpTest, ArchTimestampFlagAndLongerHeader) {
  JitdumpWriter w;
  w.Header({.version = 2, .flags = 1, .extra_bytes = 24});
  w.CodeLoad(7, 1, 1, 0x1000, 0, "f", "\xc3");
  auto dump = ParseJitdump(w.bytes(), "x");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_TRUE(dump->header.arch_timestamps());
  EXPECT_EQ(dump->header.version, 2u);
  EXPECT_EQ(dump->header.total_size, 64u);
  ASSERT_EQ(dump->records.size(), 1u);
  EXPECT_EQ(std::get<CodeLoad>(dump->records[0]).name, "f");
  EXPECT_EQ(PrefixOf(dump->records[0]).file_offset, 64u);
  EXPECT_FALSE(dump->closed);
}

TEST(JitdumpTest, CodeIsTheLastCodeSizeBytesOfTheRecord) {
  JitdumpWriter w;
  w.Header().CodeLoad(1, 1, 1, 0x1000, 0, "padded", "\x01\x02\x03\x04", /*padding=*/5);
  auto dump = ParseJitdump(w.bytes(), "x");
  ASSERT_TRUE(dump.ok()) << dump.status();
  const auto& load = std::get<CodeLoad>(dump->records[0]);
  EXPECT_EQ(load.name, "padded");
  EXPECT_EQ(load.code, "\x01\x02\x03\x04");
}

TEST(JitdumpTest, EmptyNameAndEmptyCodeAreAllowed) {
  JitdumpWriter w;
  w.Header().CodeLoad(1, 1, 1, 0x1000, 0, "", "");
  auto dump = ParseJitdump(w.bytes(), "x");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(std::get<CodeLoad>(dump->records[0]).name, "");
  EXPECT_EQ(std::get<CodeLoad>(dump->records[0]).code, "");
}

TEST(JitdumpTest, RepeatMarkerOnTheFirstEntryGivesAnEmptyFileName) {
  JitdumpWriter w;
  w.Header().DebugInfo(1, 0x1000, {{0x1040, 1, 0, "\xff"}, {0x1044, 2, 0, "\xff"}});
  w.CodeLoad(2, 1, 1, 0x1000, 0, "f", "\xc3");
  auto dump = ParseJitdump(w.bytes(), "x");
  ASSERT_TRUE(dump.ok()) << dump.status();
  const auto& entries = std::get<CodeLoad>(dump->records[0]).debug_info->entries;
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].file, "");
  EXPECT_TRUE(entries[0].repeated_file);
  EXPECT_EQ(entries[1].file, "");
}

TEST(JitdumpTest, RepeatMarkerDoesNotReachIntoThePreviousRecord) {
  JitdumpWriter w;
  w.Header();
  w.DebugInfo(1, 0x1000, {{0x1040, 1, 0, "/a.js"}});
  w.CodeLoad(2, 1, 1, 0x1000, 0, "f", "\xc3");
  w.DebugInfo(3, 0x2000, {{0x2040, 5, 0, "\xff"}});
  w.CodeLoad(4, 1, 1, 0x2000, 1, "g", "\xc3");
  auto dump = ParseJitdump(w.bytes(), "x");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(std::get<CodeLoad>(dump->records[1]).debug_info->entries[0].file, "");
}

TEST(JitdumpTest, LaterAttachmentReplacesEarlierOneAndSurvivesInterveningRecords) {
  JitdumpWriter w;
  w.Header();
  w.DebugInfo(1, 0x1000, {{0x1040, 1, 0, "/old.js"}});
  w.DebugInfo(2, 0x1000, {{0x1040, 2, 0, "/new.js"}});
  w.CodeMove(3, 1, 1, 0x500, 0x600, 4, 9);
  w.CodeLoad(4, 1, 1, 0x1000, 0, "f", "\xc3");
  auto dump = ParseJitdump(w.bytes(), "x");
  ASSERT_TRUE(dump.ok()) << dump.status();
  ASSERT_EQ(dump->records.size(), 2u);
  EXPECT_EQ(std::get<CodeLoad>(dump->records[1]).debug_info->entries[0].file, "/new.js");
}

TEST(JitdumpTest, AttachmentsWithoutALoadAreReportedAsDangling) {
  JitdumpWriter w;
  w.Header().CodeLoad(1, 1, 1, 0x1000, 0, "f", "\xc3").DebugInfo(2, 0x2000, {{0x2040, 1, 0, "/a.js"}});
  auto dump = ParseJitdump(w.bytes(), "x");
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(dump->records.size(), 1u);
  EXPECT_TRUE(dump->dangling_attachments);
  EXPECT_FALSE(dump->truncated);
}

// Cut a small dump at every byte offset: never crash, never read past the cut, and return exactly
// the records that are complete before it, with the tail reported where the cut record starts.
void CheckEveryCut(std::endian order, const JitdumpWriter::HeaderFields& header) {
  JitdumpWriter w(order);
  w.Header(header);
  w.UnwindingInfo(100, "EHFRAME!", "HDR1", 12);
  w.DebugInfo(101, 0x1000, {{0x1080, 10, 3, "/app/a.js"}, {0x1084, 11, 1, "\xff"}});
  w.CodeLoad(102, 7, 7, 0x1000, 0, "JS:~foo", std::string_view(kCodeA, 6), 3);
  w.CodeMove(103, 7, 7, 0x1000, 0x2000, 6, 0);
  w.Record(77, 104, "xyz");
  w.CodeLoad(105, 7, 8, 0x3000, 1, "JS:~bar", std::string_view(kCodeB, 3));
  w.Close(106);
  const std::string& full = w.bytes();
  const size_t header_size = 40 + header.extra_bytes;
  auto whole = ParseJitdump(full, "full");
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->records.size(), 5u);

  std::vector<size_t> ends;  // end offset of every record, attachments included
  for (size_t i = 0; i < w.record_offsets().size(); ++i) {
    ends.push_back(i + 1 < w.record_offsets().size() ? w.record_offsets()[i + 1] : full.size());
  }

  for (size_t cut = 0; cut <= full.size(); ++cut) {
    SCOPED_TRACE(StrCat("cut at ", cut, " of ", full.size()));
    // A copy of exactly `cut` bytes, so ASan catches any read past the end.
    std::string bytes = full.substr(0, cut);
    auto dump = ParseJitdump(bytes, "cut.dump");
    if (cut < header_size) {
      ASSERT_FALSE(dump.ok());
      EXPECT_NE(std::string(dump.status().message()).find("too short for the jitdump header"), std::string::npos)
          << dump.status();
      JitdumpReader reader("cut.dump");
      std::vector<Record> records;
      auto fed = reader.Feed(bytes, &records);
      ASSERT_TRUE(fed.ok()) << fed.status();
      EXPECT_FALSE(reader.header().has_value());
      EXPECT_EQ(fed->incomplete_bytes, cut);
      EXPECT_EQ(reader.offset(), 0u);
      continue;
    }
    ASSERT_TRUE(dump.ok()) << dump.status();
    std::vector<Record> expected;
    for (const auto& r : whole->records) {
      if (PrefixOf(r).file_offset + PrefixOf(r).total_size <= cut) expected.push_back(r);
    }
    EXPECT_EQ(dump->records, expected);
    size_t complete_to = header_size;
    for (size_t end : ends) {
      if (end <= cut) complete_to = end;
    }
    EXPECT_EQ(dump->truncated, cut > complete_to);
    EXPECT_EQ(dump->truncated_at, complete_to);
    EXPECT_EQ(dump->truncated_bytes, cut - complete_to);
    EXPECT_EQ(dump->closed, cut == full.size());
  }
}

TEST(JitdumpTest, TruncatedAtEveryOffsetLittleEndian) { CheckEveryCut(std::endian::little, {}); }
TEST(JitdumpTest, TruncatedAtEveryOffsetBigEndian) { CheckEveryCut(std::endian::big, {}); }
TEST(JitdumpTest, TruncatedAtEveryOffsetLongerHeader) { CheckEveryCut(std::endian::little, {.extra_bytes = 16}); }

// A file read while it grows: each round reads from reader.offset() to the current end, the way
// a tailer would. Whatever the step, the records equal a one-shot parse of the final file.
TEST(JitdumpTest, GrowingFileParsedIncrementally) {
  JitdumpWriter w;
  w.Header();
  for (int i = 0; i < 20; ++i) {
    if (i % 3 == 0) w.DebugInfo(10 * i, 0x1000 + i, {{0x1080u + i, 1u + i, 0, "/g.js"}, {0x1090, 2, 0, "\xff"}});
    if (i % 4 == 0) w.UnwindingInfo(10 * i + 1, std::string(i, 'e'), "hdr!", 0);
    w.CodeLoad(10 * i + 2, 9, 9, 0x1000 + 0x100 * i, i, StrCat("fn", i), std::string(i + 1, '\x90'));
    if (i % 5 == 0) w.CodeMove(10 * i + 3, 9, 9, 0x1000, 0x9000, 1, i);
  }
  w.Close(999);
  const std::string& full = w.bytes();
  auto whole = ParseJitdump(full, "g");
  ASSERT_TRUE(whole.ok());

  std::mt19937 rng(12345);
  for (size_t max_step : {1, 7, 16, 64, 1000}) {
    SCOPED_TRACE(StrCat("max step ", max_step));
    JitdumpReader reader("growing.dump");
    std::vector<Record> records;
    size_t written = 0;
    while (written < full.size()) {
      written = std::min(full.size(), written + 1 + rng() % max_step);
      std::string visible = full.substr(0, written);  // what is on disk now
      auto fed = reader.Feed(std::string_view(visible).substr(reader.offset()), &records);
      ASSERT_TRUE(fed.ok()) << fed.status();
      EXPECT_EQ(fed->next_offset, reader.offset());
      EXPECT_EQ(reader.offset() + fed->incomplete_bytes, written);
    }
    EXPECT_TRUE(reader.closed());
    EXPECT_FALSE(reader.has_pending_attachments());
    EXPECT_EQ(records, whole->records);
  }
}

TEST(JitdumpTest, AttachmentInOneReadAppliesToTheLoadInTheNext) {
  JitdumpWriter w;
  w.Header().DebugInfo(1, 0x1000, {{0x1040, 3, 0, "/a.js"}});
  size_t split = w.bytes().size();
  w.CodeLoad(2, 1, 1, 0x1000, 0, "f", "\xc3");
  JitdumpReader reader("x");
  std::vector<Record> records;
  ASSERT_TRUE(reader.Feed(std::string_view(w.bytes()).substr(0, split), &records).ok());
  EXPECT_TRUE(records.empty());
  EXPECT_TRUE(reader.has_pending_attachments());
  EXPECT_EQ(reader.offset(), split);
  ASSERT_TRUE(reader.Feed(std::string_view(w.bytes()).substr(split), &records).ok());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(std::get<CodeLoad>(records[0]).debug_info->entries[0].line, 3u);
}

TEST(JitdumpTest, NotAJitdump) {
  auto dump = ParseJitdump(std::string(64, 'x'), "/tmp/jit-1.dump");
  ASSERT_FALSE(dump.ok());
  EXPECT_EQ(dump.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(dump.status().message()),
            "/tmp/jit-1.dump: not a jitdump file: magic is 0x78787878, expected 0x4a695444 in either "
            "byte order");
}

TEST(JitdumpTest, HeaderTotalSizeSmallerThanTheHeader) {
  JitdumpWriter w;
  w.Header({.total_size_override = 16});
  auto dump = ParseJitdump(w.bytes(), "h.dump");
  ASSERT_FALSE(dump.ok());
  EXPECT_EQ(std::string(dump.status().message()),
            "h.dump: jitdump header total_size 16 is smaller than the 40-byte header");
}

TEST(JitdumpTest, HeaderTotalSizeBeyondTheFile) {
  JitdumpWriter w;
  w.Header({.total_size_override = 0xffffffff});
  auto dump = ParseJitdump(w.bytes(), "h.dump");
  ASSERT_FALSE(dump.ok());
  EXPECT_NE(std::string(dump.status().message()).find("its total_size says it is longer"), std::string::npos);
}

TEST(JitdumpTest, RecordSizeBeyondTheFileIsAnIncompleteTailNotAnError) {
  JitdumpWriter w;
  w.Header().CodeLoad(1, 1, 1, 0x1000, 0, "f", "\xc3");
  const size_t at = w.bytes().size();
  w.Record(0, 2, std::string(100, '\0'), 0xffffffff);
  auto dump = ParseJitdump(w.bytes(), "x");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->records.size(), 1u);
  EXPECT_TRUE(dump->truncated);
  EXPECT_EQ(dump->truncated_at, at);
  EXPECT_EQ(dump->truncated_bytes, 116u);
}

// Hostile sizes: each must give an error naming the source, the record's offset and the field,
// never a crash or a read past the record.
struct HostileCase {
  const char* label;
  std::function<void(JitdumpWriter&)> write;  // after a header and one good CODE_LOAD
  const char* message;                        // expected text after "bad.dump: offset <N>: "
};

// Keeps ctest's test names readable (GoogleTest would print the raw bytes of the struct).
void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.label; }

class JitdumpHostileTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(JitdumpHostileTest, ErrorNamesSourceOffsetAndField) {
  for (std::endian order : {std::endian::little, std::endian::big}) {
    JitdumpWriter w(order);
    w.Header().CodeLoad(1, 1, 1, 0x1000, 0, "good", "\xc3");
    const size_t bad_offset = w.bytes().size();
    GetParam().write(w);
    w.CodeLoad(9, 1, 1, 0x2000, 1, "after", "\xc3");  // never reached

    auto dump = ParseJitdump(w.bytes(), "bad.dump");
    ASSERT_FALSE(dump.ok());
    EXPECT_EQ(dump.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(dump.status().message()), StrCat("bad.dump: offset ", bad_offset, ": ", GetParam().message));

    // The reader hands back the good record before the bad one and stops at the bad one.
    JitdumpReader reader("bad.dump");
    std::vector<Record> records;
    auto fed = reader.Feed(w.bytes(), &records);
    ASSERT_FALSE(fed.ok());
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(std::get<CodeLoad>(records[0]).name, "good");
    EXPECT_EQ(reader.offset(), bad_offset);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Hostile, JitdumpHostileTest,
    ::testing::Values(
        HostileCase{"RecordSizeZero", [](JitdumpWriter& w) { w.Record(3, 5, std::string(16, '\0'), 0); },
                    "CLOSE record total_size 0 is smaller than the 16-byte record prefix"},
        HostileCase{"RecordSmallerThanPrefix", [](JitdumpWriter& w) { w.Record(0, 5, std::string(8, '\0'), 8); },
                    "CODE_LOAD record total_size 8 is smaller than the 16-byte record prefix"},
        HostileCase{"CodeLoadShorterThanFixedPart", [](JitdumpWriter& w) { w.Record(0, 5, std::string(20, '\0')); },
                    "CODE_LOAD record (36 bytes): shorter than its 56-byte fixed part"},
        HostileCase{"CodeLoadNameWithoutNul",
                    [](JitdumpWriter& w) { w.Record(0, 5, std::string(40, '\0').append("abc")); },
                    "CODE_LOAD record (59 bytes): function name has no terminating NUL"},
        HostileCase{"CodeSizeBeyondRecord",
                    [](JitdumpWriter& w) { w.CodeLoad(5, 1, 1, 0x3000, 2, "f", "\xc3\xc3", 0, 3); },
                    "CODE_LOAD record (60 bytes): code_size 3 exceeds the 2 bytes after the name"},
        HostileCase{"CodeSizeHuge",
                    [](JitdumpWriter& w) { w.CodeLoad(5, 1, 1, 0x3000, 2, "f", "\xc3", 0, UINT64_MAX); },
                    "CODE_LOAD record (59 bytes): code_size 18446744073709551615 exceeds the 1 bytes after "
                    "the name"},
        HostileCase{"CodeMoveTooShort", [](JitdumpWriter& w) { w.Record(1, 5, std::string(40, '\0')); },
                    "CODE_MOVE record (56 bytes): shorter than its 64-byte fixed part"},
        HostileCase{"DebugInfoTooShort", [](JitdumpWriter& w) { w.Record(2, 5, std::string(8, '\0')); },
                    "DEBUG_INFO record (24 bytes): shorter than its 32-byte fixed part"},
        HostileCase{"DebugInfoCountOverflows",
                    [](JitdumpWriter& w) {
                      w.DebugInfo(5, 0x1000, {{0x1000, 1, 0, "/a.js"}}, UINT64_MAX);
                    },
                    "DEBUG_INFO record (56 bytes): nr_entry 18446744073709551615 cannot fit in the 24 bytes "
                    "left (an entry takes at least 17)"},
        HostileCase{"DebugInfoCountTimesEntryOverflows",
                    [](JitdumpWriter& w) {
                      w.DebugInfo(5, 0x1000, {{0x1000, 1, 0, "/a.js"}}, (UINT64_MAX / 17) + 2);
                    },
                    "DEBUG_INFO record (56 bytes): nr_entry 1085102592571150097 cannot fit in the 24 bytes "
                    "left (an entry takes at least 17)"},
        HostileCase{"DebugInfoOneEntryTooMany",
                    [](JitdumpWriter& w) {
                      // 3 claimed; 2 present whose names use up the record (plus padding that
                      // could hold a 17-byte entry only without a NUL).
                      w.DebugInfo(5, 0x1000, {{0x1000, 1, 0, "/aaaaaaaaaaaaaaaa.js"}, {0x1004, 2, 0, "\xff"}}, 3);
                    },
                    "DEBUG_INFO record (88 bytes): entry 2 of 3 runs past the end of the record"},
        HostileCase{"UnwindingSizeBeyondRecord", [](JitdumpWriter& w) { w.UnwindingInfo(5, "abcd", "hh", 0, 1000); },
                    "UNWINDING_INFO record (48 bytes): unwinding_size 1000 exceeds the 8 bytes left"},
        HostileCase{"UnwindingSizeHuge", [](JitdumpWriter& w) { w.UnwindingInfo(5, "abcd", "hh", 0, UINT64_MAX); },
                    "UNWINDING_INFO record (48 bytes): unwinding_size 18446744073709551615 exceeds the 8 "
                    "bytes left"},
        HostileCase{"EhFrameHdrLargerThanUnwindingData", [](JitdumpWriter& w) { w.UnwindingInfo(5, "", "hhhh", 0, 2); },
                    "UNWINDING_INFO record (48 bytes): eh_frame_hdr_size 4 exceeds unwinding_size 2"}),
    [](const ::testing::TestParamInfo<HostileCase>& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace symdex::ingest
