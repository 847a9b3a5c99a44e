// vmlinux address maps: built from DWARF (the line table and inline trees of every CU), written
// as one flat file, mapped and searched. Over ~500 lines because the builder and the reader
// share the file format's private encoding, which should not leak into a header.
#include "server/debuginfo/symbolize/addr_map.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "server/common/build_id.h"
#include "server/common/fault_point.h"
#include "server/common/file_util.h"
#include "server/common/strings.h"
#include "server/debuginfo/dwarf/die_scanner.h"
#include "server/debuginfo/dwarf/libdw_util.h"
#include "server/debuginfo/dwarf/line_table.h"
#include "server/debuginfo/dwarf/relocated_elf.h"
#include "server/debuginfo/dwarf/source_path.h"
#include "server/debuginfo/files/debug_finder.h"
#include "server/debuginfo/files/plain_elf.h"

namespace symdex::debuginfo {

using namespace addrmap;

// ---- reading ---------------------------------------------------------------------------------

namespace {

// Each section's record size, in Section's order (kStrings: bytes).
constexpr size_t kRecordSizes[kSectionCount] = {
    1, sizeof(Arange), sizeof(Unit), sizeof(Line), sizeof(Span), sizeof(Interval), sizeof(Node), sizeof(ElfSection)};
constexpr size_t RecordSize(Section s) { return s < kSectionCount ? kRecordSizes[s] : 1; }

constexpr const char* kSectionNames[kSectionCount] = {"strings", "aranges",   "units", "lines",
                                                      "spans",   "intervals", "nodes", "sections"};

// [begin, begin + count) inside a section of `total` records?
bool InRange(uint64_t begin, uint64_t count, uint64_t total) { return begin <= total && count <= total - begin; }

}  // namespace

absl::StatusOr<AddrMap> AddrMap::FromBytes(std::string_view bytes) {
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(StrCat("not a valid address map: ", why));
  };
  if (bytes.size() < kHeaderV1Size) return bad(StrCat(bytes.size(), " bytes, shorter than its header"));
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(Header) != 0) return bad("misaligned buffer");
  Header h{};
  std::memcpy(static_cast<void*>(&h), bytes.data(), kHeaderV1Size);  // a v1 header: the last SectionRef stays 0
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return bad("wrong magic");
  if (h.byte_order != kByteOrderMark) return bad("written on a machine of the other byte order");
  if (h.version != kVersion && h.version != kVersion1) {
    return bad(StrCat("format version ", h.version, ", this symdex reads ", kVersion1, " and ", kVersion));
  }
  const size_t header_size = h.version == kVersion1 ? kHeaderV1Size : sizeof(Header);
  if (h.header_size != header_size || bytes.size() < header_size) return bad("header size differs");
  if (h.version == kVersion) {
    std::memcpy(&h, bytes.data(), sizeof(Header));
  } else {
    h.sections[kElfSections] = SectionRef{(header_size + 7) / 8 * 8, 0};  // none: a linked file's map
  }
  if (h.build_id_size > sizeof h.build_id) return bad("build-ID too long");
  if (h.file_size != bytes.size()) {
    return bad(StrCat("truncated or extended: header says ", h.file_size, " bytes, file has ", bytes.size()));
  }
  for (uint32_t s = 0; s < kSectionCount; ++s) {
    const SectionRef& r = h.sections[s];
    uint64_t size = bytes.size();
    if (r.offset % 8 != 0 || r.offset < header_size || r.offset > size ||
        r.count > (size - r.offset) / RecordSize(static_cast<Section>(s))) {
      return bad(StrCat("section ", kSectionNames[s], " lies outside the file"));
    }
  }
  const SectionRef& str = h.sections[kStrings];
  if (str.count == 0 || bytes[str.offset + str.count - 1] != '\0' || bytes[str.offset] != '\0') {
    return bad("string table not terminated");
  }
  AddrMap m;
  m.bytes_ = bytes;
  m.header_ = h;
  return m;
}

std::string AddrMap::BuildIdHex() const {
  return BuildId::FromRaw(std::string_view(reinterpret_cast<const char*>(header_.build_id), header_.build_id_size))
      .ToHex();
}

const char* AddrMap::String(uint32_t off) const {
  if (off >= count(kStrings)) return "";
  return Records<char>(kStrings) + off;  // the table ends with a NUL
}

std::vector<Frame> AddrMap::FramesAt(uint64_t addr) const {
  std::vector<Frame> frames;
  // The CU: dwarf_getarange_addr's binary search over the sorted aranges.
  const Arange* ar = Records<Arange>(kAranges);
  size_t l = 0, u = count(kAranges);
  const Arange* hit = nullptr;
  while (l < u) {
    size_t idx = (l + u) / 2;
    if (addr < ar[idx].addr) {
      u = idx;
    } else if (addr > ar[idx].addr && addr - ar[idx].addr >= ar[idx].length) {
      l = idx + 1;
    } else {
      hit = &ar[idx];
      break;
    }
  }
  if (hit == nullptr || hit->unit >= count(kUnits)) return frames;
  const Unit& unit = Records<Unit>(kUnits)[hit->unit];

  Frame leaf;
  if (unit.lines_count > 0 && InRange(unit.lines_begin, unit.lines_count, count(kLines))) {
    // dwarf_getsrc_die: the last row at or below addr, unless it ends a sequence.
    const Line* lines = Records<Line>(kLines) + unit.lines_begin;
    const Line* above =
        std::upper_bound(lines, lines + unit.lines_count, addr, [](uint64_t v, const Line& l) { return v < l.addr; });
    if (above != lines && !above[-1].end_sequence) {
      leaf.file = String(above[-1].file);
      leaf.line = above[-1].line;
      leaf.column = above[-1].column;
    }
  }

  uint32_t node = kNone;
  if (InRange(unit.spans_begin, unit.spans_count, count(kSpans))) {
    const Span* spans = Records<Span>(kSpans) + unit.spans_begin;
    ptrdiff_t k = FindFunctionRange(spans, unit.spans_count, addr);
    if (k >= 0 && spans[k].intervals_count > 0 &&
        InRange(spans[k].intervals_begin, spans[k].intervals_count, count(kIntervals))) {
      // The last interval starting at or below addr (the first starts at the span's lo <= addr).
      const Interval* iv = Records<Interval>(kIntervals) + spans[k].intervals_begin;
      const Interval* above = std::upper_bound(iv, iv + spans[k].intervals_count, addr,
                                               [](uint64_t v, const Interval& i) { return v < i.lo; });
      node = (above != iv ? above[-1] : iv[0]).node;
    }
  }
  const Node* nodes = Records<Node>(kNodes);
  Frame cur = leaf;
  for (size_t guard = 0; node < count(kNodes) && guard < 4096; ++guard) {
    const Node& n = nodes[node];
    cur.function = String(n.name);
    frames.push_back(cur);
    if (n.is_subprogram) break;
    cur = Frame{"", String(n.call_file), n.call_line, n.call_column};
    node = n.parent;
  }
  if (frames.empty() && leaf.line > 0) frames.push_back(leaf);  // line table only (assembly)
  return frames;
}

std::vector<InlineCopy> AddrMap::InlinedCopies(std::string_view name) const {
  std::vector<InlineCopy> out;
  const Node* nodes = Records<Node>(kNodes);
  const uint64_t n_nodes = count(kNodes);
  std::vector<uint32_t> copy_of(n_nodes, kNone);  // node -> its place in `out`, for copies of `name`
  for (uint64_t i = 0; i < n_nodes; ++i) {
    const Node& n = nodes[i];
    if (n.is_subprogram || name != String(n.name)) continue;
    InlineCopy c;
    c.addr = UINT64_MAX;
    c.call_file = String(n.call_file);
    c.call_line = n.call_line;
    c.call_column = n.call_column;
    if (n.parent < n_nodes) c.inlined_into = String(nodes[n.parent].name);
    // Copies of copies: how far from the subprogram (a damaged map's cycle stops at the guard).
    for (uint32_t p = n.parent; p < n_nodes && !nodes[p].is_subprogram && c.depth < 4096; p = nodes[p].parent) {
      ++c.depth;
    }
    copy_of[i] = static_cast<uint32_t>(out.size());
    out.push_back(std::move(c));
  }
  if (out.empty()) return out;
  // Where each copy's code is: every interval whose nesting holds it, innermost first.
  const Interval* iv = Records<Interval>(kIntervals);
  for (uint64_t k = 0; k < count(kIntervals); ++k) {
    uint32_t node = iv[k].node;
    for (size_t guard = 0; node < n_nodes && guard < 4096; ++guard) {
      const Node& n = nodes[node];
      if (copy_of[node] != kNone) out[copy_of[node]].addr = std::min(out[copy_of[node]].addr, iv[k].lo);
      if (n.is_subprogram) break;
      node = n.parent;
    }
  }
  std::erase_if(out, [](const InlineCopy& c) { return c.addr == UINT64_MAX; });
  std::sort(out.begin(), out.end(), [](const InlineCopy& a, const InlineCopy& b) {
    return std::tie(a.addr, a.depth, a.call_file, a.call_line, a.call_column) <
           std::tie(b.addr, b.depth, b.call_file, b.call_line, b.call_column);
  });
  return out;
}

std::optional<uint64_t> AddrMap::SectionBase(std::string_view section) const {
  const ElfSection* sec = Records<ElfSection>(kElfSections);
  for (uint64_t i = 0; i < count(kElfSections); ++i) {
    if (section == String(sec[i].name)) return sec[i].base;
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, uint64_t>> AddrMap::SectionOf(uint64_t addr) const {
  const ElfSection* sec = Records<ElfSection>(kElfSections);
  const ElfSection* best = nullptr;
  for (uint64_t i = 0; i < count(kElfSections); ++i) {
    if (sec[i].base <= addr && (best == nullptr || sec[i].base > best->base)) best = &sec[i];
  }
  if (best == nullptr) return std::nullopt;
  return std::make_pair(std::string(String(best->name)), addr - best->base);
}

MappedAddrMap::~MappedAddrMap() { ::munmap(base_, size_); }

absl::StatusOr<std::unique_ptr<MappedAddrMap>> MappedAddrMap::Open(const std::string& path,
                                                                   const std::string& build_id_hex) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return absl::NotFoundError(StrCat("no address map ", path));
    return absl::InvalidArgumentError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return absl::InvalidArgumentError(StrCat(path, ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  if (st.st_size < static_cast<off_t>(sizeof(Header))) {
    return absl::InvalidArgumentError(StrCat(path, ": not a valid address map: ", st.st_size, " bytes"));
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return absl::InvalidArgumentError(StrCat("mmap ", path, ": ", std::strerror(errno)));
  auto m = AddrMap::FromBytes(std::string_view(static_cast<const char*>(base), size));
  if (!m.ok()) {
    ::munmap(base, size);
    return absl::InvalidArgumentError(StrCat(path, ": ", m.status().message()));
  }
  if (m->BuildIdHex() != build_id_hex) {
    std::string other = m->BuildIdHex();
    ::munmap(base, size);
    return absl::InvalidArgumentError(StrCat(path, ": belongs to build-ID ", other, ", not ", build_id_hex));
  }
  return std::unique_ptr<MappedAddrMap>(new MappedAddrMap(base, size, *m));
}

// ---- building --------------------------------------------------------------------------------

namespace {

// What one CU contributes, with unit-local string and node numbers (merged in unit order).
struct UnitPart {
  std::deque<std::string> strings{""};  // a deque: the map's keys view its elements
  std::unordered_map<std::string_view, uint32_t> string_ids{{std::string_view(), 0}};
  std::vector<Line> lines;
  std::vector<Span> spans;
  std::vector<Interval> intervals;
  std::vector<Node> nodes;
  bool ok = false;
  bool fast_lines = false;  // the line table came from ReadLineTable, not libdw

  uint32_t Intern(std::string_view s) {
    if (auto it = string_ids.find(s); it != string_ids.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(strings.size());
    strings.emplace_back(s);
    string_ids.emplace(strings.back(), id);
    return id;
  }
};

// A function's scope tree as ConcreteChain walks it: subprograms, inlined subroutines and
// lexical blocks with their ranges (namespaces are entered without a range check).
// Children are a linked list and ranges a slice of the builder's flat range vector: no
// allocation per scope (a vmlinux has ~1M of them).
struct Scope {
  int tag = 0;
  uint32_t ranges_begin = 0, ranges_count = 0;
  uint32_t first_child = UINT32_MAX, last_child = UINT32_MAX, next_sibling = UINT32_MAX;
  Dwarf_Die die;        // the libdw walk's
  uint64_t offset = 0;  // the scanner's
};

class UnitBuilder {
 public:
  UnitBuilder(Dwarf* dbg, Dwarf_Die* cu, UnitPart& out) : dbg_(dbg), cu_(cu), out_(out) {}
  // The same part read by the DIE scanner (die_scanner.h) over an opened unit.
  UnitBuilder(UnitScanner& scan, const DwarfSections& sections, UnitPart& out)
      : dbg_(nullptr), cu_(nullptr), out_(out), scan_(&scan), sections_(&sections) {}

  // The scanner's build: false when the scanner declines the unit (the caller discards the
  // part and builds it with libdw).
  bool BuildScanned() {
    ScanDie cu;
    if (!scan_->UnitDie(cu)) return false;
    const char* comp_dir = nullptr;
    if (const ScanAttr* a = cu.get(At::kCompDir)) comp_dir = scan_->String(*a);
    if (scan_->failed()) return false;
    comp_dir_ = comp_dir ? comp_dir : "";
    if (const ScanAttr* stmt = cu.get(At::kStmtList)) {
      uint64_t offset = 0;
      if (!scan_->SecOffset(*stmt, offset)) return false;
      auto t = ReadLineTable(sections_->lines(), offset, comp_dir, scan_->address_size());
      if (!t.ok()) return scan_->Fail(cu.offset, std::string(t.status().message()));
      table_ = std::move(*t);
      table_ids_.assign(table_->files.size(), kNoId);
      BuildTableLines();
    }
    out_.fast_lines = table_.has_value();
    std::vector<FunctionRange> functions;
    if (!ScanCollectFunctions(cu, functions, 0)) return false;
    std::stable_sort(functions.begin(), functions.end(), [](const auto& x, const auto& y) { return x.lo < y.lo; });
    for (const FunctionRange& r : functions) {
      if (!ScanBuildSpan(r)) return false;
    }
    out_.ok = true;
    return !scan_->failed();
  }

  void Build() {
    Dwarf_Attribute a;
    const char* comp_dir = dwarf_formstring(dwarf_attr(cu_, DW_AT_comp_dir, &a));
    comp_dir_ = comp_dir ? comp_dir : "";
    // The unit's line table through ReadLineTable where it reads it (libdw's rows, without
    // libdw's cost), else through libdw.
    if (!LibdwLinesForced()) {
      if (auto sec = LinkedLineSections(dbg_); sec.ok()) {
        if (auto t = ReadUnitLineTable(*sec, cu_); t.ok()) {
          table_ = std::move(*t);
          table_ids_.assign(table_->files.size(), kNoId);
        }
      }
    }
    out_.fast_lines = table_.has_value();
    if (!table_) {
      if (dwarf_getsrcfiles(cu_, &files_, &nfiles_) != 0) files_ = nullptr;
      BuildLines();
    } else {
      BuildTableLines();
    }
    for (const FunctionRange& r : CollectFunctionRanges(cu_)) BuildSpan(r);
    out_.ok = true;
  }

 private:
  uint32_t SourceString(const char* src) {
    if (src == nullptr) return 0;
    auto it = src_ids_.find(src);  // libdw hands out one pointer per file name of a CU
    if (it != src_ids_.end()) return it->second;
    uint32_t id = out_.Intern(SourceTreeRelative(src, comp_dir_));
    src_ids_.emplace(src, id);
    return id;
  }

  void BuildLines() {
    Dwarf_Lines* lines;
    size_t n;
    if (dwarf_getsrclines(cu_, &lines, &n) != 0) return;
    for (size_t i = 0; i < n; ++i) {
      Dwarf_Line* l = dwarf_onesrcline(lines, i);
      Dwarf_Addr addr = 0;
      if (l == nullptr || dwarf_lineaddr(l, &addr) != 0) continue;
      if (i + 1 < n) {  // dwarf_getsrc_die takes the last of the rows at one address
        Dwarf_Addr next = 0;
        Dwarf_Line* nl = dwarf_onesrcline(lines, i + 1);
        if (nl != nullptr && dwarf_lineaddr(nl, &next) == 0 && next == addr) continue;
      }
      bool end = false;
      dwarf_lineendsequence(l, &end);
      Line row{addr, 0, 0, 0, end ? 1u : 0u};
      if (!end) {
        row.file = SourceString(dwarf_linesrc(l, nullptr, nullptr));
        int v = 0;
        if (dwarf_lineno(l, &v) == 0) row.line = v;
        v = 0;
        if (dwarf_linecol(l, &v) == 0) row.column = v;
      }
      // A row answering exactly as the one before adds nothing to a search for the last row <= pc.
      if (!out_.lines.empty()) {
        const Line& p = out_.lines.back();
        if (!end && !p.end_sequence && p.file == row.file && p.line == row.line && p.column == row.column) continue;
      }
      out_.lines.push_back(row);
    }
  }

  // The file of a ReadLineTable table (0 past it, as SourceString(nullptr)).
  uint32_t TableFile(uint64_t idx) {
    if (idx >= table_ids_.size()) return 0;
    if (table_ids_[idx] == kNoId) {
      table_ids_[idx] = out_.Intern(SourceTreeRelative(*table_->FilePath(static_cast<uint32_t>(idx)), comp_dir_));
    }
    return table_ids_[idx];
  }

  // BuildLines over a ReadLineTable table: the same rows kept, the same values.
  void BuildTableLines() {
    const auto& rows = table_->rows;
    for (size_t i = 0; i < rows.size(); ++i) {
      const LineRow& l = rows[i];
      if (i + 1 < rows.size() && rows[i + 1].addr == l.addr) continue;  // the last row at one address
      Line row{l.addr, 0, 0, 0, l.end_sequence ? 1u : 0u};
      if (!l.end_sequence) {
        row.file = TableFile(l.file);
        row.line = l.line;
        row.column = l.column;
      }
      if (!out_.lines.empty()) {
        const Line& p = out_.lines.back();
        if (!l.end_sequence && !p.end_sequence && p.file == row.file && p.line == row.line && p.column == row.column) {
          continue;
        }
      }
      out_.lines.push_back(row);
    }
  }

  // ConcreteChain's reach: the children of a scope at depth d are looked at while d <= 64.
  uint32_t AddScope(Dwarf_Die* die, int tag, int depth) {
    uint32_t idx = static_cast<uint32_t>(scopes_.size());
    scopes_.push_back(Scope{tag, static_cast<uint32_t>(scope_ranges_.size()), 0, kNone, kNone, kNone, *die, 0});
    if (tag != DW_TAG_namespace) {
      Dwarf_Addr base, start, end;
      ptrdiff_t off = 0;
      while ((off = dwarf_ranges(die, off, &base, &start, &end)) > 0) scope_ranges_.emplace_back(start, end);
      scopes_[idx].ranges_count = static_cast<uint32_t>(scope_ranges_.size()) - scopes_[idx].ranges_begin;
    }
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(die, &child) != 0) return idx;
    do {
      int t = dwarf_tag(&child);
      if (t != DW_TAG_subprogram && t != DW_TAG_inlined_subroutine && t != DW_TAG_lexical_block &&
          t != DW_TAG_namespace) {
        continue;
      }
      AddChild(idx, AddScope(&child, t, depth + 1));
    } while (dwarf_siblingof(&child, &child) == 0);
    return idx;
  }

  void AddChild(uint32_t parent, uint32_t child) {
    Scope& p = scopes_[parent];
    if (p.first_child == kNone) {
      p.first_child = child;
    } else {
      scopes_[p.last_child].next_sibling = child;
    }
    p.last_child = child;
  }

  bool Holds(const Scope& s, uint64_t pc) const {
    for (uint32_t i = s.ranges_begin; i < s.ranges_begin + s.ranges_count; ++i) {
      if (pc >= scope_ranges_[i].first && pc < scope_ranges_[i].second) return true;
    }
    return false;
  }

  // ConcreteChain over the scope tree: the frames (subprograms / inlined subroutines) at pc.
  void Chain(uint32_t parent, uint64_t pc, std::vector<uint32_t>& chain) const {
    for (uint32_t c = scopes_[parent].first_child; c != kNone; c = scopes_[c].next_sibling) {
      const Scope& s = scopes_[c];
      if (s.tag != DW_TAG_namespace && !Holds(s, pc)) continue;
      if (s.tag == DW_TAG_subprogram || s.tag == DW_TAG_inlined_subroutine) chain.push_back(c);
      Chain(c, pc, chain);
      if (s.tag != DW_TAG_namespace) return;
    }
  }

  uint32_t NodeFor(uint32_t parent_node, uint32_t scope) {
    auto [it, fresh] =
        node_ids_.try_emplace(uint64_t{parent_node} << 32 | scope, static_cast<uint32_t>(out_.nodes.size()));
    if (!fresh) return it->second;
    Node n{0, 0, 0, 0, parent_node, 0};
    if (scan_ != nullptr) {
      ScanNode(scopes_[scope].offset, n);
      out_.nodes.push_back(n);
      return it->second;
    }
    Dwarf_Die* die = &scopes_[scope].die;
    const char* name = dwarf_diename(die);
    n.name = out_.Intern(name ? name : "??");
    n.is_subprogram = dwarf_tag(die) == DW_TAG_subprogram;
    Dwarf_Attribute a;
    Dwarf_Word v;
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &a), &v) == 0) {
      if (table_) {
        n.call_file = TableFile(v);
      } else if (files_ && v < nfiles_) {
        n.call_file = SourceString(dwarf_filesrc(files_, v, nullptr, nullptr));
      }
    }
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &a), &v) == 0) n.call_line = static_cast<int>(v);
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &a), &v) == 0) n.call_column = static_cast<int>(v);
    out_.nodes.push_back(n);
    return it->second;
  }

  void BuildSpan(const FunctionRange& r) {
    Span span{r.lo, r.hi, static_cast<uint32_t>(out_.intervals.size()), 0};
    Dwarf_Die sub;
    if (dwarf_offdie(dbg_, r.die, &sub) == nullptr) {
      out_.spans.push_back(span);  // found, but no frames: as the libdw walk
      return;
    }
    auto [tree, fresh] = trees_.try_emplace(r.die, 0);
    if (fresh) {
      tree->second = AddScope(&sub, DW_TAG_subprogram, 1);  // a second range reuses tree and nodes
    }
    AddIntervals(r, tree->second);
  }

  // The span of function range `r` whose scope tree is rooted at `root`: one interval per
  // change of the inline nesting.
  void AddIntervals(const FunctionRange& r, uint32_t root) {
    Span span{r.lo, r.hi, static_cast<uint32_t>(out_.intervals.size()), 0};
    // Where the nesting can change inside [lo, hi): every range boundary of the tree.
    std::vector<uint64_t> cuts{r.lo};
    std::vector<uint32_t> stack{root};
    while (!stack.empty()) {
      uint32_t s = stack.back();
      stack.pop_back();
      for (uint32_t i = scopes_[s].ranges_begin; i < scopes_[s].ranges_begin + scopes_[s].ranges_count; ++i) {
        const auto [lo, hi] = scope_ranges_[i];
        if (lo > r.lo && lo < r.hi) cuts.push_back(lo);
        if (hi > r.lo && hi < r.hi) cuts.push_back(hi);
      }
      for (uint32_t c = scopes_[s].first_child; c != kNone; c = scopes_[c].next_sibling) stack.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<uint32_t> chain;
    for (uint64_t pc : cuts) {
      chain.clear();
      Chain(root, pc, chain);
      uint32_t node = NodeFor(kNone, root);
      for (uint32_t s : chain) node = NodeFor(node, s);
      if (span.intervals_count > 0 && out_.intervals.back().node == node) continue;
      out_.intervals.push_back({pc, node, 0});
      ++span.intervals_count;
    }
    out_.spans.push_back(span);
  }

  // CollectFunctionRanges (libdw_util.cc) on the scanner.
  bool ScanCollectFunctions(const ScanDie& parent, std::vector<FunctionRange>& out, int depth) {
    ScanDie buf[2];
    int cur = 0;
    if (depth > 8) return true;
    int r = scan_->Child(parent, buf[cur]);
    if (r != 0) return r > 0;
    for (;;) {
      const ScanDie& child = buf[cur];
      if (child.tag() == DW_TAG_namespace) {
        if (!ScanCollectFunctions(child, out, depth + 1)) return false;
      } else if (child.tag() == DW_TAG_subprogram) {
        ranges_.clear();
        if (!scan_->Ranges(child, ranges_)) return false;
        for (const auto& [lo, hi] : ranges_) {
          if (hi > lo) out.push_back({lo, hi, child.offset});
        }
      }
      if ((r = scan_->Sibling(child, buf[cur ^ 1])) != 0) return r > 0;
      cur ^= 1;
    }
  }

  // AddScope on the scanner.
  bool ScanAddScope(const ScanDie& die, int tag, int depth, uint32_t& idx) {
    idx = static_cast<uint32_t>(scopes_.size());
    scopes_.push_back(Scope{tag, static_cast<uint32_t>(scope_ranges_.size()), 0, kNone, kNone, kNone, {}, die.offset});
    if (tag != DW_TAG_namespace) {
      if (!scan_->Ranges(die, scope_ranges_)) return false;
      scopes_[idx].ranges_count = static_cast<uint32_t>(scope_ranges_.size()) - scopes_[idx].ranges_begin;
    }
    if (depth > 64) return true;
    ScanDie buf[2];
    int cur = 0;
    int r = scan_->Child(die, buf[cur]);
    if (r != 0) return r > 0;
    for (;;) {
      const ScanDie& child = buf[cur];
      const int t = child.tag();
      if (t == DW_TAG_subprogram || t == DW_TAG_inlined_subroutine || t == DW_TAG_lexical_block ||
          t == DW_TAG_namespace) {
        uint32_t c = 0;
        if (!ScanAddScope(child, t, depth + 1, c)) return false;
        AddChild(idx, c);
      }
      if ((r = scan_->Sibling(child, buf[cur ^ 1])) != 0) return r > 0;
      cur ^= 1;
    }
  }

  bool ScanBuildSpan(const FunctionRange& r) {
    auto [tree, fresh] = trees_.try_emplace(r.die, 0);
    if (fresh) {
      ScanDie sub;
      if (!scan_->ReadAt(r.die, sub) || !ScanAddScope(sub, DW_TAG_subprogram, 1, tree->second)) return false;
    }
    AddIntervals(r, tree->second);
    return !scan_->failed();
  }

  // NodeFor's attributes on the scanner: name (through origins), tag, call site.
  void ScanNode(uint64_t offset, Node& n) {
    ScanDie die;
    if (!scan_->ReadAt(offset, die)) return;
    const char* name = scan_->Name(die);
    // One .debug_str string per name: interned once per unit by its address.
    auto [id, fresh] = name_ids_.try_emplace(name, 0);
    if (fresh) id->second = out_.Intern(name ? name : "??");
    n.name = id->second;
    n.is_subprogram = die.tag() == DW_TAG_subprogram;
    uint64_t v = 0;
    if (const ScanAttr* a = die.get(At::kCallFile); a && scan_->Udata(*a, v) && table_) n.call_file = TableFile(v);
    if (const ScanAttr* a = die.get(At::kCallLine); a && scan_->Udata(*a, v)) n.call_line = static_cast<int>(v);
    if (const ScanAttr* a = die.get(At::kCallColumn); a && scan_->Udata(*a, v)) n.call_column = static_cast<int>(v);
  }

  Dwarf* dbg_;
  Dwarf_Die* cu_;
  UnitPart& out_;
  UnitScanner* scan_ = nullptr;
  const DwarfSections* sections_ = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
  std::unordered_map<const char*, uint32_t> name_ids_;
  std::string comp_dir_;
  Dwarf_Files* files_ = nullptr;  // the libdw path's
  size_t nfiles_ = 0;
  static constexpr uint32_t kNoId = UINT32_MAX;
  std::optional<LineTable> table_;   // the ReadLineTable path's
  std::vector<uint32_t> table_ids_;  // its file index -> string id
  std::unordered_map<const char*, uint32_t> src_ids_;
  std::vector<Scope> scopes_;
  std::vector<std::pair<uint64_t, uint64_t>> scope_ranges_;
  std::unordered_map<Dwarf_Off, uint32_t> trees_;
  std::unordered_map<uint64_t, uint32_t> node_ids_;  // (parent node << 32 | scope) -> node
};

void Append(std::string& out, const void* data, size_t n) { out.append(static_cast<const char*>(data), n); }

// Records kept in fixed-size chunks: no doubling reallocation holds a section twice, and the
// chunks are freed one by one as they are copied into the map.
template <typename T>
class Chunked {
 public:
  void push_back(const T& v) {
    if (chunks_.empty() || chunks_.back().size() == kPerChunk) {
      chunks_.emplace_back();
      chunks_.back().reserve(kPerChunk);
    }
    chunks_.back().push_back(v);
    ++size_;
  }
  size_t size() const { return size_; }
  const T& back() const { return chunks_.back().back(); }
  void MoveInto(std::string& out) {
    for (auto& c : chunks_) {
      Append(out, c.data(), c.size() * sizeof(T));
      std::vector<T>().swap(c);
    }
    chunks_.clear();
    size_ = 0;
  }

 private:
  static constexpr size_t kPerChunk = (1u << 20) / sizeof(T);
  std::vector<std::vector<T>> chunks_;
  size_t size_ = 0;
};

// The map's sections, grown unit by unit in unit order (each unit's part is merged and freed as
// soon as every unit before it is done: the parts of all units are never held at once).
class Assembler {
 public:
  explicit Assembler(size_t units) : units_(units, Unit{0, 0, 0, 0}) {}

  // Unit u's part; every unit before u has been added. False: a section outgrew 32-bit indices.
  bool Add(size_t u, UnitPart& p, std::vector<Arange>& aranges) {
    if (!p.ok) {
      for (Arange& a : aranges) {
        if (a.unit == u) a.unit = kNone;  // as dwarf_addrdie failing on the CU DIE
      }
      return true;
    }
    std::vector<uint32_t> smap(p.strings.size());
    for (size_t i = 0; i < p.strings.size(); ++i) {
      auto it = string_off_.find(p.strings[i]);
      if (it == string_off_.end()) {
        const uint32_t off = static_cast<uint32_t>(strings_.size());
        strings_ += p.strings[i];
        strings_ += '\0';
        string_keys_.push_back(std::move(p.strings[i]));  // the key's storage; no copy
        it = string_off_.emplace(string_keys_.back(), off).first;
      }
      smap[i] = it->second;
    }
    const uint32_t node_base = static_cast<uint32_t>(nodes_.size());
    const uint32_t iv_base = static_cast<uint32_t>(intervals_.size());
    units_[u] = Unit{static_cast<uint32_t>(lines_.size()), static_cast<uint32_t>(p.lines.size()),
                     static_cast<uint32_t>(spans_.size()), static_cast<uint32_t>(p.spans.size())};
    for (Line l : p.lines) {
      l.file = smap[l.file];
      lines_.push_back(l);
    }
    for (Span sp : p.spans) {
      sp.intervals_begin += iv_base;
      spans_.push_back(sp);
    }
    for (Interval i : p.intervals) {
      i.node += node_base;
      intervals_.push_back(i);
    }
    for (Node n : p.nodes) {
      n.name = smap[n.name];
      n.call_file = smap[n.call_file];
      if (n.parent != kNone) n.parent += node_base;
      nodes_.push_back(n);
    }
    p = UnitPart();
    auto too_big = [](size_t n) { return n >= kNone; };
    return !(too_big(strings_.size()) || too_big(lines_.size()) || too_big(spans_.size()) ||
             too_big(intervals_.size()) || too_big(nodes_.size()));
  }

  // The whole file; the sections are freed as they are copied. `layout`: a relocatable file's
  // sections (name, map address of offset 0), in libdwfl's order.
  std::string Finish(Header h, const std::vector<Arange>& aranges,
                     const std::vector<std::pair<std::string, uint64_t>>& layout, AddrMapStats* stats) {
    std::vector<ElfSection> elf_sections;
    for (const auto& [name, base] : layout) {
      auto it = string_off_.find(name);
      if (it == string_off_.end()) {
        const uint32_t off = static_cast<uint32_t>(strings_.size());
        strings_ += name;
        strings_ += '\0';
        string_keys_.push_back(name);
        it = string_off_.emplace(string_keys_.back(), off).first;
      }
      elf_sections.push_back(ElfSection{it->second, 0, base});
    }
    AddrMapStats st{units_.size(), lines_.size(), spans_.size(), intervals_.size(), nodes_.size(), strings_.size(), 0};
    size_t total = sizeof(Header) + strings_.size() + 8 * kSectionCount + aranges.size() * sizeof(Arange) +
                   units_.size() * sizeof(Unit) + lines_.size() * sizeof(Line) + spans_.size() * sizeof(Span) +
                   intervals_.size() * sizeof(Interval) + nodes_.size() * sizeof(Node) +
                   elf_sections.size() * sizeof(ElfSection);
    std::unordered_map<std::string_view, uint32_t>().swap(string_off_);
    std::deque<std::string>().swap(string_keys_);
    std::string out;
    out.reserve(total);
    out.resize(sizeof(Header));
    auto start = [&](Section s, size_t count) {
      while (out.size() % 8 != 0) out.push_back('\0');
      h.sections[s] = SectionRef{out.size(), count};
    };
    start(kStrings, strings_.size());
    Append(out, strings_.data(), strings_.size());
    std::string().swap(strings_);
    start(kAranges, aranges.size());
    Append(out, aranges.data(), aranges.size() * sizeof(Arange));
    start(kUnits, units_.size());
    Append(out, units_.data(), units_.size() * sizeof(Unit));
    start(kLines, lines_.size());
    lines_.MoveInto(out);
    start(kSpans, spans_.size());
    spans_.MoveInto(out);
    start(kIntervals, intervals_.size());
    intervals_.MoveInto(out);
    start(kNodes, nodes_.size());
    nodes_.MoveInto(out);
    start(kElfSections, elf_sections.size());
    Append(out, elf_sections.data(), elf_sections.size() * sizeof(ElfSection));
    h.file_size = out.size();
    std::memcpy(out.data(), &h, sizeof h);
    st.bytes = out.size();
    if (stats) *stats = st;
    return out;
  }

 private:
  std::string strings_ = std::string(1, '\0');
  std::deque<std::string> string_keys_;  // what string_off_'s keys view
  std::unordered_map<std::string_view, uint32_t> string_off_{{std::string_view(), 0}};
  std::vector<Unit> units_;
  Chunked<Line> lines_;
  Chunked<Span> spans_;
  Chunked<Interval> intervals_;
  Chunked<Node> nodes_;
};

}  // namespace

namespace {

// The aranges in libdw's order (UnitsByAddress), and the CUs they name (each once, in first-seen order).
// `after_unit`: as UnitsByAddress's.
void CollectAranges(Dwarf* dbg, std::vector<Arange>& aranges, std::vector<Dwarf_Off>& unit_offsets,
                    const std::function<void()>& after_unit = {}) {
  std::unordered_map<Dwarf_Off, uint32_t> unit_of;
  const UnitsByAddress units(dbg, after_unit);  // .debug_aranges, else the units' own ranges
  for (const UnitsByAddress::Entry& e : units.entries()) {
    Arange a{0, 0, kNone, 0};
    if (e.die != 0 || e.length != 0) {
      a.addr = e.addr;
      a.length = e.length;
      auto [it, fresh] = unit_of.try_emplace(e.die, static_cast<uint32_t>(unit_offsets.size()));
      if (fresh) unit_offsets.push_back(e.die);
      a.unit = it->second;
    }
    aranges.push_back(a);
  }
}

Header MakeHeader(const BuildId& build_id) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.byte_order = kByteOrderMark;
  h.header_size = sizeof(Header);
  h.build_id_size = static_cast<uint32_t>(build_id.raw().size());
  std::memcpy(h.build_id, build_id.raw().data(), build_id.raw().size());
  return h;
}

// A module: libdwfl's relocated view (what Symbolizer::SymbolizeInSection reads), one thread,
// and the section layout that turns (section, offset) into a map address.
absl::StatusOr<std::string> BuildRelocatableAddrMap(const std::string& path, AddrMapStats* stats) {
  RelocatedDwarf r;
  RETURN_IF_ERROR(OpenRelocated(path, r));
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int len = dwfl_module_build_id(r.mod, &bits, &vaddr);
  if (len <= 0 || static_cast<size_t>(len) > sizeof(Header{}.build_id)) {
    return absl::FailedPreconditionError(StrCat(path, " has no usable GNU build-ID"));
  }
  const BuildId build_id = BuildId::FromRaw(std::string_view(reinterpret_cast<const char*>(bits), len));
  std::vector<Arange> aranges;
  std::vector<Dwarf_Off> unit_offsets;
  CollectAranges(r.dwarf, aranges, unit_offsets);
  Assembler map(unit_offsets.size());
  for (size_t u = 0; u < unit_offsets.size(); ++u) {
    UnitPart part;
    Dwarf_Die cu;
    if (dwarf_offdie(r.dwarf, unit_offsets[u], &cu) != nullptr) UnitBuilder(r.dwarf, &cu, part).Build();
    if (!map.Add(u, part, aranges)) {
      return absl::ResourceExhaustedError(StrCat(path, ": too much debug info for one address map"));
    }
  }
  std::vector<std::pair<std::string, uint64_t>> layout;
  for (const auto& [name, base] : r.SectionBases()) layout.emplace_back(name, base - r.bias);
  r = RelocatedDwarf();  // libdwfl's state goes before the map is assembled
  return map.Finish(MakeHeader(build_id), aranges, layout, stats);
}

}  // namespace

namespace {

// Returned by BuildLinked when the scanner declined a unit: the file is built again by libdw.
constexpr char kScannerDeclined[] = "the DIE scanner declined a unit";

absl::StatusOr<std::string> BuildLinked(const std::string& path, unsigned jobs, AddrMapStats* stats,
                                        uint64_t handle_budget, bool use_scanner,
                                        const SectionLayout* layout = nullptr);

// A module (ET_REL): its relocated copy (relocated_elf.h) built as a linked file is, by the DIE
// scanner and the line reader, carrying the copy's layout — the map libdwfl's relocated view
// gives, byte for byte (the same sections at the same addresses, the same DWARF bytes). Through
// libdwfl (BuildRelocatableAddrMap) when symdex declines to relocate it, when the scanner
// declines a unit or the build fails, and when SYMDEX_MODULES_VIA=libdwfl or libdw's readers
// are asked for: one reader per file.
absl::StatusOr<std::string> BuildModule(const std::string& path, unsigned jobs, AddrMapStats* stats,
                                        uint64_t handle_budget, bool use_scanner) {
  if (use_scanner && !ModulesViaLibdwflForced()) {
    if (auto copy = RelocatedElf::Make(path); copy.ok()) {
      auto map = BuildLinked(copy->path(), jobs, stats, handle_budget, true, &copy->layout());
      if (map.ok()) return map;
    }
  }
  if (stats != nullptr) *stats = AddrMapStats();
  return BuildRelocatableAddrMap(path, stats);
}

}  // namespace

absl::StatusOr<std::string> BuildAddrMapFromCopy(const RelocatedElf& copy, AddrMapStats* stats) {
  return BuildLinked(copy.path(), 1, stats, kUnitBytesPerDwarfHandle, true, &copy.layout());
}

absl::StatusOr<std::string> BuildAddrMap(const std::string& original, unsigned jobs, AddrMapStats* stats,
                                         uint64_t handle_budget) {
  if (handle_budget == 0) handle_budget = kUnitBytesPerDwarfHandle;
  // Compressed sections: read from a decompressed copy (plain_elf.h), as a plain file is.
  ASSIGN_OR_RETURN(const PlainElf plain, PlainElf::Open(original, std::max(1u, jobs)));
  const std::string& path = plain.path();
  const bool use_scanner = !LibdwDiesForced() && !LibdwLinesForced();
  auto map = BuildLinked(path, jobs, stats, handle_budget, use_scanner);
  // A unit the scanner declines (a form it does not read, or damage) sends the whole file to
  // libdw: libdw's answers for a damaged file depend on what it was asked before, so a unit read
  // by libdw amid a scanner pass could differ from a libdw-only build (die_scanner.h).
  if (use_scanner && !map.ok() && map.status().message() == kScannerDeclined) {
    map = BuildLinked(path, jobs, stats, handle_budget, false);
  }
  if (!map.ok()) return plain.Explain(map.status());
  return map;
}

namespace {

absl::StatusOr<std::string> BuildLinked(const std::string& path, unsigned jobs, AddrMapStats* stats,
                                        uint64_t handle_budget, bool use_scanner, const SectionLayout* layout) {
  // One bounded handle per thread (libdw_util.h), all ended before the map is assembled.
  auto first = std::make_unique<BoundedDwarf>();
  RETURN_IF_ERROR(first->Open(path, handle_budget));
  GElf_Ehdr eh;
  if (gelf_getehdr(first->elf(), &eh) == nullptr) return absl::InvalidArgumentError(StrCat(path, ": no ELF header"));
  if (eh.e_type == ET_REL) {
    first.reset();
    return BuildModule(path, jobs, stats, handle_budget, use_scanner);
  }
  // (A module's copy: the build-ID as BuildRelocatableAddrMap's dwfl_module_build_id finds it.)
  std::optional<BuildId> build_id = layout != nullptr ? LibdwflBuildId(first->elf()) : ElfBuildId(first->elf());
  if (!build_id || build_id->raw().size() > sizeof(Header{}.build_id)) {
    return absl::FailedPreconditionError(StrCat(path, " has no usable GNU build-ID"));
  }

  std::vector<Arange> aranges;
  std::vector<Dwarf_Off> unit_offsets;
  CollectAranges(first->dwarf(), aranges, unit_offsets, [&] { first->HeaderRead(); });
  // What each unit costs a handle's budget: its size in .debug_info.
  std::vector<uint64_t> unit_bytes(unit_offsets.size(), 0);
  std::vector<uint64_t> unit_header(unit_offsets.size(), UINT64_MAX);  // UINT64_MAX: unknown
  std::vector<Dwarf_Off> all_units;
  {
    std::unordered_map<Dwarf_Off, UnitSpan> span_at;
    for (const UnitSpan& span : UnitSizes(*first)) {
      span_at.emplace(span.die, span);
      all_units.push_back(span.die);
    }
    for (size_t u = 0; u < unit_offsets.size(); ++u) {
      if (auto it = span_at.find(unit_offsets[u]); it != span_at.end()) {
        unit_bytes[u] = it->second.size;
        unit_header[u] = it->second.header;
      }
    }
  }
  first->SetUnits(all_units);

  std::vector<UnitPart> parts(unit_offsets.size());
  Assembler map(parts.size());
  uint64_t recycles = 0;
  std::atomic<uint64_t> fast_units{0};
  std::atomic<uint64_t> scanned_units{0};
  std::atomic<bool> declined{false};
  jobs = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(std::max<size_t>(1, parts.size()))));
  {
    std::atomic<size_t> next{0};
    std::vector<absl::Status> errors(jobs);
    std::mutex mu;  // guards done, merged, map and the parts being merged
    std::vector<char> done(parts.size(), 0);
    size_t merged = 0;
    bool overflow = false;
    auto work = [&](unsigned tid, BoundedDwarf* h) {
      UnitScanner scanner;
      for (size_t u; (u = next.fetch_add(1)) < parts.size();) {
        bool built = false;
        if (use_scanner) {
          // The scanner's read of the unit (die_scanner.h); a unit it declines ends the pass.
          if (declined.load(std::memory_order_relaxed)) return;
          if (auto sections = LinkedDwarfSections(h->dwarf()); sections.ok() && unit_header[u] != UINT64_MAX) {
            sections->fd = h->fd();
            built = scanner.Open(*sections, unit_header[u]) && UnitBuilder(scanner, *sections, parts[u]).BuildScanned();
          }
          if (!built) {
            declined = true;
            return;
          }
          ++scanned_units;
        } else {
          h->PrepareUnits();
          Dwarf_Die cu;
          if (dwarf_offdie(h->dwarf(), unit_offsets[u], &cu) != nullptr) UnitBuilder(h->dwarf(), &cu, parts[u]).Build();
        }
        fast_units += parts[u].fast_lines;
        {
          std::lock_guard<std::mutex> lock(mu);
          done[u] = 1;
          for (; merged < parts.size() && done[merged]; ++merged) {
            if (!overflow && !map.Add(merged, parts[merged], aranges)) overflow = true;
            parts[merged] = UnitPart();
          }
        }
        if (auto recycled = h->Read(unit_bytes[u]); !recycled.ok()) {
          errors[tid] = recycled.status();
          return;
        }
      }
    };
    ASSIGN_OR_RETURN(recycles, OnBoundedThreads(jobs, path, handle_budget, all_units, *first, work));
    for (const absl::Status& e : errors) RETURN_IF_ERROR(e);
    if (declined) return absl::AbortedError(kScannerDeclined);
    if (overflow) return absl::ResourceExhaustedError(StrCat(path, ": too much debug info for one address map"));
  }
  first.reset();  // the file's pages and libdw's caches go before the map is assembled

  // A module's copy: its sections as libdwfl lays them out, in the order it reports them.
  std::vector<std::pair<std::string, uint64_t>> sections;
  if (layout != nullptr) {
    for (const LaidOutSection& s : layout->sections()) sections.emplace_back(s.name, s.start);
  }
  std::string bytes = map.Finish(MakeHeader(*build_id), aranges, sections, stats);
  if (stats) {
    stats->handle_recycles = recycles;
    stats->units_fast_lines = fast_units.load();
    stats->units_scanned = scanned_units.load();
  }
  return bytes;
}

}  // namespace

std::string AddrMapPath(const std::string& dir, const std::string& build_id_hex) {
  return StrCat(dir, "/", build_id_hex, ".addrmap");
}

std::vector<TempFile> AddrMapTempFiles(const std::string& dir) { return FindTempFiles(dir, kAddrMapTempMarker); }

int RemoveStaleAddrMapTempFiles(const std::string& dir) { return RemoveStaleTempFiles(dir, kAddrMapTempMarker); }

absl::Status WriteAddrMapFile(const std::string& path, std::string_view bytes) {
  // The map holds live addresses: the directory and the file are 0750/0640 from the start.
  // (Temporary files a killed writer left behind are removed once per index run, by
  // open_index.cc and BuildAddrMaps: not here, where a kernel's 1,100 module maps would scan the
  // directory 1,100 times.) "<id>.addrmap.tmp.<pid>": kAddrMapTempMarker.
  return InstallPrivateFile(path, bytes, ".tmp.", "addr-map-temp", "addr-map-installed");
}

absl::Status WriteAddrMapFileFrom(const std::string& path, const std::function<absl::Status(int fd)>& write) {
  return InstallPrivateFileFrom(path, ".tmp.", "addr-map-temp", "addr-map-installed", write);
}

}  // namespace symdex::debuginfo
