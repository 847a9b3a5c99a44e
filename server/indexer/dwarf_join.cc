// Step 5 of an index run (steps.h): every code symbol joined to its DWARF function instance
// and line-table row, by address (debuginfo/dwarf/symbol_join.h says why never by name).
#include <algorithm>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/indexer/steps.h"
#include "server/kernel/symbol_spill.h"

namespace symdex::indexer {
namespace {

using kernel::DebugFileStatus;

std::string SectionName(const debuginfo::DwarfIndex& idx, uint16_t section) {
  return section < idx.sections.size() ? idx.sections[section] : std::string();
}

// One part's code symbols `symbols` (indices into `syms`) joined to its table (step 5, and
// ModuleJoin in step 4b).
void JoinPart(const kernel::KernelTarget& t, const Part& p, const JoinTable& join,
              std::vector<kernel::SymbolEntry>& syms, const std::vector<size_t>& symbols) {
  int64_t slide = 0;
  if (p.module < 0 && t.text_addr && p.debug_text_addr) slide = static_cast<int64_t>(*t.text_addr - *p.debug_text_addr);
  std::vector<std::pair<std::string, uint64_t>> sections;
  if (p.module >= 0) sections = t.modules[static_cast<size_t>(p.module)].sections;
  for (size_t s : symbols) {
    kernel::SymbolEntry& sym = syms[s];
    std::string section;
    uint64_t addr = sym.addr;
    if (p.module < 0) {
      addr = sym.addr - static_cast<uint64_t>(slide);
    } else if (sym.section.empty()) {
      auto so = debuginfo::SectionOffset(sections, sym.addr);
      if (!so) {
        sym.dwarf_note = "module section bases unknown (/sys/module/M/sections unreadable)";
        continue;
      }
      section = so->first;
      addr = so->second;
    } else {
      section = sym.section;
    }
    sym.debug_file_id = p.record.debug_file_id;
    if (const JoinTable::Line* l = join.LineAt(section, addr); l != nullptr && l->line > 0) {
      if (l->unit >= 0) sym.src_unit = l->unit;
      if (l->file >= 0) sym.src_file = l->file;
      sym.src_line = l->line;
    }
    auto hit = join.locator.Find(section, addr);
    if (!hit) {
      sym.dwarf_note = sym.src_line ? "no DW_TAG_subprogram here (assembly or a compiler alias): line-table only"
                                    : "no DWARF function or line at this address";
      continue;
    }
    sym.dwarf_function_id = hit->function_id;
    if (!hit->at_entry) {
      sym.dwarf_note = hit->offset == 0 ? "start of a non-entry range (a .cold/.part split)"
                                        : StrCat("inside a function, +", hit->offset, " from its range start");
    }
  }
}

// `change` on each code symbol of a part: those in t.symbols (`in_memory`), and a spilled
// module's, taken out of the spill and put back (`spilled` then true).
using PartChange = std::function<void(std::vector<kernel::SymbolEntry>&, const std::vector<size_t>&, bool spilled)>;
absl::Status ForPartSymbols(kernel::KernelTarget& t, const Part& p, const std::vector<size_t>& in_memory,
                            const PartChange& change) {
  if (!in_memory.empty()) change(t.symbols, in_memory, false);
  if (!t.spill || p.module < 0) return absl::OkStatus();
  return t.spill->Update(p.module,
                         [&](std::vector<kernel::SymbolEntry>& syms) { change(syms, CodeSymbols(syms), true); });
}

}  // namespace

// The code symbols of each part (by index into `parts`) held in t.symbols, in symbol order: a
// spilled module's are in t.spill (ForPartSymbols).
std::vector<std::vector<size_t>> CodeSymbolsByPart(const kernel::KernelTarget& t, const std::vector<Part>& parts) {
  std::vector<std::vector<size_t>> out(parts.size());
  std::unordered_map<int, size_t> part_of_module;
  for (size_t i = 0; i < parts.size(); ++i) part_of_module[parts[i].module] = i;
  for (size_t s = 0; s < t.symbols.size(); ++s) {
    if (!IsCodeSymbolType(t.symbols[s].type)) continue;
    auto it = part_of_module.find(t.symbols[s].module);
    if (it != part_of_module.end()) out[it->second].push_back(s);
  }
  return out;
}

std::shared_ptr<const JoinTable> JoinTableOf(const debuginfo::DwarfIndex& idx,
                                             const std::vector<int64_t>& function_ids) {
  // Spans in the order LoadJoinTable reads them (by function name, then row id; each
  // function's ranges in order): the locator breaks ties between functions with the same range
  // (aliases such as memmove / __memmove) by that order, so the join must see the same one.
  const size_t n = std::min(idx.functions.size(), function_ids.size());
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int c = idx.functions[a].name.compare(idx.functions[b].name);
    return c != 0 ? c < 0 : function_ids[a] < function_ids[b];
  });
  std::vector<debuginfo::FunctionSpan> spans;
  for (size_t i : order) {
    const debuginfo::DwarfFunction& f = idx.functions[i];
    const std::string entry_section = SectionName(idx, f.entry_section);
    for (const debuginfo::AddrRange& r : f.ranges) {
      spans.push_back({function_ids[i], SectionName(idx, r.section), r.lo, r.hi, f.entry, entry_section});
    }
  }
  std::vector<store::SymbolLine> rows;
  rows.reserve(idx.symbol_lines.size());
  for (const debuginfo::DwarfSymbolLine& l : idx.symbol_lines) {
    store::SymbolLine row{.section = SectionName(idx, l.section), .addr = l.addr, .line = int64_t{l.line}};
    if (l.cu != UINT32_MAX) row.unit = int64_t{l.cu};
    if (l.file != debuginfo::kNoFile) row.file = int64_t{l.file};
    rows.push_back(std::move(row));
  }
  return std::make_shared<JoinTable>(std::move(spans), std::move(rows));
}

JoinTable::JoinTable(std::vector<debuginfo::FunctionSpan> spans, std::vector<store::SymbolLine> rows)
    : locator(std::move(spans)) {
  lines.reserve(rows.size());
  for (const store::SymbolLine& r : rows) {
    auto sec = std::find(sections.begin(), sections.end(), r.section);
    if (sec == sections.end()) sec = sections.insert(sec, r.section);
    // Ids and line numbers come from the store's integers; one that does not fit is no row.
    auto id32 = [](const std::optional<int64_t>& v) {
      return v && *v >= 0 && *v <= INT32_MAX ? static_cast<int32_t>(*v) : -1;
    };
    lines.push_back({r.addr, r.line, static_cast<uint32_t>(sec - sections.begin()), id32(r.unit), id32(r.file)});
  }
  // By key; of equal keys the later row last, and kept.
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return std::tie(a.section, a.addr) < std::tie(b.section, b.addr);
  });
  size_t out = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i + 1 < lines.size() && lines[i + 1].section == lines[i].section && lines[i + 1].addr == lines[i].addr)
      continue;
    lines[out++] = lines[i];
  }
  lines.resize(out);
  lines.shrink_to_fit();
}

const JoinTable::Line* JoinTable::LineAt(std::string_view section, uint64_t addr) const {
  auto sec = std::find(sections.begin(), sections.end(), section);
  if (sec == sections.end()) return nullptr;
  const auto si = static_cast<uint32_t>(sec - sections.begin());
  auto it = std::lower_bound(lines.begin(), lines.end(), std::pair(si, addr),
                             [](const Line& l, const auto& key) { return std::pair(l.section, l.addr) < key; });
  return it != lines.end() && it->section == si && it->addr == addr ? &*it : nullptr;
}

absl::StatusOr<std::shared_ptr<const JoinTable>> LoadJoinTable(store::Db& db, int64_t debug_file_id) {
  ASSIGN_OR_RETURN(auto spans, store::LoadFunctionSpans(db, debug_file_id));
  ASSIGN_OR_RETURN(auto rows, store::LoadSymbolLines(db, debug_file_id));
  return std::make_shared<JoinTable>(std::move(spans), std::move(rows));
}

absl::Status JoinSymbolsToDwarf(store::Db& db, kernel::KernelTarget& t, std::vector<Part>& parts, IndexSummary& sum) {
  const std::vector<std::vector<size_t>> symbols_by_part = CodeSymbolsByPart(t, parts);
  // Debug files indexed by an earlier run: read from the store once each, and let go once the
  // last part using it is joined (a table is only ever needed while its parts are joined).
  std::unordered_map<int64_t, std::shared_ptr<const JoinTable>> loaded;
  std::unordered_map<int64_t, size_t> uses_left;
  for (const Part& p : parts) {
    if (p.record.debug_file_id && !p.join && !p.joined) ++uses_left[*p.record.debug_file_id];
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    Part& p = parts[i];
    if (p.record.status == DebugFileStatus::kCached) ++sum.debug_cached;
    if (!p.record.debug_file_id && p.record.status != DebugFileStatus::kParseError) ++sum.debug_missing;
    if (!p.record.debug_file_id) {
      const std::string note = StrCat("no debug info (", Name(p.record.status), ")");
      RETURN_IF_ERROR(ForPartSymbols(
          t, p, symbols_by_part[i], [&](std::vector<kernel::SymbolEntry>& syms, const std::vector<size_t>& code, bool) {
            for (size_t s : code) syms[s].dwarf_note = note;
          }));
      continue;
    }
    if (p.joined) continue;
    if (!p.join) {
      const int64_t id = *p.record.debug_file_id;
      auto& table = loaded[id];
      if (!table) {
        ASSIGN_OR_RETURN(table, LoadJoinTable(db, id));
      }
      p.join = table;
      if (--uses_left[id] == 0) loaded.erase(id);
    }
    // The part's table goes when its symbols are joined (a shared one with its last part).
    const std::shared_ptr<const JoinTable> held = std::move(p.join);
    // A spilled module's ELF facts too, while its symbols are out (an in-memory part's are step
    // 5b's, beside this one).
    RETURN_IF_ERROR(
        ForPartSymbols(t, p, symbols_by_part[i],
                       [&](std::vector<kernel::SymbolEntry>& syms, const std::vector<size_t>& code, bool spilled) {
                         JoinPart(t, p, *held, syms, code);
                         if (spilled) AttachModuleFacts(t, p, syms, code);
                       }));
  }
  return absl::OkStatus();
}

ModuleJoin::ModuleJoin(kernel::KernelTarget& t, std::vector<Part>& parts)
    : t_(t), parts_(parts), symbols_(CodeSymbolsByPart(t, parts)) {
  for (const Part& p : parts) {
    if (!p.record.build_id.empty()) ++uses_[p.record.build_id];
  }
}

absl::Status ModuleJoin::operator()(size_t i) {
  Part& p = parts_[i];
  if (p.module < 0 || !p.join || !p.record.debug_file_id) return absl::OkStatus();
  RETURN_IF_ERROR(ForPartSymbols(
      t_, p, symbols_[i], [&](std::vector<kernel::SymbolEntry>& syms, const std::vector<size_t>& code, bool spilled) {
        JoinPart(t_, p, *p.join, syms, code);
        if (spilled) AttachModuleFacts(t_, p, syms, code);
      }));
  std::vector<size_t>().swap(symbols_[i]);
  p.joined = true;
  if (auto it = uses_.find(p.record.build_id); it == uses_.end() || it->second <= 1) p.join.reset();
  return absl::OkStatus();
}

}  // namespace symdex::indexer
