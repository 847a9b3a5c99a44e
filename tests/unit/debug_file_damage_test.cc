// Debug files are untrusted input: damaged DWARF is an error naming the file, section and
// offset (never an empty "success"); the worker process that parses them survives crashes,
// hangs and garbage; its wire format rejects malformed responses.
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "server/common/sanitizer.h"
#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/worker/worker_client.h"
#include "server/debuginfo/worker/worker_protocol.h"
#include "tests/unit/dwarf_rows.h"
#include "tests/unit/kernel_fixture.h"

namespace symdex::debuginfo {
namespace {

using symdex::testing::KernelFixture;
using symdex::testing::Slurp;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;

struct Extent {
  size_t offset = 0, size = 0;
};

Extent SectionExtent(const std::string& path, const char* want) {
  elf_version(EV_CURRENT);
  int fd = ::open(path.c_str(), O_RDONLY);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  Extent out;
  size_t shstrndx = 0;
  elf_getshdrstrndx(elf, &shstrndx);
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name && std::string(name) == want) out = {static_cast<size_t>(sh.sh_offset), static_cast<size_t>(sh.sh_size)};
  }
  elf_end(elf);
  ::close(fd);
  return out;
}

// Copies `src` to `dst` with `n` bytes at `section`'s middle (+ `at` if given) set to `fill`.
void Damage(const std::string& src, const std::string& dst, const char* section, char fill, size_t n,
            std::optional<size_t> at = std::nullopt) {
  std::string bytes = Slurp(src);
  Extent e = SectionExtent(src, section);
  ASSERT_GT(e.size, 0u) << src << " has no " << section;
  n = std::min(n, e.size);
  size_t start = e.offset + (at ? *at : (e.size - n) / 2);
  ASSERT_LE(start + n, bytes.size());
  bytes.replace(start, n, std::string(n, fill));
  WriteFile(dst, bytes);
}

// The smallest real module from the Debian corpus, if it has been fetched.
std::string CorpusModule() {
  return symdex::testing::DebianDbgCorpusFile(
      "usr/lib/debug/lib/modules/6.1.0-57-cloud-amd64/kernel/drivers/uio/uio.ko");
}

void ExpectDamaged(const std::string& path, const std::string& section) {
  auto idx = IndexDwarfFile(path, {.jobs = 1});
  ASSERT_FALSE(idx.ok()) << path << ": indexed " << idx->functions.size() << " functions from a damaged file";
  std::string msg(idx.status().message());
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  if (!section.empty()) {
    EXPECT_NE(msg.find(section + " at 0x"), std::string::npos) << msg;
  }
}

class DamagedDwarfTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "corpus") {
      src_ = CorpusModule();
      if (src_.empty()) GTEST_SKIP() << "Debian -dbg corpus not fetched (tests/corpus/fetch-debian-kernel.sh dbg)";
    } else {
      src_ = fx_.module;
    }
    auto good = IndexDwarfFile(src_, {.jobs = 1});
    ASSERT_TRUE(good.ok()) << good.status();
    ASSERT_GT(good->functions.size(), 0u);
  }
  KernelFixture fx_{5};
  TempDir dir_;
  std::string src_;
};

TEST_P(DamagedDwarfTest, OverwrittenDebugInfoFails) {
  std::string bad = dir_ / "over.ko";
  Damage(src_, bad, ".debug_info", '\xa5', 1024);
  ExpectDamaged(bad, ".debug_info");
}

TEST_P(DamagedDwarfTest, ZeroedDebugInfoFails) {
  // Zeros read as "no more DIEs": libdw sees a short unit, so this needs the end-of-unit check.
  std::string bad = dir_ / "zero.ko";
  Damage(src_, bad, ".debug_info", '\0', GetParam() == "corpus" ? 1024 : 64);
  ExpectDamaged(bad, ".debug_info");
}

TEST_P(DamagedDwarfTest, ZeroedAbbrevFails) {
  std::string bad = dir_ / "abbrev.ko";
  Damage(src_, bad, ".debug_abbrev", '\0', SIZE_MAX, 0);
  ExpectDamaged(bad, ".debug_info");
}

TEST_P(DamagedDwarfTest, TruncatedFileFails) {
  std::string bytes = Slurp(src_);
  Extent e = SectionExtent(src_, ".debug_info");
  for (size_t len : {e.offset + e.size / 2, bytes.size() - 100}) {
    std::string bad = dir_ / ("trunc" + std::to_string(len) + ".ko");
    WriteFile(bad, bytes.substr(0, len));
    ExpectDamaged(bad, "");
  }
}

INSTANTIATE_TEST_SUITE_P(Files, DamagedDwarfTest, ::testing::Values("fixture", "corpus"));

TEST(WorkerProtocolTest, RoundTripAndRejectsGarbage) {
  KernelFixture fx(5);
  auto idx = IndexDwarfFile(fx.module, {.jobs = 1});
  ASSERT_TRUE(idx.ok()) << idx.status();
  std::string bytes = EncodeDwarfIndex(*idx);
  auto back = DecodeDwarfIndex(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EncodeDwarfIndex(*back), bytes);
  EXPECT_EQ(back->functions.size(), idx->functions.size());
  EXPECT_EQ(back->build_id, idx->build_id);

  EXPECT_FALSE(DecodeDwarfIndex(bytes.substr(0, bytes.size() - 1)).ok());  // truncated
  EXPECT_FALSE(DecodeDwarfIndex(bytes + "x").ok());                        // trailing
  // A huge count cannot make the parent allocate: it is checked against the bytes left.
  std::string huge = bytes;
  size_t sections_count = 1 + 4 + (idx->build_id ? idx->build_id->raw().size() : 0) + 1;
  huge.replace(sections_count, 4, std::string("\xff\xff\xff\x7f", 4));
  EXPECT_FALSE(DecodeDwarfIndex(huge).ok());
  // Every single-byte corruption either decodes to ids within their tables or is refused.
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::string b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0x5a);
    auto d = DecodeDwarfIndex(b);
    if (!d.ok()) continue;
    for (const auto& f : d->functions) {
      ASSERT_LT(f.cu, d->units.size());
      ASSERT_TRUE(f.decl_file == kNoFile || f.decl_file < d->files.size());
    }
  }
  EXPECT_FALSE(DecodeResponseHeader(std::string(16, 'x')).ok());
  EXPECT_FALSE(DecodeResponseHeader(EncodeResponseHeader(true, kMaxResponsePayload + 1)).ok());
}

// SIGKILLs our child `pid` and waits (up to 5 s) until it has exited: a zombie, ours to reap.
void KillAndWaitForExit(pid_t pid) {
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 500; ++i) {
    std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
    size_t paren = stat.rfind(')');
    if (paren != std::string::npos && stat.size() > paren + 2 && stat[paren + 2] == 'Z') return;
    usleep(10000);
  }
}

class WorkerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("SYMDEX_WORKER_TEST_CRASH_ON");
    unsetenv("SYMDEX_WORKER_TEST_HANG_ON");
    unsetenv("SYMDEX_WORKER_TEST_CRASH_AFTER_PART");
    unsetenv("SYMDEX_WORKER_TEST_HANG_AFTER_PART");
    unsetenv("SYMDEX_WORKER_TEST_CRASH_MAP_ON");
  }
  std::string Exe() {
    auto exe = FindWorkerExecutable();
    EXPECT_TRUE(exe.ok()) << exe.status();
    return exe.ok() ? *exe : "";
  }
  KernelFixture fx_{5};
  TempDir dir_;
};

TEST_F(WorkerTest, SameResultAsInProcess) {
  DwarfWorker w(Exe(), {});
  auto a = w.Index(fx_.module, 1);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = IndexDwarfFile(fx_.module, {.jobs = 1});
  EXPECT_EQ(symdex::testing::EncodedRows(*a), symdex::testing::EncodedRows(*b));
  auto v = w.Index(fx_.vmlinux, 2);  // the same worker, another file, threads
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(symdex::testing::EncodedRows(*v), symdex::testing::EncodedRows(*IndexDwarfFile(fx_.vmlinux, {.jobs = 2})));
}

// Index-then-map is the index Index gives and the map AddrMapInto gives, for a module (the map
// from the copy the index was read from) and for a linked file; a worker dying on the map costs
// the map only, and the next call gets a new worker.
TEST_F(WorkerTest, IndexThenMapIsTheIndexAndTheMap) {
  DwarfWorker w(Exe(), {});
  for (const std::string& file : {fx_.module, fx_.vmlinux}) {
    auto index = w.Index(file, 1);
    ASSERT_TRUE(index.ok()) << index.status();
    const std::string map_file = dir_ / "map";
    UniqueFd fd(::open(map_file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ASSERT_TRUE(w.AddrMapInto(file, 1, fd.get()).ok()) << file;
    absl::StatusOr<std::string> map = absl::UnknownError("not set");
    auto both = w.IndexThenMap(file, 1, map);
    ASSERT_TRUE(both.ok()) << both.status();
    ASSERT_TRUE(map.ok()) << map.status();
    EXPECT_EQ(symdex::testing::EncodedRows(*both), symdex::testing::EncodedRows(*index)) << file;
    EXPECT_TRUE(*map == Slurp(map_file)) << file << ": the map differs from AddrMapInto's";
    EXPECT_GT(map->size(), 100u);
  }

  const std::string crash = dir_ / "crashme.ko";
  std::filesystem::copy_file(fx_.module, crash);
  setenv("SYMDEX_WORKER_TEST_CRASH_MAP_ON", "crashme", 1);  // (a worker reads it when it starts)
  DwarfWorker crashing(Exe(), {});
  absl::StatusOr<std::string> map = absl::UnknownError("not set");
  auto index = crashing.IndexThenMap(crash, 1, map);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(symdex::testing::EncodedRows(*index), symdex::testing::EncodedRows(*w.Index(fx_.module, 1)));
  ASSERT_FALSE(map.ok());
  EXPECT_NE(std::string(map.status().message()).find("parser killed by SIGABRT"), std::string::npos) << map.status();
  auto again = crashing.IndexThenMap(fx_.module, 1, map);
  EXPECT_TRUE(again.ok() && map.ok()) << again.status() << " / " << map.status();

  // A file that cannot be indexed: no index, and so no map.
  const std::string junk = dir_ / "junk.ko";
  WriteFile(junk, "not an ELF file");
  auto bad = w.IndexThenMap(junk, 1, map);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(map.ok());
}

TEST_F(WorkerTest, CrashFailsThatFileOnlyAndTheWorkerRestarts) {
  std::string crash = dir_ / "crashme.ko";
  std::filesystem::copy_file(fx_.module, crash);
  setenv("SYMDEX_WORKER_TEST_CRASH_ON", "crashme", 1);
  DwarfWorker w(Exe(), {});
  ASSERT_TRUE(w.Index(fx_.module, 1).ok());
  pid_t first = w.pid();
  auto r = w.Index(crash, 1);
  ASSERT_FALSE(r.ok());
  std::string msg(r.status().message());
  EXPECT_NE(msg.find(crash), std::string::npos) << msg;
  EXPECT_NE(msg.find("parser killed by SIGABRT"), std::string::npos) << msg;
  auto again = w.Index(fx_.module, 1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(w.pid(), first);
}

// The hang is the worker's own (a test hook): only the timeout can end the call, and the message
// says it did. The limit is also the follow-up's, whose whole parse must fit in it on a busy
// machine under ASan: a few seconds, not one.
TEST_F(WorkerTest, HangIsKilledAtTheTimeout) {
  std::string hang = dir_ / "hangme.ko";
  std::filesystem::copy_file(fx_.module, hang);
  setenv("SYMDEX_WORKER_TEST_HANG_ON", "hangme", 1);
  WorkerLimits limits;
  limits.timeout_base_seconds = 5;
  limits.fixed_timeout = true;
  DwarfWorker w(Exe(), limits);
  auto r = w.Index(hang, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("timed out after 5 s"), std::string::npos) << r.status();
  EXPECT_TRUE(w.Index(fx_.module, 1).ok());
}

TEST_F(WorkerTest, MemoryLimitFailsTheFileNotTheCaller) {
#if SYMDEX_ASAN
  GTEST_SKIP() << "under ASan the worker sets no RLIMIT_AS (the sanitizer's shadow memory would exceed it)";
#endif
  WorkerLimits limits;
  limits.memory_base = 1 << 20;  // far below what the worker already maps
  DwarfWorker w(Exe(), limits);
  // Two threads: the second one's stack (8 MiB) is more address space than the limit leaves. (With
  // one thread the test kernel's index fits in the heap the worker already has: whether it fails
  // then depends on how much the parser allocates, not on the limit.)
  auto r = w.Index(fx_.vmlinux, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find(fx_.vmlinux), std::string::npos) << r.status();
}

// Background parsing (the address maps) runs niced, and so does a worker restarted after a
// failure; a default worker runs at its parent's priority.
TEST_F(WorkerTest, BackgroundWorkerRunsNiced) {
  errno = 0;
  const int ours = ::getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  if (ours > 19 - kBackgroundNice) GTEST_SKIP() << "this test already runs at nice " << ours;
  DwarfWorker plain(Exe(), {});
  ASSERT_TRUE(plain.Index(fx_.module, 1).ok());
  EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(plain.pid())), ours);

  WorkerLimits limits;
  limits.nice = kBackgroundNice;
  DwarfWorker background(Exe(), limits);
  ASSERT_TRUE(background.Index(fx_.module, 1).ok());
  EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(background.pid())), ours + kBackgroundNice);
  const pid_t first = background.pid();
  KillAndWaitForExit(first);
  ASSERT_TRUE(background.Index(fx_.module, 1).ok());
  ASSERT_NE(background.pid(), first);
  EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(background.pid())), ours + kBackgroundNice);
}

TEST_F(WorkerTest, KilledFromOutsideWhileIdleIsRestarted) {
  DwarfWorker w(Exe(), {});
  ASSERT_TRUE(w.Index(fx_.module, 1).ok());
  // Until it has exited (a zombie: ours to reap), as an OOM kill between two files would be.
  KillAndWaitForExit(w.pid());
  auto r = w.Index(fx_.module, 1);
  EXPECT_TRUE(r.ok()) << r.status();
}

// The index streamed in parts is the index sent in one piece; a module comes in one piece; an
// error from the caller's handler (the store failed) ends the call and the worker, and the next
// call is served by a new one.
TEST_F(WorkerTest, StreamedIndexIsTheIndex) {
  DwarfWorker w(Exe(), {});
  auto plain = w.Index(fx_.vmlinux, 2);
  ASSERT_TRUE(plain.ok()) << plain.status();
  size_t parts = 0;
  DwarfIndexSizes seen;
  auto streamed = w.IndexStream(fx_.vmlinux, 2, [&](const DwarfIndex& so_far, const DwarfIndexSizes& from) {
    ++parts;
    EXPECT_EQ(from.units, seen.units);  // each part follows the one before
    EXPECT_EQ(from.functions, seen.functions);
    seen = SizesOf(so_far);
    EXPECT_GT(seen.units, from.units);
    return absl::OkStatus();
  });
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_GE(parts, 1u);
  EXPECT_TRUE(symdex::testing::EncodedRows(*streamed) == symdex::testing::EncodedRows(*plain));

  size_t module_parts = 0;
  auto module = w.IndexStream(fx_.module, 1, [&](const DwarfIndex&, const DwarfIndexSizes&) {
    ++module_parts;
    return absl::OkStatus();
  });
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(module_parts, 0u);
  EXPECT_TRUE(symdex::testing::EncodedRows(*module) == symdex::testing::EncodedRows(*w.Index(fx_.module, 1)));

  const pid_t pid = w.pid();
  auto stopped = w.IndexStream(fx_.vmlinux, 2, [](const DwarfIndex&, const DwarfIndexSizes&) {
    return absl::InternalError("the store failed");
  });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().message(), "the store failed");
  auto again = w.Index(fx_.vmlinux, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(w.pid(), pid);
}

// A worker that dies after a part fails the file with how it died, as any crash does.
TEST_F(WorkerTest, DyingMidStreamFailsTheFile) {
  std::string crash = dir_ / "crash-mid-stream";
  std::filesystem::copy_file(fx_.vmlinux, crash);
  setenv("SYMDEX_WORKER_TEST_CRASH_AFTER_PART", "crash-mid-stream", 1);
  DwarfWorker w(Exe(), {});
  size_t parts = 0;
  auto r = w.IndexStream(crash, 2, [&](const DwarfIndex&, const DwarfIndexSizes&) {
    ++parts;
    return absl::OkStatus();
  });
  unsetenv("SYMDEX_WORKER_TEST_CRASH_AFTER_PART");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(parts, 1u);
  EXPECT_NE(std::string(r.status().message()).find("parser killed by SIGABRT"), std::string::npos) << r.status();
  EXPECT_TRUE(w.Index(fx_.module, 1).ok());
}

// A worker silent mid-stream (hanging after a part) is told to the caller once, not before the
// quiet limit has passed since that part, while the call still waits; the wall-clock limit then
// ends it. Times are taken from the part, not from the start (the worker's start-up is not
// silence); the part is timed when it reaches the test, a little after the worker's clock starts,
// hence half the quiet limit as the bound.
TEST_F(WorkerTest, SilenceMidStreamIsToldBeforeTheTimeout) {
  std::string hang = dir_ / "hang-mid-stream";
  std::filesystem::copy_file(fx_.vmlinux, hang);
  setenv("SYMDEX_WORKER_TEST_HANG_AFTER_PART", "hang-mid-stream", 1);
  WorkerLimits limits;
  limits.timeout_base_seconds = 15;
  limits.fixed_timeout = true;
  limits.stream_quiet_seconds = 2;
  DwarfWorker w(Exe(), limits);
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> part_at, told_at;
  int told = 0;
  size_t parts = 0;
  auto r = w.IndexStream(
      hang, 2,
      [&](const DwarfIndex&, const DwarfIndexSizes&) {
        ++parts;
        part_at = Clock::now();
        return absl::OkStatus();
      },
      [&] {
        ++told;
        told_at = Clock::now();
      });
  const auto returned_at = Clock::now();
  unsetenv("SYMDEX_WORKER_TEST_HANG_AFTER_PART");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("timed out after 15 s"), std::string::npos) << r.status();
  EXPECT_EQ(parts, 1u);
  EXPECT_EQ(told, 1);
  ASSERT_TRUE(part_at && told_at);
  EXPECT_GE(*told_at - *part_at, std::chrono::seconds(1)) << "told before the quiet limit";
  EXPECT_LT(*told_at, returned_at) << "told only when the call ended";
  EXPECT_TRUE(w.Index(fx_.module, 1).ok());
}

// A part where none was asked for (a plain index request), or one whose ids point past its
// tables, is refused like any other garbage.
TEST_F(WorkerTest, UnaskedOrBrokenPartsAreRefused) {
  std::string fake = dir_ / "fake-part-worker";
  // A part header (status 2) with an empty payload, to a plain request.
  WriteFile(fake, "#!/bin/sh\nhead -c 24 >/dev/null; printf 'SDWR\\2\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0'\nsleep 5\n");
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  DwarfWorker w(fake, {});
  auto r = w.Index(fx_.module, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("a part where none was asked for"), std::string::npos) << r.status();

  // A part naming a unit the index does not have: refused before the handler sees it.
  DwarfIndex bad;
  DwarfFunction f;
  f.name = "f";
  f.cu = 3;  // no units at all
  bad.functions.push_back(f);
  const std::string bytes = EncodeDwarfIndex(bad);
  WriteFile(dir_ / "part.bin", EncodePartHeader(bytes.size()) + bytes);
  std::string fake2 = dir_ / "fake-bad-part-worker";
  WriteFile(fake2, "#!/bin/sh\nhead -c 24 >/dev/null; cat '" + (dir_ / "part.bin") + "'\nsleep 5\n");
  ASSERT_EQ(::chmod(fake2.c_str(), 0755), 0);
  DwarfWorker w2(fake2, {});
  bool handled = false;
  auto r2 = w2.IndexStream(fx_.module, 1, [&](const DwarfIndex&, const DwarfIndexSizes&) {
    handled = true;
    return absl::OkStatus();
  });
  ASSERT_FALSE(r2.ok());
  EXPECT_FALSE(handled);
  EXPECT_NE(std::string(r2.status().message()).find("invalid response"), std::string::npos) << r2.status();
}

TEST_F(WorkerTest, GarbageFromTheWorkerIsRefused) {
  // A "worker" that answers with noise: /bin/sh printing bytes.
  std::string fake = dir_ / "fake-worker";
  WriteFile(fake,
            "#!/bin/sh\nhead -c 24 >/dev/null; printf 'SDWR\\0\\0\\0\\0\\377\\377\\377\\377\\377\\377\\377\\377'\n");
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  DwarfWorker w(fake, {});
  auto r = w.Index(fx_.module, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("invalid response"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace symdex::debuginfo
