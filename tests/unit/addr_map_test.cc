// Address maps (server/debuginfo/symbolize/addr_map.h) against the libdw walk they replace, on the
// miniature kernel: every byte of its text, DWARF 4 and 5; and what a damaged file does.
#include "server/debuginfo/symbolize/addr_map.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>

#include "server/debuginfo/symbolize/symbolizer.h"
#include "tests/unit/kernel_fixture.h"

namespace symdex::debuginfo {
namespace {

using symdex::testing::KernelFixture;
using symdex::testing::RunCommand;
using symdex::testing::Slurp;
using symdex::testing::WriteFile;

// [lowest text symbol, end of the highest one + 64).
std::pair<uint64_t, uint64_t> TextRange(const std::string& elf) {
  auto r = RunCommand("nm -n -S --defined-only '" + elf + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string addr, size, type, name;
    f >> addr >> size >> type;
    if (!(f >> name)) {  // no size column
      name = type;
      type = size;
      size = "0";
    }
    if (type != "t" && type != "T") continue;
    uint64_t a = std::stoull(addr, nullptr, 16), s = std::stoull(size, nullptr, 16);
    lo = std::min(lo, a);
    hi = std::max(hi, a + s);
  }
  return {lo, hi + 64};
}

// Owns a copy of the bytes with the alignment an mmap gives.
struct Aligned {
  explicit Aligned(const std::string& b) : words((b.size() + 7) / 8), size(b.size()) {
    std::memcpy(words.data(), b.data(), b.size());
  }
  std::string_view view() const { return {reinterpret_cast<const char*>(words.data()), size}; }
  char* data() { return reinterpret_cast<char*>(words.data()); }
  std::vector<uint64_t> words;
  size_t size;
};

class AddrMapTest : public ::testing::TestWithParam<int> {
 protected:
  KernelFixture fx_{GetParam()};
};

TEST_P(AddrMapTest, AnswersEveryTextAddressExactlyAsTheLibdwWalk) {
  AddrMapStats stats;
  auto bytes = BuildAddrMap(fx_.vmlinux, 1, &stats);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  Aligned buf(*bytes);
  auto map = AddrMap::FromBytes(buf.view());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_GT(stats.units, 2u);
  EXPECT_GT(stats.nodes, stats.spans);  // inlined frames exist

  auto [lo, hi] = TextRange(fx_.vmlinux);
  ASSERT_LT(lo, hi);
  Symbolizer sym;
  size_t with_line = 0, inlined = 0, checked = 0;
  for (uint64_t a = lo - 16; a < hi; ++a) {
    auto want = sym.Symbolize(fx_.vmlinux, a);
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<Frame> got = map->FramesAt(a);
    ASSERT_EQ(got, *want) << std::hex << "at 0x" << a << ": " << got.size() << " vs " << want->size() << " frames";
    with_line += !got.empty() && got[0].line > 0;
    inlined += got.size() > 1;
    ++checked;
  }
  // Not vacuous: most bytes have a line, and some sit in inlined code.
  EXPECT_GT(with_line, checked / 2);
  EXPECT_GT(inlined, 0u);
  // Far away: nothing, as libdw says.
  EXPECT_TRUE(map->FramesAt(0).empty());
  EXPECT_TRUE(map->FramesAt(UINT64_MAX).empty());
}

TEST_P(AddrMapTest, TheSameBytesWhateverTheThreadCount) {
  auto one = BuildAddrMap(fx_.vmlinux, 1);
  auto four = BuildAddrMap(fx_.vmlinux, 4);
  ASSERT_TRUE(one.ok() && four.ok());
  EXPECT_EQ(*one, *four);
}

// The line tables read by ReadLineTable (line_table.h) or by libdw: the same map, byte for byte.
TEST_P(AddrMapTest, TheSameBytesFromEitherLineReader) {
  AddrMapStats fast_stats, libdw_stats;
  auto fast = BuildAddrMap(fx_.vmlinux, 2, &fast_stats);
  ::setenv("SYMDEX_LINE_READER", "libdw", 1);
  auto libdw = BuildAddrMap(fx_.vmlinux, 2, &libdw_stats);
  ::unsetenv("SYMDEX_LINE_READER");
  ASSERT_TRUE(fast.ok() && libdw.ok());
  EXPECT_EQ(fast_stats.units_fast_lines, fast_stats.units);  // every unit took the fast path
  EXPECT_EQ(libdw_stats.units_fast_lines, 0u);
  EXPECT_GT(fast_stats.lines, 0u);
  EXPECT_EQ(*fast, *libdw);
}

// Bounded memory: a handle recycled after every unit, parts merged as they finish, the same bytes.
TEST_P(AddrMapTest, TheSameBytesWhenEveryUnitRecyclesTheLibdwHandle) {
  AddrMapStats unbounded_stats, bounded_stats;
  auto unbounded = BuildAddrMap(fx_.vmlinux, 1, &unbounded_stats, UINT64_MAX);
  auto bounded = BuildAddrMap(fx_.vmlinux, 2, &bounded_stats, 1);
  ASSERT_TRUE(unbounded.ok() && bounded.ok());
  EXPECT_EQ(unbounded_stats.handle_recycles, 0u);
  EXPECT_GE(bounded_stats.handle_recycles, bounded_stats.units);
  EXPECT_GT(bounded_stats.lines, 0u);
  EXPECT_EQ(*bounded, *unbounded);
}

// A module's map: libdwfl's relocated layout carried in the map, every byte of every code
// section answered as SymbolizeInSection's libdwfl walk answers it.
TEST_P(AddrMapTest, AModuleMapAnswersEveryCodeByteAsTheLibdwflWalk) {
  AddrMapStats stats;
  auto bytes = BuildAddrMap(fx_.module, 1, &stats);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  Aligned buf(*bytes);
  auto map = AddrMap::FromBytes(buf.view());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_TRUE(map->relocatable());
  auto id = RunCommand("readelf -n '" + fx_.module + "' | awk '/Build ID/ {print $3}'");
  EXPECT_EQ(map->BuildIdHex() + "\n", id.out);
  // Code sections and their sizes, from the section headers.
  auto r = RunCommand("readelf -SW '" + fx_.module +
                      "' | sed 's/^ *\\[ *[0-9]*\\]//' | awk '$2 == \"PROGBITS\" && $7 ~ /X/ {print $1, $5}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  Symbolizer sym;
  size_t sections = 0, with_line = 0, checked = 0;
  for (std::string name, size; in >> name >> size;) {
    ++sections;
    ASSERT_TRUE(map->SectionBase(name).has_value()) << name;
    const uint64_t n = std::stoull(size, nullptr, 16);
    for (uint64_t off = 0; off < n + 16; ++off) {
      auto want = sym.SymbolizeInSection(fx_.module, "", name, off);  // no build-ID: libdwfl
      ASSERT_TRUE(want.ok()) << want.status();
      std::vector<Frame> got = map->FramesAt(*map->SectionBase(name) + off);
      ASSERT_EQ(got, *want) << name << "+0x" << std::hex << off << ": " << got.size() << " vs " << want->size();
      with_line += !got.empty() && got[0].line > 0;
      ++checked;
    }
  }
  EXPECT_GE(sections, 2u) << r.out;  // .text and .text.unlikely at least
  EXPECT_GT(with_line, checked / 2);
  EXPECT_FALSE(map->SectionBase(".no-such-section").has_value());
  // Through the Symbolizer with the map in its directory: the same answers, and a section the
  // module lacks is NotFound as on the libdwfl path.
  const std::string dir = ::testing::TempDir() + "/modmaps-" + std::to_string(GetParam());
  ASSERT_TRUE(WriteAddrMapFile(AddrMapPath(dir, map->BuildIdHex()), *bytes).ok());
  Symbolizer with_map;
  with_map.SetAddrMapDir(dir);
  for (uint64_t off : {0, 1, 5, 17}) {
    auto a = with_map.SymbolizeInSection("/nonexistent/only-the-map-is-read.ko", map->BuildIdHex(), ".text", off);
    auto b = sym.SymbolizeInSection(fx_.module, "", ".text", off);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(*a, *b);
  }
  EXPECT_EQ(with_map.SymbolizeInSection(fx_.module, map->BuildIdHex(), ".nope", 0).status().code(),
            absl::StatusCode::kNotFound);
  // A linked file's map is not used for a module (and the other way round).
  auto linked = BuildAddrMap(fx_.vmlinux);
  ASSERT_TRUE(linked.ok());
  Aligned lb(*linked);
  EXPECT_FALSE(AddrMap::FromBytes(lb.view())->relocatable());
}

// A vmlinux map written before module maps (format 1: the header one SectionRef shorter, no
// sections table) is still read, as a linked file's map, with the same answers.
TEST_P(AddrMapTest, AVersionOneMapIsStillRead) {
  auto bytes = BuildAddrMap(fx_.vmlinux);
  ASSERT_TRUE(bytes.ok());
  std::string v1 = *bytes;  // the data stays at its offsets; the header's last SectionRef is padding
  addrmap::Header h;
  std::memcpy(&h, v1.data(), sizeof h);
  ASSERT_EQ(h.sections[addrmap::kElfSections].count, 0u);
  h.version = addrmap::kVersion1;
  h.header_size = static_cast<uint32_t>(addrmap::kHeaderV1Size);
  h.sections[addrmap::kElfSections] = addrmap::SectionRef{};
  std::memcpy(v1.data(), &h, sizeof h);
  Aligned a(*bytes), b(v1);
  auto v2map = AddrMap::FromBytes(a.view());
  auto v1map = AddrMap::FromBytes(b.view());
  ASSERT_TRUE(v1map.ok()) << v1map.status();
  EXPECT_FALSE(v1map->relocatable());
  EXPECT_EQ(v1map->BuildIdHex(), v2map->BuildIdHex());
  auto [lo, hi] = TextRange(fx_.vmlinux);
  for (uint64_t x = lo; x < hi; ++x) ASSERT_EQ(v1map->FramesAt(x), v2map->FramesAt(x)) << std::hex << x;
  // Version 1 with a version-2 header size, or a version never written: refused.
  h.header_size = sizeof(addrmap::Header);
  std::memcpy(v1.data(), &h, sizeof h);
  Aligned c(v1);
  EXPECT_FALSE(AddrMap::FromBytes(c.view()).ok());
  h.version = 7;
  std::memcpy(v1.data(), &h, sizeof h);
  Aligned d(v1);
  EXPECT_NE(AddrMap::FromBytes(d.view()).status().message().find("format version 7"), std::string::npos);
}

TEST_P(AddrMapTest, FilesAreCheckedForBuildIdSizeAndFormat) {
  auto bytes = BuildAddrMap(fx_.vmlinux);
  ASSERT_TRUE(bytes.ok());
  Aligned buf(*bytes);
  const std::string id = AddrMap::FromBytes(buf.view())->BuildIdHex();
  ASSERT_EQ(id.size(), 40u);
  const std::string dir = fx_.dir / "maps";
  const std::string path = AddrMapPath(dir, id);
  ASSERT_TRUE(WriteAddrMapFile(path, *bytes).ok());
  auto ok = MappedAddrMap::Open(path, id);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->map().size_bytes(), bytes->size());

  auto missing = MappedAddrMap::Open(AddrMapPath(dir, std::string(40, 'a')), std::string(40, 'a'));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  auto other = MappedAddrMap::Open(path, std::string(40, 'b'));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("belongs to build-ID " + id), std::string::npos) << other.status();

  WriteFile(path, bytes->substr(0, bytes->size() / 2));
  auto cut = MappedAddrMap::Open(path, id);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status();

  std::string wrong = *bytes;
  wrong[0] = 'X';
  WriteFile(path, wrong);
  EXPECT_NE(MappedAddrMap::Open(path, id).status().message().find("wrong magic"), std::string::npos);

  WriteFile(path, "short");
  EXPECT_EQ(MappedAddrMap::Open(path, id).status().code(), absl::StatusCode::kInvalidArgument);
}

// Damage anywhere (header counts and offsets included) is refused or gives some answer; never a
// read outside the bytes (ASan builds check that).
TEST_P(AddrMapTest, DamagedBytesNeverReadOutsideTheMap) {
  auto bytes = BuildAddrMap(fx_.vmlinux);
  ASSERT_TRUE(bytes.ok());
  auto [lo, hi] = TextRange(fx_.vmlinux);
  std::mt19937_64 rnd(42);
  size_t accepted = 0;
  for (int round = 0; round < 400; ++round) {
    Aligned buf(*bytes);
    const int flips = 1 + static_cast<int>(rnd() % 8);
    for (int k = 0; k < flips; ++k) {
      // Half the damage in the header (where counts and offsets are), half anywhere.
      size_t at = (k % 2 == 0) ? rnd() % sizeof(addrmap::Header) : rnd() % buf.size;
      buf.data()[at] = static_cast<char>(rnd());
    }
    auto map = AddrMap::FromBytes(buf.view());
    if (!map.ok()) continue;
    ++accepted;
    for (uint64_t a = lo; a < hi; a += 1 + rnd() % 16) (void)map->FramesAt(a);
  }
  EXPECT_GT(accepted, 0u);  // some damage gets past the header checks: FramesAt's own checks ran
}

INSTANTIATE_TEST_SUITE_P(DwarfVersions, AddrMapTest, ::testing::Values(4, 5),
                         [](const auto& info) { return "dwarf" + std::to_string(info.param); });

}  // namespace
}  // namespace symdex::debuginfo
