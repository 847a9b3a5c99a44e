// The shared pieces in server/common/: hex parser, fd owner, bounds-checked reader, symbol-type
// rule, batched private files, shared strings. Each is the only copy of its logic, so a bug here is a bug everywhere.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server/common/byte_reader.h"
#include "server/common/file_util.h"
#include "server/common/hex.h"
#include "server/common/ordered_window.h"
#include "server/common/shared_text.h"
#include "server/common/symbol_type.h"
#include "server/common/unique_fd.h"
#include "tests/unit/test_util.h"

namespace symdex {
namespace {

// The LEB128 decoder every reader uses: values of every length round-trip through AppendUleb /
// AppendSleb; ten bytes is the most it reads; one that runs off the end is told apart.
TEST(Leb128, RoundTripsAndRefusesTruncatedOrOverlongNumbers) {
  for (uint64_t v :
       {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{0x3fff}, uint64_t{1} << 35, ~uint64_t{0}}) {
    std::string b;
    AppendUleb(b, v);
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    uint64_t got = 0;
    ASSERT_EQ(DecodeUleb(p, p + b.size(), got), Leb::kOk) << v;
    EXPECT_EQ(got, v);
    EXPECT_EQ(p, reinterpret_cast<const uint8_t*>(b.data()) + b.size());
  }
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{63}, int64_t{-64}, int64_t{-65}, int64_t{1} << 40,
                    std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    std::string b;
    AppendSleb(b, v);
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    int64_t got = 0;
    ASSERT_EQ(DecodeSleb(p, p + b.size(), got), Leb::kOk) << v;
    EXPECT_EQ(got, v);
  }
  const std::string max = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01";  // UINT64_MAX, ten bytes
  const std::string eleven("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 11);
  const std::string cut = "\x80\x80";
  uint64_t v = 0;
  const auto* p = reinterpret_cast<const uint8_t*>(max.data());
  EXPECT_EQ(DecodeUleb(p, p + max.size(), v), Leb::kOk);
  EXPECT_EQ(v, ~uint64_t{0});
  p = reinterpret_cast<const uint8_t*>(eleven.data());
  EXPECT_EQ(DecodeUleb(p, p + eleven.size(), v), Leb::kTooLong);
  p = reinterpret_cast<const uint8_t*>(cut.data());
  EXPECT_EQ(DecodeUleb(p, p + cut.size(), v), Leb::kTruncated);
  // libdw steps over up to 16 bytes; their value is the first ten's.
  p = reinterpret_cast<const uint8_t*>(eleven.data());
  EXPECT_EQ(LebLength(p, p + eleven.size()), 11u);
  EXPECT_EQ(LebLength(p, p + 5), 0u);
}

TEST(ByteReader, VarintsAndCStringsSayWhatWentWrong) {
  ByteReader r(
      std::string_view("\x96\x01"
                       "abc\0"
                       "\x80",
                       7));
  EXPECT_EQ(r.Uleb(), 150u);
  EXPECT_EQ(r.CString(), std::optional<std::string_view>("abc"));
  EXPECT_EQ(r.Uleb(), 0u);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.reason(), "truncated varint");
  EXPECT_EQ(r.error(), "truncated varint at byte 6");
  EXPECT_EQ(r.Int<uint32_t>(), 0u) << "the first failure sticks";
  ByteReader s(std::string_view("no nul"));
  EXPECT_FALSE(s.CString().has_value());
  EXPECT_EQ(s.reason(), "unterminated string");
}

TEST(DwarfCursor, FailureSticksAndEndsTheRange) {
  const uint8_t bytes[] = {0x01, 0x02, 0x03, 0xe5, 0x8e, 0x26, 'x', 0};
  DwarfCursor c(bytes, bytes + sizeof(bytes));
  EXPECT_EQ(c.Fixed(2), 0x0201u);
  EXPECT_EQ(c.U8(), 3u);
  EXPECT_EQ(c.Uleb(), 624485u);
  EXPECT_STREQ(c.CStr(), "x");
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.U8(), 0u);
  EXPECT_FALSE(c.ok());
  DwarfCursor d(bytes, bytes + 4);
  d.Skip(5);
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.left(), 0u) << "a failed cursor reads nothing more";
}

TEST(ParseHex, AcceptsDigitsWithOrWithoutPrefix) {
  EXPECT_EQ(ParseHex("ffffffff81000000"), 0xffffffff81000000u);
  EXPECT_EQ(ParseHex("0xffffffffc0a01000"), 0xffffffffc0a01000u);
  EXPECT_EQ(ParseHex("0X1F"), 0x1fu);
  EXPECT_EQ(ParseHex("DEADbeef"), 0xdeadbeefu);
  EXPECT_EQ(ParseHex("0"), 0u);
  EXPECT_EQ(ParseHex("0x0"), 0u);
  EXPECT_EQ(ParseHex("ffffffffffffffff"), UINT64_MAX);
}

TEST(ParseHex, RefusesEmptyLonePrefixAndJunk) {
  EXPECT_EQ(ParseHex(""), std::nullopt);
  EXPECT_EQ(ParseHex("0x"), std::nullopt);
  EXPECT_EQ(ParseHex("0X"), std::nullopt);
  EXPECT_EQ(ParseHex("12g4"), std::nullopt);
  EXPECT_EQ(ParseHex("1234 "), std::nullopt);  // trailing junk
  EXPECT_EQ(ParseHex(" 1234"), std::nullopt);
  EXPECT_EQ(ParseHex("1234\n"), std::nullopt);
  EXPECT_EQ(ParseHex("-1"), std::nullopt);
  EXPECT_EQ(ParseHex("+1"), std::nullopt);
  EXPECT_EQ(ParseHex("0x0x1"), std::nullopt);
  EXPECT_EQ(ParseHex(std::string_view("12\0"
                                      "4",
                                      4)),
            std::nullopt);
}

TEST(ParseHex, RefusesOverflowRatherThanWrapping) {
  EXPECT_EQ(ParseHex("10000000000000000"), std::nullopt);  // 2^64
  EXPECT_EQ(ParseHex("0x1ffffffffffffffff"), std::nullopt);
  EXPECT_EQ(ParseHex("00000000000000001"), std::nullopt);  // 17 digits: over the 16 a u64 prints
}

TEST(ParseHex, PrefixPolicy) {
  EXPECT_EQ(ParseHex("0x10", HexPrefix::kNone), std::nullopt);
  EXPECT_EQ(ParseHex("10", HexPrefix::kNone), 0x10u);
  EXPECT_EQ(ParseHex("10", HexPrefix::kRequired), std::nullopt);
  EXPECT_EQ(ParseHex("0x10", HexPrefix::kRequired), 0x10u);
  // Bare digits starting "0" are not a prefix: "0a" is 10.
  EXPECT_EQ(ParseHex("0a", HexPrefix::kNone), 0xau);
}

TEST(ParseHex, IsUsableAtCompileTime) { static_assert(ParseHex("0x2a") == 42); }

TEST(HexDigitValue, BothCases) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  EXPECT_EQ(HexDigitValue('g'), -1);
  EXPECT_EQ(HexDigitValue('x'), -1);
}

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

TEST(UniqueFd, ClosesOnDestruction) {
  int raw;
  {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd);
    raw = fd.get();
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, MoveTransfersOwnershipAndClosesOnce) {
  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(b.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
  UniqueFd& same = c;   // (through a reference: compilers warn about a literal self-move)
  c = std::move(same);  // self-move keeps it
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
  c.Reset();
  EXPECT_FALSE(IsOpen(raw));
  EXPECT_FALSE(c.valid());
  c.Reset();  // again: nothing to close, no error
}

TEST(UniqueFd, MoveAssignClosesTheOldOne) {
  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd b(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int old_b = b.get();
  b = std::move(a);
  EXPECT_FALSE(IsOpen(old_b));
  EXPECT_TRUE(IsOpen(b.get()));
}

TEST(UniqueFd, ReleaseGivesUpOwnership) {
  int raw;
  {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    raw = fd.Release();
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_TRUE(IsOpen(raw));
  ::close(raw);
}

TEST(ByteReader, ReadsLittleAndBigEndianIntegers) {
  const std::string bytes("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  ByteReader le(bytes);
  EXPECT_EQ(le.Int<uint16_t>(), 0x0201);
  EXPECT_EQ(le.Int<uint32_t>(), 0x06050403u);
  EXPECT_EQ(le.pos(), 6u);
  ByteReader be(bytes, std::endian::big);
  EXPECT_EQ(be.Int<uint64_t>(), 0x0102030405060708u);
  EXPECT_TRUE(be.done());
  EXPECT_TRUE(be.ok());
}

TEST(ByteReader, FailsInsteadOfReadingPastTheEnd) {
  const std::string bytes("\x01\x02\x03", 3);
  ByteReader rd(bytes);
  EXPECT_EQ(rd.Int<uint16_t>(), 0x0201);
  EXPECT_EQ(rd.Int<uint32_t>(), 0u);  // 1 byte left
  EXPECT_FALSE(rd.ok());
  EXPECT_EQ(rd.error(), "truncated at byte 2");
  EXPECT_EQ(rd.pos(), 2u);           // a failed read does not move
  EXPECT_EQ(rd.Int<uint8_t>(), 0u);  // the failure sticks even for a read that would fit
  EXPECT_EQ(rd.error(), "truncated at byte 2");
}

TEST(ByteReader, BytesAndStructsAreBounded) {
  struct Pair {
    uint32_t a, b;
  };
  std::string bytes(12, '\0');
  bytes[0] = 7;
  bytes[4] = 9;
  ByteReader rd(bytes);
  Pair p = rd.Struct<Pair>();
  EXPECT_EQ(p.a, 7u);
  EXPECT_EQ(p.b, 9u);
  EXPECT_EQ(rd.Bytes(4).size(), 4u);
  EXPECT_TRUE(rd.ok());
  EXPECT_EQ(rd.Bytes(1), "");
  EXPECT_FALSE(rd.ok());
  ByteReader huge(bytes);
  EXPECT_EQ(huge.Bytes(SIZE_MAX), "");  // no overflow in the bounds check
  EXPECT_FALSE(huge.ok());
}

TEST(ByteReader, LengthPrefixedStringsAndCounts) {
  std::string bytes(
      "\x03\x00\x00\x00"
      "abc"
      "\xff\xff\xff\x7f",
      11);
  ByteReader rd(bytes);
  EXPECT_EQ(rd.Str(16), "abc");
  EXPECT_EQ(rd.Count(1), 0u);  // claims 2^31 elements with 0 bytes left
  EXPECT_FALSE(rd.ok());
  EXPECT_EQ(rd.error(), "count out of bounds at byte 11");

  ByteReader too_long(
      std::string_view("\x03\x00\x00\x00"
                       "abc",
                       7));
  EXPECT_EQ(too_long.Str(2), "");  // over the caller's maximum
  EXPECT_FALSE(too_long.ok());
}

TEST(SymbolType, TextIsTTAndCodeAddsWeakAndIndirect) {
  for (char c : std::string_view("tT")) EXPECT_TRUE(IsTextSymbolType(c)) << c;
  for (char c : std::string_view("wWiDdBbRrAUuvV?")) EXPECT_FALSE(IsTextSymbolType(c)) << c;
  for (char c : std::string_view("tTwWi")) EXPECT_TRUE(IsCodeSymbolType(c)) << c;
  for (char c : std::string_view("DdBbRrAUuvV?")) EXPECT_FALSE(IsCodeSymbolType(c)) << c;
  EXPECT_FALSE(IsCodeSymbolType('\0'));
  EXPECT_EQ(SqlTypeList(kTextSymbolTypes), "('t','T')");
  EXPECT_EQ(SqlTypeList(kCodeSymbolTypes), "('t','T','w','W','i')");
}

// PrivateFileBatch: nothing at the paths until Commit, everything there (private, whole) after it;
// a write that fails leaves nothing; a batch never committed leaves no temporary file behind.
TEST(PrivateFileBatch, InstallsTogetherOnCommitAndLeavesNothingOtherwise) {
  symdex::testing::TempDir d;
  auto bytes = [](std::string text) {
    return [text](int fd) -> absl::Status {
      return ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size())
                 ? absl::OkStatus()
                 : absl::InternalError("short write");
    };
  };
  auto exists = [](const std::string& p) { return ::access(p.c_str(), F_OK) == 0; };
  auto listing = [&] { return symdex::testing::RunCommand("ls -A '" + d.path() + "/maps'").out; };
  {
    PrivateFileBatch batch(".tmp.", "test-temp", "test-installed");
    ASSERT_TRUE(batch.Write(d / "maps/a", bytes("alpha")).ok());
    ASSERT_TRUE(batch.Write(d / "maps/b", bytes("beta")).ok());
    EXPECT_FALSE(batch.Write(d / "maps/c", [](int) { return absl::DataLossError("the worker died"); }).ok());
    EXPECT_FALSE(exists(d / "maps/a"));
    EXPECT_FALSE(exists(d / "maps/c"));
    auto done = batch.Commit();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].first, d / "maps/a");
    EXPECT_TRUE(done[0].second.ok()) << done[0].second;
    EXPECT_TRUE(done[1].second.ok()) << done[1].second;
  }
  EXPECT_EQ(ReadFileBounded(d / "maps/a").value_or(""), "alpha");
  EXPECT_EQ(ReadFileBounded(d / "maps/b").value_or(""), "beta");
  EXPECT_EQ(listing(), "a\nb\n");  // no temporary file, no c
  struct stat st;
  ASSERT_EQ(::stat((d / "maps/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, kPrivateFileMode);
  {
    PrivateFileBatch abandoned(".tmp.", "test-temp", "test-installed");
    ASSERT_TRUE(abandoned.Write(d / "maps/a", bytes("changed")).ok());
  }
  EXPECT_EQ(ReadFileBounded(d / "maps/a").value_or(""), "alpha");
  EXPECT_EQ(listing(), "a\nb\n");
}

TEST(SharedText, ReadsAsItsStringAndSharesRecentValues) {
  SharedText none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.str(), "");
  EXPECT_TRUE(SharedText("").empty());  // "" is the empty text, as a NULL column reads back

  const std::string built = std::string(".init") + ".text";
  SharedText a(".init.text"), b(built), c = a;
  EXPECT_EQ(a, ".init.text");
  EXPECT_EQ(a.size(), 10u);
  EXPECT_STREQ(a.c_str(), ".init.text");
  EXPECT_EQ(a, b);
  EXPECT_EQ(&a.str(), &b.str());  // one copy for two values made one after the other
  EXPECT_EQ(&a.str(), &c.str());
  EXPECT_NE(a, SharedText(".text"));
  EXPECT_LT(SharedText(".data"), a);
  EXPECT_EQ(fmt::format("[{}]", a), "[.init.text]");

  // Many distinct values: each reads back as itself (the recent-value table is bounded and
  // recycled; nothing it let go of is still read).
  std::vector<SharedText> many;
  for (int i = 0; i < 1000; ++i) many.emplace_back(".text." + std::to_string(i % 100));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(many[static_cast<size_t>(i)], ".text." + std::to_string(i % 100));

  // Copies outlive the original and cross threads; moved-from is empty.
  SharedText moved = std::move(c);
  EXPECT_TRUE(c.empty());  // NOLINT: a moved-from value is specified here
  std::vector<std::thread> threads;
  std::vector<std::vector<SharedText>> made(4);
  for (size_t t = 0; t < made.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) made[t].push_back(i % 2 ? moved : SharedText(".exit.text"));
    });
  }
  for (auto& th : threads) th.join();
  many.clear();
  a = SharedText();
  b = none;
  for (const auto& v : made) {
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], i % 2 ? ".init.text" : ".exit.text");
  }
}

// Every item worked on once, taken in order, no worker more than `ahead` past the last taken;
// Stop ends the claims.
TEST(OrderedWindow, TakesInOrderWithTheWorkersABoundedWayAhead) {
  constexpr size_t kItems = 500, kAhead = 6;
  OrderedWindow w(kItems, kAhead);
  std::vector<std::atomic<int>> worked(kItems);
  std::atomic<size_t> taken{0};
  std::atomic<bool> too_far{false};
  auto worker = [&] {
    for (size_t i; (i = w.Claim()) != OrderedWindow::kNone;) {
      if (i >= taken.load() + kAhead) too_far = true;
      ++worked[i];
      if (i % 7 == 0) std::this_thread::yield();
      w.Done(i);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) pool.emplace_back(worker);
  std::vector<size_t> order;
  for (size_t i = 0; i < kItems; ++i) {
    w.WaitDone(i);
    EXPECT_EQ(worked[i].load(), 1) << i;
    order.push_back(i);
    taken = i + 1;
    w.Taken(i);
  }
  for (auto& t : pool) t.join();
  EXPECT_FALSE(too_far);
  EXPECT_EQ(order.size(), kItems);

  // Stopped with items left: the workers' claims end, the taker stops where it was.
  OrderedWindow stopped(100, 2);
  size_t claimed = 0;
  std::thread one([&] {
    for (size_t i; (i = stopped.Claim()) != OrderedWindow::kNone;) {
      ++claimed;
      stopped.Done(i);
    }
  });
  stopped.WaitDone(0);
  stopped.Taken(0);
  stopped.WaitDone(1);
  stopped.Stop();
  one.join();
  EXPECT_LE(claimed, 3u) << "no claim past the window, none after the stop";
}

}  // namespace
}  // namespace symdex
