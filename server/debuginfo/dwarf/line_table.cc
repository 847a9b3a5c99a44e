// The line-program state machine follows DWARF 5 §6.2 and reproduces libdw 0.188's reading of
// it (libdw/dwarf_getsrclines.c read_srclines): the register widths it stores rows in (a value
// that does not fit fails the whole table there, so here too), the 32-bit arithmetic of its
// address advance, its file-name joining and its sort.
#include "server/debuginfo/dwarf/line_table.h"

#include <dwarf.h>
#include <elf.h>
#include <gelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "server/common/byte_reader.h"
#include "server/common/strings.h"
#include "server/debuginfo/dwarf/libdw_util.h"

namespace symdex::debuginfo {
namespace {

// A NUL-terminated string at `off` of a string section.
const char* SectionString(std::string_view sec, uint64_t off) {
  if (off >= sec.size()) return nullptr;
  if (std::memchr(sec.data() + off, 0, sec.size() - off) == nullptr) return nullptr;
  return sec.data() + off;
}

LineFile Entry(const char* dir, const char* name) { return LineFile{name[0] == '/' ? nullptr : dir, name}; }

// The DWARF 5 entry-format forms read here: the path as a string, the directory index as a
// constant; the others skipped by size.
struct FormReader {
  const LineSections& sec;
  unsigned offset_size;

  // Skips a value; false for a form this reader does not take.
  bool Skip(DwarfCursor& c, uint64_t form) const {
    switch (form) {
      case DW_FORM_data1:
      case DW_FORM_flag:
      case DW_FORM_strx1:
        c.Skip(1);
        return true;
      case DW_FORM_data2:
      case DW_FORM_strx2:
        c.Skip(2);
        return true;
      case DW_FORM_strx3:
        c.Skip(3);
        return true;
      case DW_FORM_data4:
      case DW_FORM_strx4:
        c.Skip(4);
        return true;
      case DW_FORM_data8:
        c.Skip(8);
        return true;
      case DW_FORM_data16:
        c.Skip(16);
        return true;
      case DW_FORM_strp:
      case DW_FORM_line_strp:
      case DW_FORM_sec_offset:
      case DW_FORM_strp_sup:
        c.Skip(offset_size);
        return true;
      case DW_FORM_udata:
      case DW_FORM_strx:
        c.Uleb();
        return true;
      case DW_FORM_sdata:
        c.Sleb();
        return true;
      case DW_FORM_string:
        c.CStr();
        return true;
      case DW_FORM_block1:
        c.Skip(c.U8());
        return true;
      case DW_FORM_block2:
        c.Skip(c.Fixed(2));
        return true;
      case DW_FORM_block4:
        c.Skip(c.Fixed(4));
        return true;
      case DW_FORM_block:
        c.Skip(c.Uleb());
        return true;
      default:
        return false;
    }
  }
  // dwarf_formstring of a path; nullptr (an error here) for other forms or a bad offset.
  const char* String(DwarfCursor& c, uint64_t form) const {
    switch (form) {
      case DW_FORM_string:
        return c.CStr();
      case DW_FORM_strp:
        return SectionString(sec.debug_str, c.Fixed(offset_size));
      case DW_FORM_line_strp:
        return SectionString(sec.debug_line_str, c.Fixed(offset_size));
      default:
        return nullptr;
    }
  }
  // dwarf_formudata of a directory index; false for other forms.
  bool Unsigned(DwarfCursor& c, uint64_t form, uint64_t& v) const {
    switch (form) {
      case DW_FORM_data1:
        v = c.Fixed(1);
        return true;
      case DW_FORM_data2:
        v = c.Fixed(2);
        return true;
      case DW_FORM_data4:
        v = c.Fixed(4);
        return true;
      case DW_FORM_data8:
        v = c.Fixed(8);
        return true;
      case DW_FORM_udata:
        v = c.Uleb();
        return true;
      default:
        return false;
    }
  }
};

// The registers, with the widths libdw 0.188 keeps them in (struct line_state).
struct State {
  uint64_t addr = 0;
  uint32_t op_index = 0;
  uint32_t file = 1;
  int64_t line = 1;
  uint32_t column = 0;
  uint8_t is_stmt = 0;
  uint32_t isa = 0;
  uint32_t discriminator = 0;
};

class Program {
 public:
  Program(const LineSections& sec, uint64_t offset, const char* comp_dir, unsigned address_size)
      : sec_(sec), offset_(offset), comp_dir_(comp_dir), address_size_(address_size) {}

  absl::StatusOr<LineTable> Read() {
    if (offset_ >= sec_.debug_line.size()) return Bad("offset past .debug_line");
    const auto* base = reinterpret_cast<const uint8_t*>(sec_.debug_line.data());
    DwarfCursor c(base + offset_, base + sec_.debug_line.size());
    uint64_t unit_length = c.Fixed(4);
    unsigned offset_size = 4;
    if (unit_length == 0xffffffffu) {
      unit_length = c.Fixed(8);
      offset_size = 8;
    }
    if (!c.ok() || unit_length > c.left()) return Bad("unit length past the section");
    c.set_end(c.pos() + unit_length);
    const auto version = static_cast<unsigned>(c.Fixed(2));
    if (!c.ok() || version < 2 || version > 5) return Bad("version");
    if (version >= 5) {
      const unsigned asize = c.U8();
      const unsigned seg = c.U8();
      if (asize != address_size_ || seg != 0) return Bad("address or segment selector size");
    }
    const uint64_t header_length = c.Fixed(offset_size);
    if (!c.ok()) return Bad("truncated header");
    const uint8_t* header_start = c.pos();
    min_inst_ = c.U8();
    max_ops_ = version >= 4 ? c.U8() : 1;
    if (!c.ok() || max_ops_ == 0) return Bad("maximum operations per instruction");
    if (c.left() < 4) return Bad("truncated header");
    default_is_stmt_ = c.U8();
    line_base_ = static_cast<int8_t>(c.U8());
    line_range_ = c.U8();
    opcode_base_ = c.U8();
    if (opcode_base_ == 0) return Bad("opcode base 0");  // libdw reads lengths[-1] then
    std_lengths_ = c.pos() - 1;                          // indexed by opcode (1-based)
    c.Skip(opcode_base_ - 1u);
    if (!c.ok()) return Bad("truncated standard opcode lengths");

    const FormReader forms{sec_, offset_size};
    if (version < 5) {
      dirs_.push_back(comp_dir_);
      while (c.ok() && c.left() > 0 && *c.pos() != 0) dirs_.push_back(c.CStr());
      if (!c.ok() || c.U8() != 0 || !c.ok()) return Bad("include directories");
      table_.files.push_back(LineFile{nullptr, "???"});
      while (c.ok() && c.left() > 0 && *c.pos() != 0) {
        const char* name = c.CStr();
        const uint64_t dir = c.Uleb();
        c.Uleb();  // mtime
        c.Uleb();  // length
        if (!c.ok()) return Bad("file names");
        if (dir >= dirs_.size()) return Bad("directory index");
        table_.files.push_back(Entry(dirs_[dir], name));
      }
      if (!c.ok() || c.U8() != 0 || !c.ok()) return Bad("file names");
    } else {
      if (!ReadEntries(c, forms, /*files=*/false)) return Bad("directory table");
      if (!ReadEntries(c, forms, /*files=*/true)) return Bad("file name table");
    }
    if (static_cast<uint64_t>(c.pos() - header_start) != header_length) {  // no pointer past the unit formed
      return Bad("header length does not match its tables");
    }
    table_.rows.resize(c.left() / 3);  // ~3 bytes of program per row in gcc's tables
    RETURN_IF_ERROR(Run(c));
    Finish();
    return std::move(table_);
  }

 private:
  absl::Status Bad(std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format(".debug_line at {:#x}: {}", offset_, what));
  }

  // DWARF 5 directory or file entries: the format, the count, the entries.
  bool ReadEntries(DwarfCursor& c, const FormReader& forms, bool files) {
    const unsigned nforms = c.U8();
    uint64_t form_of[256];
    int path = -1, dir_index = -1;
    for (unsigned i = 0; i < nforms; ++i) {
      const uint64_t content = c.Uleb();
      form_of[i] = c.Uleb();
      if (content == DW_LNCT_path) path = static_cast<int>(i);
      if (files && content == DW_LNCT_directory_index) dir_index = static_cast<int>(i);
    }
    if (!c.ok() || (nforms > 0 && (path < 0 || (files && dir_index < 0)))) return false;
    const uint64_t count = c.Uleb();
    if (!c.ok() || (nforms == 0 && count != 0) || (nforms != 0 && count > c.left() / nforms)) return false;
    if (files) table_.files.reserve(count + 1);
    for (uint64_t n = 0; n < count; ++n) {
      const char* name = nullptr;
      uint64_t dir = ~uint64_t{0};
      for (unsigned m = 0; m < nforms; ++m) {
        if (static_cast<int>(m) == path) {
          name = forms.String(c, form_of[m]);
        } else if (static_cast<int>(m) == dir_index) {
          if (!forms.Unsigned(c, form_of[m], dir)) return false;
        } else if (!forms.Skip(c, form_of[m])) {
          return false;
        }
        if (!c.ok()) return false;
      }
      if (name == nullptr) return false;
      if (!files) {
        dirs_.push_back(name);
        continue;
      }
      if (dir >= dirs_.size()) return false;
      table_.files.push_back(Entry(dirs_[dir], name));  // entry 0 takes the place of libdw's "???"
    }
    if (files && count == 0) table_.files.push_back(LineFile{nullptr, "???"});
    return true;
  }

  // The line program. The registers live in locals (State), the hot path — special opcodes and
  // the short standard ones — reads bytes without the DwarfCursor's bookkeeping. One function,
  // one switch over the opcodes, past 120 lines: split into calls, the registers would leave the
  // locals the compiler keeps in registers (the line tables of a whole kernel go through here).
  absl::Status Run(DwarfCursor& c) {
    const uint8_t* p = c.pos();
    const uint8_t* const end = c.end();
    State st;
    st.is_stmt = default_is_stmt_;
    auto& rows = table_.rows;  // grown by doubling, rows[0, n) written; cut to n at the end
    size_t n = 0;
    struct Cut {
      std::vector<LineRow>& rows;
      size_t& n;
      ~Cut() { rows.resize(n); }
    } cut{rows, n};
    const unsigned opcode_base = opcode_base_, line_range = line_range_, min_inst = min_inst_, max_ops = max_ops_;
    const int line_base = line_base_;
    // libdw computes the advance in unsigned int (32 bits) before adding it to the address.
    auto advance = [&](uint32_t op_advance) __attribute__((always_inline)) {
      if (max_ops == 1) {
        st.addr += static_cast<uint32_t>(min_inst * op_advance);
        return;
      }
      const uint32_t ops = st.op_index + op_advance;
      st.addr += static_cast<uint32_t>(min_inst * (ops / max_ops));
      st.op_index = ops % max_ops;
    };
    // A row as libdw's add_new_line stores it; false where a register does not fit its field.
    auto emit = [&](bool end_sequence) __attribute__((always_inline)) {
      if (st.line < INT32_MIN || st.line > INT32_MAX || st.column > 0xffff || st.is_stmt > 1 || st.op_index > 0xff ||
          st.isa > 0xff || st.discriminator > 0xffffff) {
        return false;
      }
      if (n == rows.size()) rows.resize(std::max<size_t>(64, rows.size() * 2));
      rows[n++] = LineRow{st.addr,         st.file,     static_cast<int32_t>(st.line), static_cast<uint16_t>(st.column),
                          st.is_stmt == 1, end_sequence};
      return true;
    };
    // LEB128 operands through the DwarfCursor (bounded, at most 10 bytes).
    auto uleb = [&](uint64_t& v) {
      if (p < end && *p < 0x80) {
        v = *p++;
        return true;
      }
      DwarfCursor k(p, end);
      v = k.Uleb();
      p = k.pos();
      return k.ok();
    };
    auto sleb = [&](int64_t& v) {
      if (p < end && *p < 0x40) {
        v = *p++;
        return true;
      }
      DwarfCursor k(p, end);
      v = k.Sleb();
      p = k.pos();
      return k.ok();
    };
    static constexpr uint8_t kArgs[13] = {0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};
    // Each special opcode's line and operation advance, computed once (two divisions per row otherwise).
    int line_delta[256];
    uint32_t op_advance[256];
    if (line_range != 0) {
      for (unsigned op = opcode_base; op < 256; ++op) {
        line_delta[op] = line_base + static_cast<int>((op - opcode_base) % line_range);
        op_advance[op] = (op - opcode_base) / line_range;
      }
    }
    while (p < end) {
      const unsigned op = *p++;
      if (op >= opcode_base) {  // special opcode
        if (line_range == 0) return Bad("line range 0");
        st.line += line_delta[op];
        advance(op_advance[op]);
        if (!emit(false)) return Bad("a row's value does not fit");
        st.discriminator = 0;
        continue;
      }
      if (op == 0) {  // extended: a one-byte length (as libdw reads it), the sub-opcode, operands
        if (end - p < 2) return Bad("truncated extended opcode");
        const unsigned len = *p++;
        if (static_cast<size_t>(end - p) < len || len == 0) return Bad("extended opcode length");
        const unsigned sub = *p++;
        switch (sub) {
          case DW_LNE_end_sequence:
            if (!emit(true)) return Bad("a row's value does not fit");
            st = State{};
            st.is_stmt = default_is_stmt_;
            break;
          case DW_LNE_set_address: {
            st.op_index = 0;
            if (address_size_ != 4 && address_size_ != 8) return Bad("address size");
            DwarfCursor k(p, end);
            st.addr = k.Fixed(address_size_);
            if (!k.ok()) return Bad("truncated address");
            p = k.pos();
            break;
          }
          case DW_LNE_define_file: {
            DwarfCursor k(p, end);
            const char* name = k.CStr();
            const uint64_t dir = k.Uleb();
            k.Uleb();
            k.Uleb();
            if (!k.ok() || dir > UINT32_MAX || dir >= dirs_.size()) return Bad("define_file");
            p = k.pos();
            table_.files.push_back(Entry(dirs_[dir], name));
            break;
          }
          case DW_LNE_set_discriminator: {
            // libdw checks standard_opcode_lengths[4] here (the sub-opcode used as an index).
            if (opcode_base <= DW_LNE_set_discriminator || std_lengths_[DW_LNE_set_discriminator] != 1) {
              return Bad("set_discriminator");
            }
            uint64_t v = 0;
            if (!uleb(v)) return Bad("truncated operand");
            st.discriminator = static_cast<uint32_t>(v);
            break;
          }
          default:
            p += len - 1;  // inside the unit: checked against len above
            break;
        }
        continue;
      }
      if (op <= DW_LNS_set_isa) {
        if (std_lengths_[op] != kArgs[op]) return Bad("a standard opcode's length");
        uint64_t u = 0;
        int64_t sv = 0;
        switch (op) {
          case DW_LNS_copy:
            if (!emit(false)) return Bad("a row's value does not fit");
            st.discriminator = 0;
            break;
          case DW_LNS_advance_pc:
            if (!uleb(u)) return Bad("truncated operand");
            advance(static_cast<uint32_t>(u));
            break;
          case DW_LNS_advance_line:
            if (!sleb(sv)) return Bad("truncated operand");
            st.line += static_cast<int32_t>(sv);
            break;
          case DW_LNS_set_file:
            if (!uleb(u)) return Bad("truncated operand");
            st.file = static_cast<uint32_t>(u);
            break;
          case DW_LNS_set_column:
            if (!uleb(u)) return Bad("truncated operand");
            st.column = static_cast<uint32_t>(u);
            break;
          case DW_LNS_negate_stmt:
            st.is_stmt = static_cast<uint8_t>(1 - st.is_stmt);
            break;
          case DW_LNS_set_basic_block:
          case DW_LNS_set_prologue_end:
          case DW_LNS_set_epilogue_begin:
            break;
          case DW_LNS_const_add_pc:
            if (line_range == 0) return Bad("line range 0");
            advance((255u - opcode_base) / line_range);
            break;
          case DW_LNS_fixed_advance_pc:
            if (end - p < 2) return Bad("truncated fixed_advance_pc");
            st.addr += LoadLittle<uint16_t>(p);
            p += 2;
            st.op_index = 0;
            break;
          case DW_LNS_set_isa:
            if (!uleb(u)) return Bad("truncated operand");
            st.isa = static_cast<uint32_t>(u);
            break;
        }
        continue;
      }
      for (unsigned n = std_lengths_[op]; n > 0; --n) {  // an opcode libdw does not know: skipped
        uint64_t u = 0;
        if (!uleb(u)) return Bad("truncated operand");
      }
    }
    return absl::OkStatus();
  }

  // dwarf_getsrclines' order: by address, an end_sequence row first at one address, else program
  // order (a stable sort). A sequence's rows ascend already, so the sequences are ordered by
  // their first rows and joined; where that is not the stable sort's order (sequences that
  // overlap, e.g. several at address 0), the rows are stable-sorted.
  void Finish() {
    auto& rows = table_.rows;
    auto before = [](const LineRow& a, const LineRow& b) {
      if (a.addr != b.addr) return a.addr < b.addr;
      return a.end_sequence && !b.end_sequence;
    };
    if (!std::is_sorted(rows.begin(), rows.end(), before)) {
      if (!JoinSequences(before)) std::stable_sort(rows.begin(), rows.end(), before);
    }
    if (!rows.empty()) rows.back().end_sequence = true;
  }

  // The sequences ordered by their first rows; sequences that overlap (e.g. several at address 0:
  // code the linker discarded) form a cluster whose rows are stable-sorted among themselves. The
  // order is (address, end first, program position) throughout: the stable sort's.
  template <typename Before>
  bool JoinSequences(const Before& before) {
    auto& rows = table_.rows;
    struct Seq {
      size_t begin, end;
    };
    std::vector<Seq> seqs;
    for (size_t i = 0, b = 0; i < rows.size(); ++i) {
      if (rows[i].end_sequence || i + 1 == rows.size()) {
        if (!std::is_sorted(rows.begin() + static_cast<ptrdiff_t>(b), rows.begin() + static_cast<ptrdiff_t>(i + 1),
                            before)) {
          return false;  // a sequence going backwards: the plain stable sort
        }
        seqs.push_back({b, i + 1});
        b = i + 1;
      }
    }
    std::stable_sort(seqs.begin(), seqs.end(),
                     [&](const Seq& a, const Seq& b) { return before(rows[a.begin], rows[b.begin]); });
    // x (at position i) strictly before y (at j) in the stable sort's order.
    auto precedes = [&](size_t i, size_t j) {
      if (before(rows[i], rows[j])) return true;
      return !before(rows[j], rows[i]) && i < j;
    };
    std::vector<LineRow> joined;
    joined.reserve(rows.size());
    std::vector<Seq> cluster;
    size_t cluster_max = 0;  // position of the cluster's greatest row
    auto flush = [&] {
      if (cluster.size() == 1) {
        joined.insert(joined.end(), rows.begin() + static_cast<ptrdiff_t>(cluster[0].begin),
                      rows.begin() + static_cast<ptrdiff_t>(cluster[0].end));
      } else {
        std::sort(cluster.begin(), cluster.end(), [](const Seq& a, const Seq& b) { return a.begin < b.begin; });
        const size_t from = joined.size();
        for (const Seq& q : cluster) {
          joined.insert(joined.end(), rows.begin() + static_cast<ptrdiff_t>(q.begin),
                        rows.begin() + static_cast<ptrdiff_t>(q.end));
        }
        std::stable_sort(joined.begin() + static_cast<ptrdiff_t>(from), joined.end(), before);
      }
      cluster.clear();
    };
    for (const Seq& q : seqs) {
      if (!cluster.empty() && !precedes(cluster_max, q.begin)) {
        cluster.push_back(q);
        if (precedes(cluster_max, q.end - 1)) cluster_max = q.end - 1;
        continue;
      }
      if (!cluster.empty()) flush();
      cluster.push_back(q);
      cluster_max = q.end - 1;
    }
    if (!cluster.empty()) flush();
    rows.swap(joined);
    return true;
  }

  const LineSections& sec_;
  const uint64_t offset_;
  const char* comp_dir_;
  const unsigned address_size_;
  unsigned min_inst_ = 1, max_ops_ = 1, line_range_ = 0, opcode_base_ = 0;
  uint8_t default_is_stmt_ = 1;
  int line_base_ = 0;
  const uint8_t* std_lengths_ = nullptr;
  std::vector<const char*> dirs_;  // dirs_[0] may be nullptr (DWARF < 5 without a comp_dir)
  LineTable table_;
};

}  // namespace

std::optional<std::string> LineTable::FilePath(uint32_t file) const {
  if (file >= files.size()) return std::nullopt;
  const LineFile& f = files[file];
  if (f.dir == nullptr) return std::string(f.name);
  std::string s;
  const size_t dl = std::strlen(f.dir);
  s.reserve(dl + 1 + std::strlen(f.name));
  s.append(f.dir, dl);
  s.push_back('/');
  s.append(f.name);
  return s;
}

const LineRow* LineTable::RowFor(uint64_t addr) const {
  auto it = std::upper_bound(rows.begin(), rows.end(), addr, [](uint64_t a, const LineRow& r) { return a < r.addr; });
  if (it == rows.begin()) return nullptr;
  --it;
  return it->end_sequence ? nullptr : &*it;
}

bool LibdwLinesForced() {
  const char* v = std::getenv("SYMDEX_LINE_READER");
  return v != nullptr && std::strcmp(v, "libdw") == 0;
}

absl::StatusOr<LineTable> ReadLineTable(const LineSections& sections, uint64_t offset, const char* comp_dir,
                                        unsigned address_size) {
  return Program(sections, offset, comp_dir, address_size).Read();
}

absl::StatusOr<LineSections> LinkedLineSections(Dwarf* dbg) {
  LineSections out;
  SectionSlot slots[] = {
      {".debug_line", &out.debug_line}, {".debug_line_str", &out.debug_line_str}, {".debug_str", &out.debug_str}};
  RETURN_IF_ERROR(TakeLinkedSections(dbg, slots, "libdw reads its lines", "libdw reads its lines",
                                     /*whole_file=*/false));
  if (out.debug_line.empty()) return absl::NotFoundError("no .debug_line");
  return out;
}

absl::StatusOr<LineTable> ReadUnitLineTable(const LineSections& sections, Dwarf_Die* cu) {
  Dwarf_Attribute attr;
  Dwarf_Word offset = 0;
  if (dwarf_attr(cu, DW_AT_stmt_list, &attr) == nullptr || dwarf_formudata(&attr, &offset) != 0) {
    return absl::NotFoundError("no DW_AT_stmt_list");
  }
  uint8_t unit_type = 0, address_size = 0;
  if (dwarf_cu_info(cu->cu, nullptr, &unit_type, nullptr, nullptr, nullptr, &address_size, nullptr) != 0 ||
      unit_type == DW_UT_split_compile || unit_type == DW_UT_split_type) {
    return absl::NotFoundError("not a plain unit: libdw reads its lines");
  }
  const char* comp_dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &attr));
  return ReadLineTable(sections, offset, comp_dir, address_size);
}

}  // namespace symdex::debuginfo
