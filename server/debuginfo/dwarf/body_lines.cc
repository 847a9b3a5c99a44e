#include "server/debuginfo/dwarf/body_lines.h"

#include <dwarf.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "server/common/strings.h"
#include "server/debuginfo/dwarf/libdw_util.h"
#include "server/debuginfo/dwarf/source_path.h"

namespace symdex::debuginfo {
namespace {

// Do two spellings of a source path name the same file? One a path-component tail of the
// other ("fs/read_write.c" and "/build/linux/fs/read_write.c"), as perf's strtailcmp.
bool SameSourceFile(std::string_view a, std::string_view b) {
  if (a.size() < b.size()) std::swap(a, b);
  if (b.empty() || !a.ends_with(b)) return false;
  return a.size() == b.size() || b.front() == '/' || a[a.size() - b.size() - 1] == '/';
}

struct InlinedCalls {
  Dwarf_Die function;
  std::string_view file;
  int line;
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  std::vector<Dwarf_Addr> pcs;

  // Functions inlined by a call written on the line: their entries, at any depth.
  void Inlined(Dwarf_Die* parent, int depth) {
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(parent, &child) != 0) return;
    do {
      const int tag = dwarf_tag(&child);
      if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block) continue;
      if (tag == DW_TAG_inlined_subroutine && files != nullptr) {
        Dwarf_Attribute a;
        Dwarf_Word file_index = 0, call_line = 0;
        if (dwarf_formudata(dwarf_attr(&child, DW_AT_call_line, &a), &call_line) == 0 &&
            static_cast<int64_t>(call_line) == line &&
            dwarf_formudata(dwarf_attr(&child, DW_AT_call_file, &a), &file_index) == 0 && file_index < nfiles) {
          const char* f = dwarf_filesrc(files, file_index, nullptr, nullptr);
          Dwarf_Addr entry = 0;
          if (f != nullptr && SameSourceFile(f, file) && dwarf_entrypc(&child, &entry) == 0 &&
              RangesContain(&function, entry)) {
            pcs.push_back(entry);
          }
        }
      }
      Inlined(&child, depth + 1);
    } while (dwarf_siblingof(&child, &child) == 0);
  }
};

}  // namespace

absl::StatusOr<LinePlaces> FindLinePlaces(const FetchSite& site, int line, bool relative) {
  Dwarf_Die fn = site.function;
  Dwarf_Die cu = site.cu;
  const char* name = dwarf_diename(&fn);
  const std::string who = name ? name : "this copy";
  LinePlaces out;
  const char* decl_file = dwarf_decl_file(&fn);
  if (decl_file == nullptr || dwarf_decl_line(&fn, &out.decl_line) != 0) {
    return absl::FailedPreconditionError(StrCat(who, ": its DWARF names no declaration file and line"));
  }
  const std::string raw_file = decl_file;  // as the unit spells it: what its rows are compared with
  Dwarf_Attribute comp_dir;
  const char* dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &comp_dir));
  out.file = SourceTreeRelative(raw_file, dir ? dir : "");
  out.line = relative ? out.decl_line + line : line;
  Dwarf_Lines* lines = nullptr;
  size_t nlines = 0;
  if (dwarf_getsrclines(&cu, &lines, &nlines) != 0) {
    return absl::FailedPreconditionError(StrCat(who, ": its unit has no line table"));
  }
  InlinedCalls w{.function = fn, .file = raw_file, .line = out.line};
  if (dwarf_getsrcfiles(&cu, &w.files, &w.nfiles) != 0) w.files = nullptr;
  std::set<int> with_code;  // the lines of the file the copy has statements for
  // Each address's first statement row (rows are in address order): the line a probe there
  // belongs to (perf's cu_find_lineinfo), as (is it of the copy's file, line).
  std::map<Dwarf_Addr, std::pair<bool, int>> first_statement;
  for (size_t i = 0; i < nlines; ++i) {
    Dwarf_Line* l = dwarf_onesrcline(lines, i);
    bool flag = false;
    int lineno = 0;
    Dwarf_Addr addr = 0;
    if (l == nullptr || dwarf_lineendsequence(l, &flag) != 0 || flag) continue;
    if (dwarf_linebeginstatement(l, &flag) != 0 || !flag) continue;
    if (dwarf_lineno(l, &lineno) != 0 || dwarf_lineaddr(l, &addr) != 0) continue;
    const char* src = dwarf_linesrc(l, nullptr, nullptr);
    const bool own_file = src != nullptr && SameSourceFile(src, raw_file);
    first_statement.try_emplace(addr, own_file, lineno);
    if (!own_file || !RangesContain(&fn, addr)) continue;
    with_code.insert(lineno);
    if (lineno == out.line) w.pcs.push_back(addr);
  }
  if (out.line == out.decl_line) w.pcs.push_back(site.entry);
  w.Inlined(&fn, 0);
  std::sort(w.pcs.begin(), w.pcs.end());
  w.pcs.erase(std::unique(w.pcs.begin(), w.pcs.end()), w.pcs.end());
  for (Dwarf_Addr pc : w.pcs) {
    // The line a probe at pc belongs to: a function entry's is its declaration line, else the
    // row the line table gives for the address.
    int own = out.line;
    if (pc == site.entry) {
      own = out.decl_line;
    } else if (auto it = first_statement.find(pc); it != first_statement.end() && it->second.first) {
      own = it->second.second;
    }
    if (own == out.line) {
      out.pcs.push_back(pc);
    } else {
      out.shared.emplace_back(pc, own);
    }
  }
  if (!out.pcs.empty()) return out;
  const std::string asked = relative ? fmt::format("line {} of {} ({}:{})", line, who, out.file, out.line)
                                     : fmt::format("{}:{}", out.file, out.line);
  if (!out.shared.empty()) {
    std::vector<std::string> where;
    for (const auto& [pc, own] : out.shared) {
      where.push_back(fmt::format("+0x{:x} (line {}, {:+d} from {}'s declaration)", pc - site.symbol, own,
                                  own - out.decl_line, who));
    }
    return absl::InvalidArgumentError(StrCat(
        asked, " shares every address it has with another line: ", StrJoin(where, ", "), "; probe that line instead"));
  }
  if (with_code.empty()) {
    return absl::InvalidArgumentError(StrCat(who, " has no statement of its own file ", out.file, " to probe"));
  }
  // The lines that do have code, nearest first.
  std::vector<int> near(with_code.begin(), with_code.end());
  std::stable_sort(near.begin(), near.end(),
                   [&](int a, int b) { return std::abs(a - out.line) < std::abs(b - out.line); });
  if (near.size() > 5) near.resize(5);
  std::vector<std::string> shown;
  for (int n : near) {
    shown.push_back(relative ? fmt::format("{} ({})", n - out.decl_line, n) : std::to_string(n));
  }
  const bool inside = out.line >= *with_code.begin() && out.line <= *with_code.rbegin();
  return absl::InvalidArgumentError(StrCat(asked, inside ? " has no code in this copy" : " is outside this copy",
                                           " (its statements span ", out.file, ":", *with_code.begin(), "-",
                                           *with_code.rbegin(), "); the nearest lines with code",
                                           relative ? " (relative, absolute)" : "", ": ", StrJoin(shown, ", ")));
}

}  // namespace symdex::debuginfo
