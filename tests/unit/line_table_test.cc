// ReadLineTable against its oracle, libdw: for every unit of the fixture kernel (DWARF 4 and 5)
// and of the Debian vmlinux (when the corpus is fetched), the same file table, the same rows in
// the same order, and dwarf_getsrc_die's answer for every row's address and its neighbours.
#include "server/debuginfo/dwarf/line_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "server/common/sanitizer.h"
#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/symbolize/addr_map.h"
#include "server/debuginfo/worker/worker_protocol.h"
#include "tests/unit/dwarf_rows.h"
#include "tests/unit/kernel_fixture.h"

namespace symdex::debuginfo {
namespace {

using Clock = std::chrono::steady_clock;

std::string CorpusVmlinux() {
  return symdex::testing::DebianDbgCorpusFile("usr/lib/debug/boot/vmlinux-6.1.0-57-cloud-amd64");
}

struct Compared {
  size_t units = 0, rows = 0, files = 0, lookups = 0;
};

std::string Str(const char* s) { return s ? s : "(null)"; }

// Compares every `stride`-th unit of `path`; all of them must be read by ReadLineTable.
void CompareWithLibdw(const std::string& path, size_t stride, Compared& n) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  Dwarf* dbg = dwarf_begin(fd, DWARF_C_READ);
  ASSERT_NE(dbg, nullptr) << path;
  auto sections = LinkedLineSections(dbg);
  ASSERT_TRUE(sections.ok()) << sections.status();
  Dwarf_Off off = 0, next = 0;
  size_t header = 0;
  for (size_t unit = 0; dwarf_nextcu(dbg, off, &next, &header, nullptr, nullptr, nullptr) == 0; ++unit, off = next) {
    if (unit % stride != 0) continue;
    Dwarf_Die cu;
    ASSERT_NE(dwarf_offdie(dbg, off + header, &cu), nullptr);
    Dwarf_Lines* lines = nullptr;
    size_t nlines = 0;
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    const bool libdw_ok = dwarf_getsrclines(&cu, &lines, &nlines) == 0 && dwarf_getsrcfiles(&cu, &files, &nfiles) == 0;
    auto ours = ReadUnitLineTable(*sections, &cu);
    ASSERT_EQ(ours.ok(), libdw_ok) << path << " unit at 0x" << std::hex << off << ": "
                                   << (ours.ok() ? "libdw failed" : ours.status().ToString());
    if (!libdw_ok) continue;
    ++n.units;
    ASSERT_EQ(ours->files.size(), nfiles) << "unit at 0x" << std::hex << off;
    for (size_t i = 0; i < nfiles; ++i) {
      ASSERT_EQ(ours->FilePath(static_cast<uint32_t>(i)).value_or("(null)"),
                Str(dwarf_filesrc(files, i, nullptr, nullptr)))
          << "file " << i;
      ++n.files;
    }
    ASSERT_EQ(ours->rows.size(), nlines) << "unit at 0x" << std::hex << off;
    for (size_t i = 0; i < nlines; ++i) {
      Dwarf_Line* l = dwarf_onesrcline(lines, i);
      const LineRow& r = ours->rows[i];
      Dwarf_Addr addr = 0;
      int line = 0, col = 0;
      bool stmt = false, end = false;
      dwarf_lineaddr(l, &addr);
      dwarf_lineno(l, &line);
      dwarf_linecol(l, &col);
      dwarf_linebeginstatement(l, &stmt);
      dwarf_lineendsequence(l, &end);
      const char* src = dwarf_linesrc(l, nullptr, nullptr);
      ASSERT_TRUE(r.addr == addr && r.line == line && r.column == col && r.is_stmt == stmt && r.end_sequence == end &&
                  ours->FilePath(r.file).value_or("(null)") == Str(src))
          << "unit at 0x" << std::hex << off << " row " << std::dec << i << ": ours 0x" << std::hex << r.addr
          << std::dec << " " << ours->FilePath(r.file).value_or("(null)") << ":" << r.line << ":" << r.column
          << " stmt " << r.is_stmt << " end " << r.end_sequence << "; libdw 0x" << std::hex << addr << std::dec << " "
          << Str(src) << ":" << line << ":" << col << " stmt " << stmt << " end " << end;
      ++n.rows;
      for (Dwarf_Addr probe : {addr - 1, addr, addr + 1}) {
        Dwarf_Line* want = dwarf_getsrc_die(&cu, probe);
        const LineRow* got = ours->RowFor(probe);
        ASSERT_EQ(got != nullptr, want != nullptr) << "getsrc_die at 0x" << std::hex << probe;
        if (want == nullptr) continue;
        Dwarf_Addr wa = 0;
        int wl = 0, wc = 0;
        dwarf_lineaddr(want, &wa);
        dwarf_lineno(want, &wl);
        dwarf_linecol(want, &wc);
        ASSERT_TRUE(got->addr == wa && got->line == wl && got->column == wc &&
                    ours->FilePath(got->file).value_or("(null)") == Str(dwarf_linesrc(want, nullptr, nullptr)))
            << "getsrc_die at 0x" << std::hex << probe;
        ++n.lookups;
      }
    }
  }
  dwarf_end(dbg);
  close(fd);
}

class LineTableTest : public ::testing::TestWithParam<int> {};

TEST_P(LineTableTest, EveryUnitOfTheFixtureKernelAsLibdwReadsIt) {
  symdex::testing::KernelFixture fx(GetParam());
  Compared n;
  CompareWithLibdw(fx.vmlinux, 1, n);
  EXPECT_GE(n.units, 4u);
  EXPECT_GT(n.rows, 50u);
  EXPECT_GT(n.lookups, n.rows);
}

INSTANTIATE_TEST_SUITE_P(Dwarf, LineTableTest, ::testing::Values(4, 5));

TEST(LineTableCorpusTest, EveryUnitOfTheDebianVmlinuxAsLibdwReadsIt) {
  const std::string vmlinux = CorpusVmlinux();
  if (vmlinux.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
  // Sanitized, every 16th unit (still ~135 units, ~260k rows); otherwise all 2,172.
  const size_t stride = kAddressSanitizer ? 16 : 1;
  Compared n;
  CompareWithLibdw(vmlinux, stride, n);
  EXPECT_GT(n.units, 2000u / stride);
  std::printf("compared %zu units, %zu files, %zu rows, %zu getsrc_die lookups\n", n.units, n.files, n.rows, n.lookups);
  if (kAddressSanitizer) return;
  // For the record (not asserted): reading every unit's table, each reader on a fresh handle.
  auto time_all = [&](bool libdw) {
    const int fd = open(vmlinux.c_str(), O_RDONLY | O_CLOEXEC);
    Dwarf* dbg = dwarf_begin(fd, DWARF_C_READ);
    auto sections = LinkedLineSections(dbg);
    const auto t0 = Clock::now();
    size_t rows = 0;
    Dwarf_Off off = 0, next = 0;
    size_t header = 0;
    for (; dwarf_nextcu(dbg, off, &next, &header, nullptr, nullptr, nullptr) == 0; off = next) {
      Dwarf_Die cu;
      if (dwarf_offdie(dbg, off + header, &cu) == nullptr) continue;
      if (libdw) {
        Dwarf_Lines* lines;
        size_t nl = 0;
        if (dwarf_getsrclines(&cu, &lines, &nl) == 0) rows += nl;
      } else if (auto t = ReadUnitLineTable(*sections, &cu); t.ok()) {
        rows += t->rows.size();
      }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    dwarf_end(dbg);
    close(fd);
    EXPECT_EQ(rows, n.rows);
    return s;
  };
  const double libdw_s = time_all(true), ours_s = time_all(false);
  std::printf("all line tables: libdw dwarf_getsrclines %.3f s, ReadUnitLineTable %.3f s (%.1fx)\n", libdw_s, ours_s,
              libdw_s / ours_s);
}

// The whole Debian vmlinux's address map: the same bytes with the line tables from either reader.
TEST(LineTableCorpusTest, TheDebianAddressMapIsTheSameFromEitherReader) {
  const std::string vmlinux = CorpusVmlinux();
  if (vmlinux.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
  if (kAddressSanitizer) GTEST_SKIP() << "two whole-kernel maps: the release build runs this";
  AddrMapStats fast_stats, libdw_stats;
  const auto t0 = Clock::now();
  auto fast = BuildAddrMap(vmlinux, 2, &fast_stats);
  const auto t1 = Clock::now();
  ::setenv("SYMDEX_LINE_READER", "libdw", 1);
  auto libdw = BuildAddrMap(vmlinux, 2, &libdw_stats);
  ::unsetenv("SYMDEX_LINE_READER");
  const auto t2 = Clock::now();
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(libdw.ok()) << libdw.status();
  EXPECT_EQ(fast_stats.units_fast_lines, fast_stats.units);
  EXPECT_EQ(libdw_stats.units_fast_lines, 0u);
  EXPECT_TRUE(*fast == *libdw) << "maps differ (" << fast->size() << " vs " << libdw->size() << " bytes)";
  std::printf("address map, 2 threads: line tables by ReadLineTable %.2f s, by libdw %.2f s\n",
              std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count());
}

// The whole Debian vmlinux's DWARF index (functions' declaration files and entry lines, every
// text symbol's line): the same rows with the line tables from either reader.
TEST(LineTableCorpusTest, TheDebianDwarfIndexIsTheSameFromEitherReader) {
  const std::string vmlinux = CorpusVmlinux();
  if (vmlinux.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
  if (kAddressSanitizer) GTEST_SKIP() << "two whole-kernel indexes: the release build runs this";
  size_t fast_units = 0, libdw_units = 99;
  const auto t0 = Clock::now();
  auto fast = IndexDwarfFile(vmlinux, {.jobs = 2, .units_fast_lines = &fast_units});
  const auto t1 = Clock::now();
  ::setenv("SYMDEX_LINE_READER", "libdw", 1);
  auto libdw = IndexDwarfFile(vmlinux, {.jobs = 2, .units_fast_lines = &libdw_units});
  ::unsetenv("SYMDEX_LINE_READER");
  const auto t2 = Clock::now();
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(libdw.ok()) << libdw.status();
  EXPECT_EQ(fast_units, fast->units.size());
  EXPECT_EQ(libdw_units, 0u);
  EXPECT_GT(fast->symbol_lines.size(), 40000u);
  EXPECT_TRUE(symdex::testing::EncodedRows(*fast) == symdex::testing::EncodedRows(*libdw));
  std::printf("DWARF index, 2 threads: line tables by ReadLineTable %.2f s, by libdw %.2f s\n",
              std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count());
}

// Damage the reader meets: each is an error (the callers then ask libdw), never a crash or a
// read past the section.
TEST(LineTableTest, DamagedProgramsAreErrorsNotReadsPastTheEnd) {
  // A minimal DWARF 4 table: header, no dirs, one file "a.c", then set_address + copy + end.
  std::string t;
  auto u8 = [&](unsigned v) { t.push_back(static_cast<char>(v)); };
  auto u16 = [&](unsigned v) { u8(v & 0xff), u8(v >> 8); };
  auto u32 = [&](uint32_t v) { u16(v & 0xffff), u16(v >> 16); };
  u32(0);  // unit_length, patched below
  u16(4);  // version
  u32(0);  // header_length, patched below
  const size_t header_start = t.size();
  for (unsigned v : {1u, 1u, 1u, static_cast<unsigned>(static_cast<uint8_t>(-5)), 14u, 13u}) u8(v);
  for (unsigned v : {0u, 1u, 1u, 1u, 1u, 0u, 0u, 0u, 1u, 0u, 0u, 1u}) u8(v);
  u8(0);  // no include directories
  t += "a.c";
  u8(0), u8(0), u8(0), u8(0);  // dir, mtime, length
  u8(0);                       // end of files
  const size_t header_len = t.size() - header_start;
  u8(0), u8(9), u8(DW_LNE_set_address);
  for (int i = 0; i < 8; ++i) u8(i == 0 ? 0x10 : 0);
  u8(DW_LNS_copy);
  u8(0), u8(1), u8(DW_LNE_end_sequence);
  auto patch32 = [](std::string& s, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  patch32(t, 0, static_cast<uint32_t>(t.size() - 4));
  patch32(t, 6, static_cast<uint32_t>(header_len));

  auto read = [](const std::string& bytes) {
    LineSections s;
    s.debug_line = bytes;
    return ReadLineTable(s, 0, "/build", 8);
  };
  auto good = read(t);
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->rows.size(), 2u);
  EXPECT_EQ(good->rows[0].addr, 0x10u);
  EXPECT_EQ(good->FilePath(1).value_or(""), "/build/a.c");
  EXPECT_EQ(good->FilePath(good->rows[0].file).value_or(""), "/build/a.c");

  // Every truncation, with the unit length saying so: nothing read past the cut (ASan), an error
  // or a prefix of the rows.
  for (size_t cut = 4; cut < t.size(); ++cut) {
    std::string shorter = t.substr(0, cut);
    if (cut >= 10) patch32(shorter, 0, static_cast<uint32_t>(cut - 4));
    auto r = read(shorter);
    EXPECT_TRUE(!r.ok() || r->rows.size() <= 2) << "cut at " << cut;
    if (cut < 10 + header_len) {
      EXPECT_FALSE(r.ok()) << "a header cut at " << cut;
    }
  }
  std::string bad_header = t;
  patch32(bad_header, 6, static_cast<uint32_t>(header_len + 1));
  EXPECT_FALSE(read(bad_header).ok()) << "header_length off by one";
  std::string bad_version = t;
  bad_version[4] = 7;
  EXPECT_FALSE(read(bad_version).ok());
  std::string bad_dir = t;
  bad_dir[header_start + 6 + 12 + 1 + 4] = 1;  // a.c's directory index 1: there is only directory 0
  EXPECT_FALSE(read(bad_dir).ok());
  EXPECT_FALSE(ReadLineTable(LineSections{t, {}, {}}, t.size(), nullptr, 8).ok()) << "offset past the section";
}

}  // namespace
}  // namespace symdex::debuginfo
