#include "server/debuginfo/libdw_util.h"

#include <dwarf.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "server/common/strings.h"

namespace symdex::debuginfo {

void ElfEnd::operator()(Elf* e) const { elf_end(e); }
void DwarfEnd::operator()(Dwarf* d) const { dwarf_end(d); }
void DwflEnd::operator()(Dwfl* d) const { dwfl_end(d); }

void InitLibelf() {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
}

absl::Status OpenDwarf(const std::string& path, OpenedDwarf& o) {
  InitLibelf();
  o.fd.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!o.fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  o.elf.reset(elf_begin(o.fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!o.elf || elf_kind(o.elf.get()) != ELF_K_ELF) {
    return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
  }
  o.dwarf.reset(dwarf_begin_elf(o.elf.get(), DWARF_C_READ, nullptr));
  if (!o.dwarf)
    return absl::InvalidArgumentError(
        StrCat(path, ": no DWARF debug info (", dwarf_errmsg(-1) ? dwarf_errmsg(-1) : "none", ")"));
  return absl::OkStatus();
}

bool RangesContain(Dwarf_Die* die, Dwarf_Addr pc) {
  Dwarf_Addr base, start, end;
  ptrdiff_t off = 0;
  while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) {
    if (pc >= start && pc < end) return true;
  }
  return false;
}

namespace {

void CollectFunctions(Dwarf_Die* parent, std::vector<FunctionRange>& out, int depth) {
  Dwarf_Die child;
  if (depth > 8 || dwarf_child(parent, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if (tag == DW_TAG_namespace) {
      CollectFunctions(&child, out, depth + 1);
    } else if (tag == DW_TAG_subprogram) {
      Dwarf_Addr base, start, end;
      ptrdiff_t off = 0;
      while ((off = dwarf_ranges(&child, off, &base, &start, &end)) > 0) {
        if (end > start) out.push_back({start, end, dwarf_dieoffset(&child)});
      }
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

std::vector<FunctionRange> CollectFunctionRanges(Dwarf_Die* cu) {
  std::vector<FunctionRange> out;
  CollectFunctions(cu, out, 0);
  // Stable: equal starts keep DIE order, so every reader finds the same function.
  std::stable_sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.lo < y.lo; });
  return out;
}

}  // namespace symdex::debuginfo
