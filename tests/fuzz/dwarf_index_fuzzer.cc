// Hostile debug files through the DWARF indexer, in-process: exactly what
// symdex-debuginfo-worker runs on each file (IndexDwarfFile), on bytes held in a memfd so that
// both paths (libelf's mmap of a linked image, libdwfl's open of an ET_REL module) see a file.
// Seeds: small real kernel modules from the Debian -dbg package and two small gcc-built linked
// programs, DWARF 4 and 5 (tests/fuzz/corpus/dwarf_index/). A crash here inside libdw is what the
// worker's isolation exists for; one in symdex's code is a bug to fix.
// Linked files are also read a second time with SYMDEX_DIE_READER=libdw: the DIE scanner must give
// what libdw alone gives (an error, or the same index) — die_scanner.h's contract; and a third
// time in parts (DwarfIndexOptions::on_part), which appended must be the same index. Modules
// (ET_REL), which symdex relocates and scans itself where it can (relocated_elf.h), are read a
// second time through libdwfl (SYMDEX_MODULES_VIA=libdwfl): the same answer.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/debuginfo/dwarf/dwarf_index.h"
#include "server/debuginfo/worker/worker_protocol.h"
#include "tests/unit/dwarf_rows.h"

using namespace symdex::debuginfo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("dwarf_index_fuzzer", MFD_CLOEXEC);
  if (fd < 0) return 0;
  for (size_t off = 0; off < size;) {
    ssize_t w = ::write(fd, data + off, size - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto idx = IndexDwarfFile(path, {.jobs = 1});
  if (idx.ok()) {
    // What the worker sends must decode, with every id inside its table.
    std::string bytes = EncodeDwarfIndex(*idx);
    if (!DecodeDwarfIndex(bytes).ok()) __builtin_trap();
  }
  // The error texts are not compared: they quote libdw's last error, which is per-thread state
  // left by whatever libdw call failed before (in a fuzzer, the previous input's).
  const bool relocatable = size >= 18 && data[16] == 1 && data[17] == 0;
  if (relocatable) {
    ::setenv("SYMDEX_MODULES_VIA", "libdwfl", 1);
    auto libdwfl = IndexDwarfFile(path, {.jobs = 1});
    ::unsetenv("SYMDEX_MODULES_VIA");
    if (idx.ok() != libdwfl.ok()) __builtin_trap();
    if (idx.ok() && symdex::testing::EncodedRows(*idx) != symdex::testing::EncodedRows(*libdwfl)) __builtin_trap();
  } else {
    ::setenv("SYMDEX_DIE_READER", "libdw", 1);
    auto libdw = IndexDwarfFile(path, {.jobs = 1});
    ::unsetenv("SYMDEX_DIE_READER");
    if (idx.ok() != libdw.ok()) __builtin_trap();
    if (idx.ok() && symdex::testing::EncodedRows(*idx) != symdex::testing::EncodedRows(*libdw)) __builtin_trap();
    // Handed out in parts (as the worker streams vmlinux) and appended as the indexer does: the
    // same index; or a failure — Aborted (the scanner declined after parts went out: the indexer
    // then asks again in one piece) or the one the whole read gives.
    DwarfIndex joined;
    bool part_refused = false;
    auto rest = IndexDwarfFile(path, {.jobs = 1, .on_part = [&](DwarfIndex&& part) {
                                        if (!AppendDwarfIndex(EncodeDwarfIndex(part), joined).ok()) part_refused = true;
                                      }});
    if (part_refused) __builtin_trap();
    if (rest.ok()) {
      if (!idx.ok() || !AppendDwarfIndex(EncodeDwarfIndex(*rest), joined).ok()) __builtin_trap();
      if (symdex::testing::EncodedRows(joined) != symdex::testing::EncodedRows(*idx)) __builtin_trap();
    } else if (rest.status().code() != absl::StatusCode::kAborted && idx.ok()) {
      __builtin_trap();
    }
  }
  ::close(fd);
  return 0;
}
