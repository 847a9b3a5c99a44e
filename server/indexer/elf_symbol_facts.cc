// Step 5b of an index run (steps.h): what the ELF symbol table of each part's debug file says
// of its code symbols (function or label, sized or not), for ranking the aliases at an address
// (store::AliasRank). kallsyms and System.map name the symbols but lose these facts.
//
// Read here, in the indexer, from the debug file found for the part, rather than in the DWARF
// worker and stored per build-ID: the symbol table is a few MB of a mapped file (no DWARF), so
// reading it on every run is cheap, also for debug files whose DWARF index was stored by an
// earlier run (or an older symdex) and is reused without parsing; and the parse is the same
// bounds-checked ingest::ReadElfSymbols that reads offline .ko files here already. The cost:
// a debug file deleted since its DWARF was indexed gives no facts (the name rule then ranks).
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "server/common/elf_facts.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/debuginfo/files/symtab_file.h"
#include "server/indexer/steps.h"

namespace symdex::indexer {

// A debug file's code symbols, in brief, for the lookups by (section, address, name): the facts
// of each, the names and section names packed in one string (vmlinux's whole table read as
// ElfSymbols was ~30 MB held through the parse, the store and the join; this is ~2 MB).
struct ElfFactsTable {
  struct Key {
    uint64_t addr;
    uint32_t name, name_size;  // in `names`
    uint32_t section;          // index into `sections`
    uint8_t facts;
  };
  std::string path;
  absl::Status status;  // the table could not be read: why
  std::optional<BuildId> build_id;
  std::vector<std::string> sections;  // "" for a linked file's symbols
  std::string names;
  std::vector<Key> keys;  // by (section, addr, name)

  std::string_view NameOf(const Key& k) const { return std::string_view(names).substr(k.name, k.name_size); }
  // The facts of the code symbol `name` at `addr` in `section`, if the table has it.
  std::optional<uint8_t> Find(std::string_view section, uint64_t addr, std::string_view name) const {
    auto sec = std::find(sections.begin(), sections.end(), section);
    if (sec == sections.end()) return std::nullopt;
    const auto si = static_cast<uint32_t>(sec - sections.begin());
    auto it = std::lower_bound(keys.begin(), keys.end(), std::tuple(si, addr, name), [&](const Key& k, const auto& v) {
      return std::tuple(k.section, k.addr, NameOf(k)) < v;
    });
    if (it == keys.end() || it->section != si || it->addr != addr || NameOf(*it) != name) return std::nullopt;
    return it->facts;
  }
};

namespace {

std::unique_ptr<ElfFactsTable> ReadFactsTable(const std::string& path) {
  auto out = std::make_unique<ElfFactsTable>();
  out->path = path;
  absl::StatusOr<ingest::ElfSymbolTable> table = debuginfo::ReadSymtabFile(path);
  if (!table.ok()) {
    out->status = table.status();
    return out;
  }
  out->build_id = table->build_id;
  for (const ingest::ElfSymbol& s : table->symbols) {
    if (!IsCodeSymbolType(s.type) || out->names.size() + s.name.size() > UINT32_MAX) continue;
    const std::string_view section = table->relocatable ? std::string_view(s.section) : std::string_view();
    auto sec = std::find(out->sections.begin(), out->sections.end(), section);
    if (sec == out->sections.end()) sec = out->sections.insert(sec, std::string(section));
    out->keys.push_back({s.value, static_cast<uint32_t>(out->names.size()), static_cast<uint32_t>(s.name.size()),
                         static_cast<uint32_t>(sec - out->sections.begin()), ElfFacts(s.function, s.size)});
    out->names += s.name;
  }
  const ElfFactsTable& t = *out;
  std::stable_sort(out->keys.begin(), out->keys.end(), [&](const ElfFactsTable::Key& a, const ElfFactsTable::Key& b) {
    return std::tuple(a.section, a.addr, t.NameOf(a)) < std::tuple(b.section, b.addr, t.NameOf(b));
  });
  // One entry per key, the first the table listed (what the map this replaces kept).
  out->keys.erase(std::unique(out->keys.begin(), out->keys.end(),
                              [&](const ElfFactsTable::Key& a, const ElfFactsTable::Key& b) {
                                return a.section == b.section && a.addr == b.addr && t.NameOf(a) == t.NameOf(b);
                              }),
                  out->keys.end());
  out->keys.shrink_to_fit();
  return out;
}

// Whether a part's symbols get facts from its debug file: it has one, and (p.stale, not re-parsed:
// a stored index whose file has changed since) that file is still this build-ID's.
bool HasFacts(const Part& p) {
  return p.record.debug_file_id && !p.record.path.empty() && !(p.stale && p.path_to_index.empty());
}

// Sets elf_facts on the part's symbols found (by section, address and name) in its debug
// file's symbol table — `ahead`'s when it read that file. Symbols of a part are touched by this
// call only.
void AttachPart(const kernel::KernelTarget& t, Part& p, std::vector<kernel::SymbolEntry>& syms,
                const std::vector<size_t>& symbols, const ElfFactsTable* ahead) {
  if (symbols.empty() || !HasFacts(p)) return;
  std::unique_ptr<ElfFactsTable> own;
  if (ahead == nullptr || ahead->path != p.record.path) {
    own = ReadFactsTable(p.record.path);
    ahead = own.get();
  }
  if (!ahead->status.ok()) {
    p.record.detail = StrCat(p.record.detail, p.record.detail.empty() ? "" : "; ", "symbol table unreadable (",
                             ahead->status.message(), "): aliases at one address ranked by name");
    return;
  }
  if (ahead->build_id && !p.record.build_id.empty() && ahead->build_id->ToHex() != p.record.build_id) return;
  uint64_t slide = 0;
  if (p.module < 0 && t.text_addr && p.debug_text_addr) slide = *t.text_addr - *p.debug_text_addr;
  const std::vector<std::pair<std::string, uint64_t>>* sections =
      p.module >= 0 ? &t.modules[static_cast<size_t>(p.module)].sections : nullptr;
  for (size_t i : symbols) {
    kernel::SymbolEntry& sym = syms[i];
    std::string section = sym.section;
    uint64_t addr = sym.addr;
    if (p.module < 0) {
      addr -= slide;
    } else if (section.empty()) {
      auto so = debuginfo::SectionOffset(*sections, sym.addr);
      if (!so) continue;
      section = std::move(so->first);
      addr = so->second;
    }
    if (auto facts = ahead->Find(section, addr, sym.name)) sym.elf_facts = facts;
  }
}

}  // namespace

ElfFactsAhead::ElfFactsAhead(const std::vector<Part>& parts) {
  for (const Part& p : parts) {
    if (p.module >= 0 || p.record.path.empty()) continue;
    thread_ = std::jthread([this, path = p.record.path] { table_ = ReadFactsTable(path); });
    break;
  }
}

ElfFactsAhead::~ElfFactsAhead() = default;

const ElfFactsTable* ElfFactsAhead::Get() {
  if (thread_.joinable()) thread_.join();
  return table_.get();
}

void AttachElfFacts(kernel::KernelTarget& t, std::vector<Part>& parts, unsigned jobs, ElfFactsAhead* ahead) {
  const ElfFactsTable* read = ahead ? ahead->Get() : nullptr;
  const std::vector<std::vector<size_t>> symbols_by_part = CodeSymbolsByPart(t, parts);
  // Parts own disjoint symbols: each thread writes only those of the parts it takes.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < parts.size();)
      AttachPart(t, parts[i], t.symbols, symbols_by_part[i], read);
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < std::max(1u, jobs); ++j) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

void AttachModuleFacts(const kernel::KernelTarget& t, Part& p, std::vector<kernel::SymbolEntry>& syms,
                       const std::vector<size_t>& code) {
  AttachPart(t, p, syms, code, nullptr);
}

}  // namespace symdex::indexer
