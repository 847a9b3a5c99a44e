// RAII for libelf/libdw/libdwfl handles and the few DWARF walks that more than one reader of
// a debug file must do identically (the symbolizer and the address map built from it).
#pragma once

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "server/common/build_id.h"
#include "server/common/elf_handle.h"  // ElfPtr
#include "server/common/status.h"
#include "server/common/unique_fd.h"

namespace symdex::debuginfo {

struct DwarfEnd {
  void operator()(Dwarf* d) const;
};
struct DwflEnd {
  void operator()(Dwfl* d) const;
};
using DwarfPtr = std::unique_ptr<Dwarf, DwarfEnd>;
using DwflPtr = std::unique_ptr<Dwfl, DwflEnd>;

// Which unit holds an address, as dwarf_addrdie answers it from .debug_aranges: the same entries
// in libdw's order and the same binary search (dwarf_getarange_addr). Units .debug_aranges does
// not name — clang emits aranges only for assembler units unless asked (-gdwarf-aranges), and
// libdw 0.188 then finds no C unit for any address — add entries from their unit DIE's address
// ranges (DW_AT_low_pc / high_pc or DW_AT_ranges), all then sorted by address, as LLVM does.
// gcc names every unit: its files keep libdw's entries exactly.
class UnitsByAddress {
 public:
  struct Entry {
    uint64_t addr = 0, length = 0;
    Dwarf_Off die = 0;  // the unit DIE's offset
  };
  // `after_unit` (optional) runs after each unit header the walk for unnamed units reads: a
  // BoundedDwarf's HeaderRead, so that the walk's pages are dropped as its other walks' are.
  explicit UnitsByAddress(Dwarf* dbg, const std::function<void()>& after_unit = {});
  const std::vector<Entry>& entries() const { return entries_; }
  bool from_units() const { return from_units_; }  // some entries come from the units' ranges
  // dwarf_addrdie: the unit DIE holding `addr` into *out; nullptr when none does.
  Dwarf_Die* Die(Dwarf* dbg, uint64_t addr, Dwarf_Die* out) const;

 private:
  std::vector<Entry> entries_;
  bool from_units_ = false;
};

// The GNU build-ID as libdwfl finds it (dwelf_elf_gnu_build_id: what dwfl_module_build_id gives
// a module), nullopt when it finds none: a module read from symdex's relocated copy
// (relocated_elf.h) names the build-ID its libdwfl reading would.
std::optional<BuildId> LibdwflBuildId(Elf* elf);

// A debug file opened for DWARF reading (read-only mmap).
struct OpenedDwarf {
  UniqueFd fd;  // declared first: closed after the Elf and Dwarf made from it are ended
  ElfPtr elf;
  DwarfPtr dwarf;
};
absl::Status OpenDwarf(const std::string& path, OpenedDwarf& o);

// A relocatable debug file (an ET_REL kernel module) as libdwfl lays it out: its sections
// placed one after another (dwfl_offline_section_address) and the DWARF relocated to match.
// The module file itself carries the DWARF; nothing is looked for elsewhere.
struct RelocatedDwarf {
  DwflPtr dwfl;  // owns the Elf and the Dwarf
  Dwfl_Module* mod = nullptr;
  Dwarf* dwarf = nullptr;
  Dwarf_Addr bias = 0;  // dwfl address = DWARF address + bias
  // Where libdwfl laid out each relocatable section: section name -> dwfl address (the inverse
  // of dwfl_module_relocate_address).
  std::vector<std::pair<std::string, uint64_t>> SectionBases() const;
};
// NotFound/InvalidArgument naming the path and libdwfl's reason.
absl::Status OpenRelocated(const std::string& path, RelocatedDwarf& out);

// A section a reader of its own takes in place from a linked debug file (the DIE scanner, the
// line-table reader): the first section of `name`, its bytes and where they start in the file.
struct SectionSlot {
  const char* name;
  std::string_view* view;
  uint64_t* file_offset = nullptr;
};
// Fills the slots from `dbg`'s file. NotFound, ending with why libdw reads it instead, for a
// relocatable or big-endian file (`file_reason`), a compressed or empty section
// (`section_reason`), and with `whole_file` for a dwz alternate file or a .zdebug section.
absl::Status TakeLinkedSections(Dwarf* dbg, std::span<SectionSlot> slots, std::string_view file_reason,
                                std::string_view section_reason, bool whole_file);

// A linked debug file read unit by unit with bounded memory. libdw keeps every unit it reads
// (abbreviations, line table, file list) until dwarf_end(), and every page of the mapped file a
// reader touched stays in the process's RSS: a walk over vmlinux's 2,700 units would end holding
// ~200 MB of line tables and ~190 MB of file pages. Here, once `budget` bytes of units have been
// read, the Dwarf handle is ended and begun again over the same Elf and the file's pages are
// dropped from this process (madvise MADV_DONTNEED on the read-only private mapping: the next
// touch reads them again from the page cache; nothing is lost).
//
// Every Dwarf_Die, Dwarf_Lines and string obtained from dwarf() is invalid after a Read() that
// recycled (it returns true): copy what must outlive a unit.
class BoundedDwarf {
 public:
  BoundedDwarf() = default;
  BoundedDwarf(const BoundedDwarf&) = delete;
  BoundedDwarf& operator=(const BoundedDwarf&) = delete;
  ~BoundedDwarf();

  // As OpenDwarf. budget 0: never recycle.
  absl::Status Open(const std::string& path, uint64_t budget);
  Elf* elf() const { return elf_.get(); }
  Dwarf* dwarf() const { return dwarf_.get(); }
  int fd() const { return fd_.get(); }  // the file, read-only
  // `bytes` more of units read. Recycles once the budget is spent; true if it did.
  absl::StatusOr<bool> Read(uint64_t bytes);
  // Bounding the file's pages must also bound walks over unit headers. libdw finds a unit by
  // reading every unit header before it, and each header read maps the 64 KiB around it (the
  // kernel's fault-around): 2,700 headers would map 170 MB of vmlinux at once. So:
  //   SetUnits: the unit DIEs' offsets, ascending. libdw is made to learn them by
  //             PrepareUnits — call it before asking libdw for a unit or an address's unit
  //             (dwarf_offdie, dwarf_addrdie) — once after each recycle, 128 units at a time
  //             with the pages dropped in between. (A reader that does not ask libdw for units,
  //             the DIE scanner, never pays for it: 2,172 header reads per recycle.)
  //   HeaderRead: the caller's own walk over headers (dwarf_next_unit) read one; pages are
  //             dropped every 128.
  void SetUnits(std::vector<Dwarf_Off> die_offsets);
  void PrepareUnits();
  void HeaderRead();
  // Drops the file's pages from this process now.
  void DropPages();
  unsigned recycles() const { return recycles_; }
  // Whether the file's pages are dropped at each recycle (a 64-bit file in this machine's byte
  // order, no compressed section, no dwz alternate file); else only the handle is recycled.
  bool drops_pages() const { return map_ != nullptr; }

 private:
  UniqueFd fd_;
  void* map_ = nullptr;  // our own read-only mapping of the file (nullptr: libelf's)
  size_t map_size_ = 0;
  ElfPtr elf_;
  DwarfPtr dwarf_;
  std::string path_;
  uint64_t budget_ = 0, spent_ = 0;
  std::vector<Dwarf_Off> units_;
  unsigned headers_read_ = 0;
  bool learned_ = false;
  unsigned recycles_ = 0;

  void LearnUnits();
};

// work(thread, handle) on `jobs` threads: this one with `first`, each other with a BoundedDwarf
// of its own on `path` (budget and units as `first`'s). The handles' recycles, summed with
// `first`'s, once every thread is done.
template <class Work>
absl::StatusOr<uint64_t> OnBoundedThreads(unsigned jobs, const std::string& path, uint64_t budget,
                                          const std::vector<Dwarf_Off>& unit_offsets, BoundedDwarf& first, Work& work) {
  std::vector<std::unique_ptr<BoundedDwarf>> handles;
  for (unsigned t = 1; t < jobs; ++t) {
    handles.push_back(std::make_unique<BoundedDwarf>());
    RETURN_IF_ERROR(handles.back()->Open(path, budget));
    handles.back()->SetUnits(unit_offsets);
  }
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < jobs; ++t) threads.emplace_back(work, t, handles[t - 1].get());
  work(0, &first);
  for (auto& th : threads) th.join();
  uint64_t recycles = first.recycles();
  for (const auto& h : handles) recycles += h->recycles();
  return recycles;
}

// What a bounded walk of vmlinux reads between recycles: ~16 MB of .debug_info is ~10% of it.
inline constexpr uint64_t kUnitBytesPerDwarfHandle = 16u << 20;

// Each unit's size and start in .debug_info, by the offset of its unit DIE (dwarf_next_unit's
// walk; stops at the first unreadable header).
struct UnitSpan {
  Dwarf_Off die;     // the unit DIE
  uint64_t size;     // header included
  Dwarf_Off header;  // where the unit starts
};
std::vector<UnitSpan> UnitSizes(BoundedDwarf& h);

// Does one of the DIE's address ranges (low/high_pc or DW_AT_ranges) hold pc?
bool RangesContain(Dwarf_Die* die, Dwarf_Addr pc);

// A CU's top-level functions (DW_TAG_subprogram, through namespaces), one span per address
// range, sorted by start: where an address is looked up before its inline nesting is walked.
struct FunctionRange {
  uint64_t lo, hi;
  Dwarf_Off die;
};
std::vector<FunctionRange> CollectFunctionRanges(Dwarf_Die* cu);

// The index among `n` ranges sorted by lo (CollectFunctionRanges' order) of the one holding
// addr, or -1: the last range starting at or below addr that still covers it (ranges of
// distinct functions do not overlap), looking back at most 16 MiB.
template <typename Range>
ptrdiff_t FindFunctionRange(const Range* sorted, size_t n, uint64_t addr) {
  size_t lo = static_cast<size_t>(
      std::upper_bound(sorted, sorted + n, addr, [](uint64_t v, const Range& r) { return v < r.lo; }) - sorted);
  while (lo > 0) {
    --lo;
    if (addr < sorted[lo].hi) return static_cast<ptrdiff_t>(lo);
    if (addr - sorted[lo].lo > (uint64_t{1} << 24)) break;
  }
  return -1;
}

}  // namespace symdex::debuginfo
