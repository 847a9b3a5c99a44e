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
#include <atomic>
#include <functional>
#include <memory>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "server/common/elf_facts.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/debuginfo/symtab_file.h"
#include "server/indexer/steps.h"

namespace symdex::indexer {
namespace {

// A symbol of the table by section (relocatable files; "" for linked ones), address and name:
// views into the table read for the part, which outlives the map.
struct SymbolKey {
  std::string_view section;
  uint64_t addr;
  std::string_view name;
  bool operator==(const SymbolKey&) const = default;
};
struct SymbolKeyHash {
  size_t operator()(const SymbolKey& k) const {
    const size_t h = std::hash<std::string_view>()(k.name);
    return (h ^ (k.addr * 0x9e3779b97f4a7c15ull)) + std::hash<std::string_view>()(k.section);
  }
};

}  // namespace

// A debug file's symbol table, keyed for the lookups: `facts` views into `table`.
struct ElfFactsTable {
  std::string path;
  absl::StatusOr<ingest::ElfSymbolTable> table;
  std::unordered_map<SymbolKey, uint8_t, SymbolKeyHash> facts;
};

namespace {

std::unique_ptr<ElfFactsTable> ReadFactsTable(const std::string& path) {
  auto out = std::make_unique<ElfFactsTable>();
  out->path = path;
  out->table = debuginfo::ReadSymtabFile(path);
  if (!out->table.ok()) return out;
  const ingest::ElfSymbolTable& table = *out->table;
  out->facts.reserve(table.symbols.size());
  for (const ingest::ElfSymbol& s : table.symbols) {
    if (!IsCodeSymbolType(s.type)) continue;
    out->facts.emplace(SymbolKey{table.relocatable ? std::string_view(s.section) : std::string_view(), s.value, s.name},
                       ElfFacts(s.function, s.size));
  }
  return out;
}

// Sets elf_facts on the part's symbols found (by section, address and name) in its debug
// file's symbol table — `ahead`'s when it read that file. Symbols of a part are touched by this
// call only.
void AttachPart(target::KernelTarget& t, Part& p, const std::vector<size_t>& symbols, const ElfFactsTable* ahead) {
  // A stored index whose file has changed since (p.stale, not re-parsed): that file is not
  // this build-ID's any more.
  if (symbols.empty() || !p.record.debug_file_id || p.record.path.empty() || (p.stale && p.path_to_index.empty())) {
    return;
  }
  std::unique_ptr<ElfFactsTable> own;
  if (ahead == nullptr || ahead->path != p.record.path) {
    own = ReadFactsTable(p.record.path);
    ahead = own.get();
  }
  const auto& table = ahead->table;
  if (!table.ok()) {
    p.record.detail = StrCat(p.record.detail, p.record.detail.empty() ? "" : "; ", "symbol table unreadable (",
                             table.status().message(), "): aliases at one address ranked by name");
    return;
  }
  if (table->build_id && !p.record.build_id.empty() && table->build_id->ToHex() != p.record.build_id) return;
  const auto& facts = ahead->facts;
  uint64_t slide = 0;
  if (p.module < 0 && t.text_addr && p.debug_text_addr) slide = *t.text_addr - *p.debug_text_addr;
  const std::vector<std::pair<std::string, uint64_t>>* sections =
      p.module >= 0 ? &t.modules[static_cast<size_t>(p.module)].sections : nullptr;
  for (size_t i : symbols) {
    target::SymbolEntry& sym = t.symbols[i];
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
    if (auto it = facts.find(SymbolKey{section, addr, sym.name}); it != facts.end()) sym.elf_facts = it->second;
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

void AttachElfFacts(target::KernelTarget& t, std::vector<Part>& parts, unsigned jobs, ElfFactsAhead* ahead) {
  const ElfFactsTable* read = ahead ? ahead->Get() : nullptr;
  std::unordered_map<int, size_t> part_of_module;
  for (size_t i = 0; i < parts.size(); ++i) part_of_module[parts[i].module] = i;
  std::vector<std::vector<size_t>> symbols_by_part(parts.size());
  for (size_t s = 0; s < t.symbols.size(); ++s) {
    if (!IsCodeSymbolType(t.symbols[s].type)) continue;
    auto it = part_of_module.find(t.symbols[s].module);
    if (it != part_of_module.end()) symbols_by_part[it->second].push_back(s);
  }
  // Parts own disjoint symbols: each thread writes only those of the parts it takes.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < parts.size();) AttachPart(t, parts[i], symbols_by_part[i], read);
  };
  std::vector<std::thread> pool;
  for (unsigned j = 1; j < std::max(1u, jobs); ++j) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

}  // namespace symdex::indexer
