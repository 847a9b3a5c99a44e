#include "server/debuginfo/symbolize/symbolizer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "server/common/strings.h"
#include "server/debuginfo/dwarf/libdw_util.h"
#include "server/debuginfo/dwarf/source_path.h"
#include "server/debuginfo/files/plain_elf.h"

namespace symdex::debuginfo {

// A CU's top-level functions by address, built the first time an address falls in the CU:
// later addresses in it go straight to their subprogram instead of walking every top-level DIE.
struct CuFunctions {
  std::vector<FunctionRange> spans;  // CollectFunctionRanges order
  std::string comp_dir;
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
};

struct Symbolizer::File {
  std::optional<PlainElf> plain;  // a file with compressed sections: its decompressed copy, read instead
  UniqueFd fd;                    // closed by its destructor, after ~File has ended the handles made from it
  Elf* elf = nullptr;
  Dwarf* dwarf = nullptr;                        // owned unless dwfl is set (then libdwfl owns it)
  Dwfl* dwfl = nullptr;                          // relocatable files: libdwfl's relocated view
  Dwarf_Addr bias = 0;                           // dwfl address = DWARF address + bias
  std::map<std::string, uint64_t> section_base;  // relocatable: section -> dwfl address
  std::unordered_map<Dwarf_Off, CuFunctions> cus;
  std::unique_ptr<UnitsByAddress> units;  // made at the first address asked
  Dwarf_CFI* cfi = nullptr;               // .debug_frame (the Dwarf's), else .eh_frame (ours)
  bool cfi_read = false, cfi_owned = false;
  ~File() {
    if (cfi_owned) dwarf_cfi_end(cfi);
    if (dwfl) {
      dwfl_end(dwfl);
    } else if (dwarf) {
      dwarf_end(dwarf);
    }
    if (elf) elf_end(elf);
  }
};

namespace {

// The concrete nesting at pc, outermost first: subprogram, then each inlined_subroutine down
// to the innermost (lexical blocks are descended through, not returned). libdw's
// dwarf_getscopes switches to the abstract origin's scopes after an inlined instance, which
// loses the callers; this walk keeps them.
void ConcreteChain(Dwarf_Die* parent, Dwarf_Addr pc, std::vector<Dwarf_Die>& chain, int depth) {
  Dwarf_Die child;
  if (depth > 64 || dwarf_child(parent, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block &&
        tag != DW_TAG_namespace) {
      continue;
    }
    if (tag != DW_TAG_namespace && !RangesContain(&child, pc)) continue;
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) chain.push_back(child);
    ConcreteChain(&child, pc, chain, depth + 1);
    if (tag != DW_TAG_namespace) return;  // ranges of siblings do not overlap
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

void Symbolizer::Clear() {
  files_.clear();
  maps_.clear();
}

absl::StatusOr<Symbolizer::File*> Symbolizer::Open(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second.get();
  InitLibelf();
  auto f = std::make_unique<File>();
  ASSIGN_OR_RETURN(f->plain, PlainElf::Open(path));  // compressed sections (plain_elf.h)
  f->fd.Reset(::open(f->plain->path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!f->fd) return absl::NotFoundError(StrCat("cannot open ", path, ": ", std::strerror(errno)));
  f->elf = elf_begin(f->fd.get(), ELF_C_READ_MMAP, nullptr);
  if (f->elf == nullptr) return absl::InvalidArgumentError(StrCat(path, ": not an ELF file"));
  f->dwarf = dwarf_begin_elf(f->elf, DWARF_C_READ, nullptr);
  if (f->dwarf == nullptr) return absl::InvalidArgumentError(StrCat(path, ": no DWARF"));
  File* raw = f.get();
  files_.emplace(path, std::move(f));
  return raw;
}

namespace {

// Every line-table address starting a statement of file_suffix:line (whole path components of
// the source-tree relative path), sorted and unique. Address 0 is dropped for linked images
// (discarded code), kept for relocatable ones (the start of the first section).
std::vector<uint64_t> StatementAddresses(Dwarf* dw, const std::string& file_suffix, int line, bool keep_zero) {
  std::vector<uint64_t> out;
  Dwarf_Off off = 0, next;
  size_t hsize;
  while (dwarf_next_unit(dw, off, &next, &hsize, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die cu;
    if (dwarf_offdie(dw, off + hsize, &cu) != nullptr) {
      Dwarf_Lines* lines;
      size_t n;
      Dwarf_Attribute a;
      const char* comp_dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &a));
      if (dwarf_getsrclines(&cu, &lines, &n) == 0) {
        std::map<const char*, bool> file_ok;  // libdw interns file names per CU
        for (size_t i = 0; i < n; ++i) {
          Dwarf_Line* l = dwarf_onesrcline(lines, i);
          int ln = 0;
          bool stmt = false;
          if (dwarf_lineno(l, &ln) != 0 || ln != line || dwarf_linebeginstatement(l, &stmt) != 0 || !stmt) continue;
          const char* src = dwarf_linesrc(l, nullptr, nullptr);
          if (src == nullptr) continue;
          auto it = file_ok.find(src);
          if (it == file_ok.end()) {
            std::string rel = SourceTreeRelative(src, comp_dir ? comp_dir : "");
            bool ok = rel.size() >= file_suffix.size() && rel.ends_with(file_suffix) &&
                      (rel.size() == file_suffix.size() || rel[rel.size() - file_suffix.size() - 1] == '/');
            it = file_ok.emplace(src, ok).first;
          }
          Dwarf_Addr addr;
          if (it->second && dwarf_lineaddr(l, &addr) == 0 && (addr != 0 || keep_zero)) out.push_back(addr);
        }
      }
    }
    off = next;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The innermost DW_TAG_inlined_subroutine named `name` under `scope` whose ranges hold `pc`
// (through lexical blocks and the copies inlined into copies).
void InnermostInlined(Dwarf_Die* scope, Dwarf_Addr pc, const std::string& name, int depth,
                      std::optional<Dwarf_Die>& found) {
  Dwarf_Die child;
  if (depth > 64 || dwarf_child(scope, &child) != 0) return;
  do {
    const int tag = dwarf_tag(&child);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block) continue;
    // (A block without addresses of its own may still hold copies that have some.)
    const bool placed = dwarf_hasattr(&child, DW_AT_low_pc) || dwarf_hasattr(&child, DW_AT_ranges);
    if ((placed || tag == DW_TAG_inlined_subroutine) && dwarf_haspc(&child, pc) != 1) continue;
    if (tag == DW_TAG_inlined_subroutine) {
      const char* n = dwarf_diename(&child);
      if (n != nullptr && name == n) found = child;
    }
    InnermostInlined(&child, pc, name, depth + 1, found);
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

absl::StatusOr<std::vector<uint64_t>> Symbolizer::LineAddresses(const std::string& path, const std::string& file_suffix,
                                                                int line) {
  ASSIGN_OR_RETURN(File * f, Open(path));
  return StatementAddresses(f->dwarf, file_suffix, line, false);
}

absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> Symbolizer::LineAddressesInSections(
    const std::string& path, const std::string& file_suffix, int line) {
  ASSIGN_OR_RETURN(File * f, OpenRelocatable(path));
  std::vector<std::pair<std::string, uint64_t>> out;
  for (uint64_t a : StatementAddresses(f->dwarf, file_suffix, line, true)) {
    // The section libdwfl laid out at the highest base at or below the address.
    const uint64_t at = a + f->bias;
    const std::pair<const std::string, uint64_t>* best = nullptr;
    for (const auto& sec : f->section_base) {
      if (sec.second <= at && (best == nullptr || sec.second > best->second)) best = &sec;
    }
    if (best != nullptr) out.emplace_back(best->first, at - best->second);
  }
  return out;
}

absl::StatusOr<Symbolizer::File*> Symbolizer::OpenRelocatable(const std::string& path) {
  const std::string key = "rel:" + path;
  auto it = files_.find(key);
  if (it != files_.end()) return it->second.get();
  ASSIGN_OR_RETURN(PlainElf plain, PlainElf::Open(path));  // compressed sections (plain_elf.h)
  RelocatedDwarf r;
  if (absl::Status s = OpenRelocated(plain.path(), r); !s.ok()) return plain.Explain(s);
  auto f = std::make_unique<File>();
  f->plain = std::move(plain);
  for (auto& [name, base] : r.SectionBases()) f->section_base.emplace(std::move(name), base);
  f->dwarf = r.dwarf;
  f->bias = r.bias;
  f->dwfl = r.dwfl.release();  // File ends it
  File* raw = f.get();
  files_.emplace(key, std::move(f));
  return raw;
}

absl::StatusOr<std::vector<Frame>> Symbolizer::SymbolizeInSection(const std::string& path,
                                                                  const std::string& build_id_hex,
                                                                  const std::string& section, uint64_t offset) {
  if (const AddrMap* m = MapFor(build_id_hex); m != nullptr && m->relocatable()) {
    std::optional<uint64_t> base = m->SectionBase(section);
    if (!base) return absl::NotFoundError(StrCat(path, " has no section ", section));
    return m->FramesAt(*base + offset);
  }
  ASSIGN_OR_RETURN(File * f, OpenRelocatable(path));
  auto it = f->section_base.find(section);
  if (it == f->section_base.end()) return absl::NotFoundError(StrCat(path, " has no section ", section));
  return FramesAt(f, it->second + offset - f->bias);
}

const AddrMap* Symbolizer::MapFor(const std::string& build_id_hex) {
  if (addr_map_dir_.empty() || build_id_hex.empty()) return nullptr;
  // A missing or damaged map costs speed, not answers: libdw gives the same frames. Looked for
  // again after a while, so a map `symdex index` writes later (or repairs) is picked up.
  const auto now = std::chrono::steady_clock::now();
  auto it = maps_.find(build_id_hex);
  if (it == maps_.end() || (!it->second.map && now - it->second.looked >= std::chrono::seconds(10))) {
    auto m = MappedAddrMap::Open(AddrMapPath(addr_map_dir_, build_id_hex), build_id_hex);
    it = maps_.insert_or_assign(build_id_hex, MapSlot{m.ok() ? std::move(*m) : nullptr, now}).first;
  }
  return it->second.map ? &it->second.map->map() : nullptr;
}

absl::StatusOr<std::vector<Frame>> Symbolizer::SymbolizeLinked(const std::string& path, const std::string& build_id_hex,
                                                               uint64_t addr) {
  if (const AddrMap* m = MapFor(build_id_hex); m != nullptr && !m->relocatable()) return m->FramesAt(addr);
  return Symbolize(path, addr);
}

absl::StatusOr<std::vector<Frame>> Symbolizer::Symbolize(const std::string& path, uint64_t addr) {
  ASSIGN_OR_RETURN(File * f, Open(path));
  return FramesAt(f, addr);
}

CuFunctions* Symbolizer::UnitOf(File* f, uint64_t addr, Dwarf_Die* cu) {
  // .debug_aranges first (one small section): a unit it names for the address is the unit. Only
  // an address it does not cover (a clang build names its assembler units only) takes the walk
  // over every unit header, which touches a page of .debug_info per unit.
  if (f->units || dwarf_addrdie(f->dwarf, addr, cu) == nullptr) {
    if (!f->units) f->units = std::make_unique<UnitsByAddress>(f->dwarf);
    if (f->units->Die(f->dwarf, addr, cu) == nullptr) return nullptr;
  }
  auto [it, fresh] = f->cus.try_emplace(dwarf_dieoffset(cu));
  CuFunctions& fns = it->second;
  if (fresh) {
    Dwarf_Attribute a;
    const char* comp_dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &a));
    fns.comp_dir = comp_dir ? comp_dir : "";
    if (dwarf_getsrcfiles(cu, &fns.files, &fns.nfiles) != 0) fns.files = nullptr;
    fns.spans = CollectFunctionRanges(cu);
  }
  return &fns;
}

absl::StatusOr<FetchSite> Symbolizer::SiteOf(const std::string& path, const CopyAt& at, const FetchContext& ctx) {
  File* f = nullptr;
  uint64_t symbol = at.symbol;
  if (at.section.empty()) {
    ASSIGN_OR_RETURN(f, Open(path));
  } else {
    ASSIGN_OR_RETURN(f, OpenRelocatable(path));
    auto it = f->section_base.find(at.section);
    if (it == f->section_base.end()) return absl::NotFoundError(StrCat(path, " has no section ", at.section));
    symbol = it->second + at.symbol - f->bias;
  }
  // The subprogram whose code starts at the symbol, or just past its patchable-entry NOPs (arm64:
  // DWARF's low_pc is after them).
  FetchSite site;
  const uint64_t pad = ctx.arch != nullptr ? ctx.arch->EntryPad() : 0;
  bool found = false;
  for (uint64_t probe : {symbol, symbol + pad}) {
    CuFunctions* fns = UnitOf(f, probe, &site.cu);
    if (fns == nullptr) continue;
    ptrdiff_t k = FindFunctionRange(fns->spans.data(), fns->spans.size(), probe);
    if (k < 0 || fns->spans[k].lo < symbol) continue;
    if (dwarf_offdie(f->dwarf, fns->spans[k].die, &site.function) == nullptr) continue;
    found = true;
    break;
  }
  if (!found) {
    return absl::NotFoundError(
        StrCat(path, " has no DWARF function at this copy's address (0x", fmt::format("{:x}", symbol), ")"));
  }
  const char* name = dwarf_diename(&site.function);
  if (!at.dwarf_name.empty() && (name == nullptr || at.dwarf_name != name)) {
    return absl::NotFoundError(StrCat(path, ": the DWARF function at this copy's address is '", name ? name : "?",
                                      "', not '", at.dwarf_name, "'"));
  }
  Dwarf_Addr entry = 0;
  if (dwarf_entrypc(&site.function, &entry) != 0) entry = symbol;
  site.symbol = symbol;
  site.entry = entry;
  site.pc = symbol + at.offset;
  site.ret = at.ret;
  site.entry_slack = at.entry_slack;
  if (!f->cfi_read) {
    f->cfi_read = true;
    f->cfi = dwarf_getcfi(f->dwarf);
    if (f->cfi == nullptr && f->elf != nullptr) {
      f->cfi = dwarf_getcfi_elf(f->elf);
      f->cfi_owned = f->cfi != nullptr;
    }
  }
  site.cfi = f->cfi;
  if (!RangesContain(&site.function, site.pc < entry ? entry : site.pc)) {
    return absl::InvalidArgumentError(
        StrCat("+0x", fmt::format("{:x}", at.offset), " is outside ", name ? name : "?", "'s code"));
  }
  site.frame = site.function;
  if (at.inlined.empty()) return site;
  std::optional<Dwarf_Die> copy;
  InnermostInlined(&site.function, site.pc, at.inlined, 0, copy);
  if (!copy) {
    return absl::NotFoundError(
        StrCat("no copy of ", at.inlined, " is inlined at ", name ? name : "?", "+0x", fmt::format("{:x}", at.offset)));
  }
  site.function = *copy;
  site.entry = site.pc;  // the copy's first address: no ftrace site before it
  site.entry_slack = 0;
  return site;
}

absl::StatusOr<std::string> Symbolizer::InlinedDeclFile(const std::string& path, const CopyAt& at,
                                                        const FetchContext& ctx) {
  ASSIGN_OR_RETURN(FetchSite site, SiteOf(path, at, ctx));
  const char* file = dwarf_decl_file(&site.function);
  if (file == nullptr) return std::string();
  Dwarf_Attribute comp_dir;
  const char* dir = dwarf_formstring(dwarf_attr(&site.cu, DW_AT_comp_dir, &comp_dir));
  return SourceTreeRelative(file, dir ? dir : "");
}

absl::StatusOr<CompiledArgs> Symbolizer::FetchArgs(const std::string& path, const CopyAt& at,
                                                   const std::vector<ingest::ProbeArg>& args, const FetchContext& ctx) {
  ASSIGN_OR_RETURN(FetchSite site, SiteOf(path, at, ctx));
  return CompileFetchArgs(site, args, ctx);
}

absl::StatusOr<LinePlaces> Symbolizer::BodyLines(const std::string& path, const CopyAt& at, int line, bool relative,
                                                 const FetchContext& ctx) {
  CopyAt entry = at;
  entry.offset = 0;
  ASSIGN_OR_RETURN(FetchSite site, SiteOf(path, entry, ctx));
  ASSIGN_OR_RETURN(LinePlaces places, FindLinePlaces(site, line, relative));
  for (auto& pc : places.pcs) pc -= site.symbol;
  for (auto& s : places.shared) s.first -= site.symbol;
  return places;
}

absl::StatusOr<std::vector<ScopeVariable>> Symbolizer::Variables(const std::string& path, const CopyAt& at,
                                                                 const FetchContext& ctx) {
  ASSIGN_OR_RETURN(FetchSite site, SiteOf(path, at, ctx));
  return ScopeVariables(site, ctx);
}

std::vector<Frame> Symbolizer::FramesAt(File* f, uint64_t addr) {
  std::vector<Frame> frames;
  Dwarf_Die cu;
  CuFunctions* found = UnitOf(f, addr, &cu);
  if (found == nullptr) return frames;
  CuFunctions& fns = *found;
  Dwarf_Attribute a;
  const std::string& cdir = fns.comp_dir;
  Dwarf_Files* files = fns.files;
  size_t nfiles = fns.nfiles;

  Frame leaf;
  if (Dwarf_Line* line = dwarf_getsrc_die(&cu, addr)) {
    const char* src = dwarf_linesrc(line, nullptr, nullptr);
    leaf.file = src ? SourceTreeRelative(src, cdir) : "";
    dwarf_lineno(line, &leaf.line);
    dwarf_linecol(line, &leaf.column);
  }
  std::vector<Dwarf_Die> chain;
  // The subprogram whose range holds addr (ranges of distinct functions do not overlap; the
  // last span starting at or below addr that still covers it), then the inline nesting in it.
  ptrdiff_t k = FindFunctionRange(fns.spans.data(), fns.spans.size(), addr);
  if (k >= 0) {
    Dwarf_Die sub;
    if (dwarf_offdie(f->dwarf, fns.spans[k].die, &sub) != nullptr) {
      chain.push_back(sub);
      ConcreteChain(&sub, addr, chain, 1);
    }
  }
  Frame cur = leaf;
  for (size_t k = chain.size(); k-- > 0;) {
    Dwarf_Die* scope = &chain[k];
    const char* name = dwarf_diename(scope);
    cur.function = name ? name : "??";
    frames.push_back(cur);
    if (dwarf_tag(scope) == DW_TAG_subprogram) break;
    // The caller's location is where this inline was called from.
    Frame caller;
    Dwarf_Word v;
    if (dwarf_formudata(dwarf_attr(scope, DW_AT_call_file, &a), &v) == 0 && files && v < nfiles) {
      const char* src = dwarf_filesrc(files, v, nullptr, nullptr);
      caller.file = src ? SourceTreeRelative(src, cdir) : "";
    }
    if (dwarf_formudata(dwarf_attr(scope, DW_AT_call_line, &a), &v) == 0) caller.line = static_cast<int>(v);
    if (dwarf_formudata(dwarf_attr(scope, DW_AT_call_column, &a), &v) == 0) caller.column = static_cast<int>(v);
    cur = caller;
  }
  if (frames.empty() && leaf.line > 0) frames.push_back(leaf);  // line table only (assembly)
  return frames;
}

}  // namespace symdex::debuginfo
