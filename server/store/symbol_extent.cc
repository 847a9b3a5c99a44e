#include "server/store/symbol_extent.h"

#include <algorithm>

#include "server/common/elf_facts.h"
#include "server/common/strings.h"
#include "server/ingest/kallsyms.h"
#include "server/store/sqlite_db.h"

namespace symdex::store {
namespace {

bool Noise(std::string_view name) { return name.starts_with("__pfx_") || name.starts_with("__cfi_"); }

// "__sched_text_end", "__irqentry_text_start": the kernel's per-region text labels.
bool IsTextRegionLabel(std::string_view name, std::string_view suffix) {
  return name.size() > 2 + suffix.size() && name.starts_with("__") && name.ends_with(suffix);
}

std::string Hex(uint64_t v) { return fmt::format("0x{:x}", v); }

}  // namespace

bool IsRegionStartLabel(std::string_view n) {
  for (std::string_view exact : {"_text", "_stext", "_sinittext", "_sdata", "__init_begin", "__indirect_thunk_start"}) {
    if (n == exact) return true;
  }
  // __start_SECTION: the linker's bound of a section named like a C identifier (__jump_table).
  return n.starts_with("__start___") || IsTextRegionLabel(n, "_text_start");
}

bool IsRegionEndLabel(std::string_view n) {
  for (std::string_view exact :
       {"_etext", "_einittext", "_edata", "_end", "__bss_stop", "__init_end", "__indirect_thunk_end"}) {
    if (n == exact) return true;
  }
  // __end_entry_SYSENTER_compat, __end_rodata, ...; __stop___SECTION as __start___ above.
  return n.starts_with("__end_") || n.starts_with("__stop___") || IsTextRegionLabel(n, "_text_end");
}

std::tuple<bool, int, int, int, bool, bool, int64_t> AliasRank(const AliasFacts& a) {
  const bool label = IsRegionStartLabel(a.name) || IsRegionEndLabel(a.name);
  int sized = 0, function = 0, binding = 0;
  if (a.elf_facts) {
    sized = (*a.elf_facts & kElfSized) != 0;
    function = (*a.elf_facts & kElfFunction) != 0;
    // Only with the ELF facts: without sizes, binding would prefer the global label
    // swapgs_restore_regs_and_return_to_usermode (size 0) to the local common_interrupt_return
    // (203 bytes) at the same address.
    const bool weak = a.type == 'W' || a.type == 'w' || a.type == 'V' || a.type == 'v';
    binding = weak ? 1 : (a.type >= 'A' && a.type <= 'Z') ? 2 : 0;
  }
  return {!Noise(a.name), sized, function, binding, !label, a.has_dwarf_function, -static_cast<int64_t>(a.name.size())};
}

bool PreferAlias(const AliasFacts& a, const AliasFacts& b) {
  const auto ra = AliasRank(a), rb = AliasRank(b);
  if (ra != rb) return ra > rb;
  return a.name < b.name;
}

std::optional<uint64_t> OwnerExtents::EndOf(std::string_view module) const {
  if (module.empty()) return vmlinux_end;
  for (const auto& m : modules) {
    if (m.name == module) return m.end;
  }
  return std::nullopt;
}

std::string OwnerExtents::Describe(uint64_t addr) const {
  if (vmlinux_start && vmlinux_end && addr >= *vmlinux_start && addr < *vmlinux_end) {
    return "in vmlinux but in no function";
  }
  for (const auto& m : modules) {
    if (addr >= m.start && addr < m.end) return StrCat("in module ", m.name, " but in no function");
  }
  if (!vmlinux_start || !vmlinux_end) return "in no function of this target";
  if (modules_unplaced) return "not in vmlinux (this offline target's modules have no addresses)";
  return "not in vmlinux or any module";
}

absl::StatusOr<OwnerExtents> LoadOwnerExtents(Db& db, int64_t target_id) {
  OwnerExtents e;
  bool offline = false;
  {
    ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT COALESCE(text_addr, anchor_addr), kind FROM targets WHERE id = ?1"));
    st.Bind(1, target_id);
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (row) {
      if (!st.IsNull(0)) e.vmlinux_start = FromDb(st.Int(0));
      offline = st.Text(1) == "offline";
    }
  }
  {
    // MAX(+addr), not MAX(addr): SQLite would answer MAX(addr) by walking symbols_by_addr from the
    // top, testing every symbol of the target for the name (0.2 s for a distro kernel, paid by
    // every batch symbolization); the unary + leaves it the name index (a handful of rows).
    ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT MAX(+addr) FROM symbols WHERE target_id = ?1 AND name = '_end' "
                                         "AND module_id IS NULL AND section IS NULL"));
    st.Bind(1, target_id);
    ASSIGN_OR_RETURN(bool row, st.Step());
    if (row && !st.IsNull(0)) e.vmlinux_end = FromDb(st.Int(0));
  }
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT name, text_addr, size FROM modules WHERE target_id = ?1"));
  st.Bind(1, target_id);
  RETURN_IF_ERROR(st.EachRow([&] {
    std::string name = st.Text(0);
    if (!st.IsNull(1) && !st.IsNull(2) && st.Int(2) > 0) {
      const uint64_t start = FromDb(st.Int(1));
      e.modules.push_back({std::move(name), start, start + static_cast<uint64_t>(st.Int(2))});
    } else if (offline && !ingest::IsPseudoModule(name)) {
      e.modules_unplaced = true;
    }
  }));
  return e;
}

absl::StatusOr<std::optional<std::string>> WhyNotContained(const Candidate* c, uint64_t addr,
                                                           const ExtentsFn& extents) {
  auto describe = [&](std::string_view detail) -> absl::StatusOr<std::optional<std::string>> {
    ASSIGN_OR_RETURN(const OwnerExtents* ext, extents());
    std::string owner = ext->Describe(addr);
    // The detail helps inside an owner (which function ends where); outside every owner the
    // nearest symbol below is irrelevant.
    if (detail.empty() || owner.starts_with("not in")) return owner;
    return StrCat(owner, ": ", detail);
  };
  if (c == nullptr) return describe("");
  if (IsRegionEndLabel(c->name)) {
    return describe(StrCat("after ", c->name, ", which marks the end of a code region"));
  }
  std::optional<uint64_t> end;
  if (c->size && *c->size > 0) {
    end = c->addr + *c->size;
    // A module's next symbol may lie in another allocation (its data, on kernels that place
    // text and data apart): the module's own range bounds its text too. vmlinux needs no such
    // bound (its symbols are contiguous up to _end), which keeps a vmlinux hit free of I/O.
    if (!c->module.empty()) {
      ASSIGN_OR_RETURN(const OwnerExtents* ext, extents());
      if (auto owner_end = ext->EndOf(c->module); owner_end && *owner_end > c->addr) end = std::min(*end, *owner_end);
    }
  } else {
    ASSIGN_OR_RETURN(const OwnerExtents* ext, extents());
    end = ext->EndOf(c->module);
    if (!end) {
      // Inside or past the owner: nothing says which. Name the gap in what is known.
      return StrCat("not known to be in a function: ", c->name, " is the last symbol of ",
                    c->module.empty() ? "vmlinux" : c->module, ", whose end is unknown");
    }
  }
  if (addr < *end) return std::nullopt;
  return describe(StrCat("past the end of ", c->name, " (", Hex(*end), ")"));
}

}  // namespace symdex::store
