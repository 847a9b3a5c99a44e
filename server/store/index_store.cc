#include "server/store/index_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <random>
#include <set>
#include <tuple>
#include <unordered_map>

#include "server/common/fault_point.h"
#include "server/common/strings.h"
#include "server/common/symbol_type.h"
#include "server/kernel/symbol_spill.h"

namespace symdex::store {
namespace {

std::optional<int64_t> OptAddr(const std::optional<uint64_t>& v) {
  return v ? std::optional<int64_t>(ToDb(*v)) : std::nullopt;
}
std::optional<uint64_t> OptU64(const std::optional<int64_t>& v) {
  return v ? std::optional<uint64_t>(FromDb(*v)) : std::nullopt;
}
std::optional<std::string> OptHex(const std::optional<BuildId>& id) {
  return id ? std::optional<std::string>(id->ToHex()) : std::nullopt;
}
// target_files.dropped (schema/014): "COUNT\tRULE" lines.
std::string EncodeDropped(const std::vector<DroppedSymbols>& dropped) {
  std::string out;
  for (const DroppedSymbols& d : dropped) out += StrCat(d.count, "\t", d.rule, "\n");
  return out;
}

std::vector<DroppedSymbols> DecodeDropped(std::string_view text) {
  std::vector<DroppedSymbols> out;
  for (std::string_view line : Split(text, '\n', /*skip_empty=*/true)) {
    const size_t tab = line.find('\t');
    uint64_t n = 0;
    if (tab == std::string_view::npos || std::from_chars(line.data(), line.data() + tab, n).ptr != line.data() + tab) {
      continue;  // not a line this symdex writes
    }
    out.push_back({std::string(line.substr(tab + 1)), n});
  }
  return out;
}

std::optional<std::string> NonEmpty(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}

// In TargetInfo's order, which ReadTarget reads them in.
constexpr const char* kTargetCols =
    "id, name, kind, COALESCE(release,''), COALESCE(build_id,''), source, warnings, text_addr, text_anchor, "
    "anchor_addr, machine, indexed_at, generation, symbols_stamp, kprobe_events_on_notrace, kernel_config, fprobe, "
    "ftrace_direct";

TargetInfo ReadTarget(const Stmt& st) {
  RowReader c(st);
  auto bool_of = [](std::optional<int64_t> v) { return v ? std::optional<bool>(*v != 0) : std::nullopt; };
  return TargetInfo{.id = c.Int(),
                    .name = c.Text(),
                    .kind = c.Text(),
                    .release = c.Text(),
                    .build_id = c.Text(),
                    .source = c.Text(),
                    .warnings = c.Text(),
                    .text_addr = OptU64(c.OptInt()),
                    .text_anchor = c.Text(),
                    .anchor_addr = OptU64(c.OptInt()),
                    .machine = static_cast<uint16_t>(c.OptInt().value_or(0)),
                    .indexed_at = c.Int(),
                    .generation = c.Int(),
                    .symbols_stamp = c.Int(),
                    .kprobe_events_on_notrace = bool_of(c.OptInt()),
                    .kernel_config = c.Text(),
                    .fprobe = bool_of(c.OptInt()),
                    .ftrace_direct = bool_of(c.OptInt())};
}

constexpr const char* kSymbolSelect =
    "SELECT s.name, s.type, COALESCE(m.name,''), s.addr, COALESCE(s.section,''), s.size, s.size_exact, "
    "s.src_line, COALESCE(s.dwarf_note,''), COALESCE(f.name,''), COALESCE(su.name, fu.name, ''), "
    "COALESCE(df.path,''), COALESCE(f.decl_line,0), COALESCE(sf.path,''), COALESCE(s.src_line,0), "
    "COALESCE(f.flags,0), s.dwarf_function_id, s.probe, s.elf_facts "
    "FROM symbols s LEFT JOIN modules m ON m.id = s.module_id "
    "LEFT JOIN dwarf_functions f ON f.id = s.dwarf_function_id "
    "LEFT JOIN dwarf_units fu ON fu.debug_file_id = f.debug_file_id AND fu.idx = f.unit "
    "LEFT JOIN dwarf_units su ON su.debug_file_id = s.debug_file_id AND su.idx = s.src_unit "
    "LEFT JOIN dwarf_files df ON df.debug_file_id = f.debug_file_id AND df.idx = f.decl_file "
    "LEFT JOIN dwarf_files sf ON sf.debug_file_id = s.debug_file_id AND sf.idx = s.src_file ";

SymbolRecord ReadSymbol(const Stmt& st) {
  SymbolRecord r;
  r.name = st.Text(0);
  std::string type = st.Text(1);
  r.type = type.empty() ? '?' : type[0];
  r.module = st.Text(2);
  r.addr = FromDb(st.Int(3));
  r.section = st.Text(4);
  r.size = OptU64(st.OptInt(5));
  r.size_exact = st.Int(6) != 0;
  if (!st.IsNull(18)) r.elf_facts = static_cast<uint8_t>(st.Int(18));
  if (!st.IsNull(7) || !st.IsNull(16)) {  // a source line, or at least a function
    DwarfInfo d;
    d.has_function = !st.IsNull(16);
    d.function = st.Text(9);
    d.cu = st.Text(10);
    d.decl_file = st.Text(11);
    d.decl_line = st.Int(12);
    d.entry_file = st.Text(13);
    d.entry_line = st.Int(14);
    d.inline_copy = (st.Int(15) & 2) != 0;
    r.dwarf = std::move(d);
  }
  r.dwarf_note = st.Text(8);
  r.probe = static_cast<uint32_t>(st.Int(17));
  return r;
}

}  // namespace

namespace {

// Inserts the modules `pick` selects by name (with their sections), their symbols, and — when
// pick("") — vmlinux's symbols.
absl::Status InsertOwned(Db& db, int64_t target_id, const kernel::KernelTarget& t,
                         const std::function<bool(const std::string&)>& pick) {
  ASSIGN_OR_RETURN(Stmt ins_mod, db.Prepare("INSERT INTO modules (target_id, name, build_id, text_addr, size, path) "
                                            "VALUES (?1,?2,?3,?4,?5,?6)"));
  ASSIGN_OR_RETURN(Stmt ins_sec, db.Prepare("INSERT INTO module_sections (module_id, name, addr) VALUES (?1,?2,?3)"));
  std::vector<int64_t> module_ids;
  module_ids.reserve(t.modules.size());
  for (const auto& m : t.modules) {
    if (!pick(m.name)) {
      module_ids.push_back(0);
      continue;
    }
    ins_mod.Bind(1, target_id).Bind(2, m.name).Bind(3, OptHex(m.build_id));
    ins_mod.Bind(4, OptAddr(m.text_addr)).Bind(5, OptAddr(m.size)).Bind(6, NonEmpty(m.path));
    RETURN_IF_ERROR(ins_mod.Run());
    module_ids.push_back(sqlite3_last_insert_rowid(db.raw()));
    for (const auto& [name, addr] : m.sections) {
      ins_sec.Bind(1, module_ids.back()).Bind(2, name).Bind(3, ToDb(addr));
      RETURN_IF_ERROR(ins_sec.Run());
    }
    FaultPoint("target-module-row");
  }

  const bool vmlinux = pick("");
  auto owned = [&](const kernel::SymbolEntry& s) {
    return s.module >= 0 ? module_ids.at(static_cast<size_t>(s.module)) != 0 : vmlinux;
  };
  size_t rows = 0;
  if (t.spill) {
    rows = vmlinux ? t.symbols.size() : 0;
    for (size_t m = 0; m < t.modules.size(); ++m) rows += module_ids[m] != 0 ? t.spill->Count(static_cast<int>(m)) : 0;
  } else {
    rows = static_cast<size_t>(std::count_if(t.symbols.begin(), t.symbols.end(), owned));
  }
  ASSIGN_OR_RETURN(BulkInsert ins_sym,
                   BulkInsert::Prepare(db, "symbols",
                                       {"target_id", "module_id", "name", "type", "addr", "size", "size_exact",
                                        "section", "dwarf_function_id", "dwarf_note", "debug_file_id", "src_unit",
                                        "src_file", "src_line", "probe", "elf_facts"},
                                       rows));
  RETURN_IF_ERROR(kernel::ForEachSymbol(t, [&](const kernel::SymbolEntry& s) -> absl::Status {
    if (!owned(s)) return absl::OkStatus();
    FaultPoint("target-symbol-row");
    ASSIGN_OR_RETURN(BulkInsert::Row r, ins_sym.Add());
    r.Bind(1, target_id);
    if (s.module >= 0)
      r.Bind(2, module_ids.at(static_cast<size_t>(s.module)));
    else
      r.BindNull(2);
    // Text bound in place (the batch runs later) when the symbol outlives the batch: t.symbols';
    // a spilled module's symbol is gone once its module is written, so its text is copied.
    const bool lasting = !t.spill || s.module < 0;
    auto text = [&](int col, std::string_view v) {
      if (lasting)
        r.BindStatic(col, v);
      else
        r.Bind(col, v);  // copied
    };
    text(3, s.name);
    text(4, std::string_view(&s.type, 1));
    r.Bind(5, ToDb(s.addr));
    r.Bind(6, OptAddr(s.size)).Bind(7, int64_t{s.size_exact});
    if (s.section.empty())
      r.BindNull(8);
    else
      text(8, s.section.str());
    r.Bind(9, s.dwarf_function_id.get());
    if (s.dwarf_note.empty())
      r.BindNull(10);
    else
      text(10, s.dwarf_note.str());
    r.Bind(11, s.debug_file_id.get());
    r.Bind(12, s.src_unit.get()).Bind(13, s.src_file.get()).Bind(14, s.src_line.get()).Bind(15, int64_t{s.probe});
    if (s.elf_facts)
      r.Bind(16, int64_t{*s.elf_facts});
    else
      r.BindNull(16);
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(ins_sym.Finish());

  return absl::OkStatus();
}

absl::Status InsertDebugInfo(Db& db, int64_t target_id, const kernel::KernelTarget& t,
                             const std::function<bool(const std::string&)>& pick) {
  ASSIGN_OR_RETURN(Stmt ins_dbg,
                   db.Prepare("INSERT INTO target_debuginfo (target_id, module, build_id, debug_file_id, status, "
                              "path, origin, detail) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)"));
  for (const auto& d : t.debuginfo) {
    if (!pick(d.module)) continue;
    ins_dbg.Bind(1, target_id).Bind(2, d.module).Bind(3, NonEmpty(d.build_id)).Bind(4, d.debug_file_id);
    ins_dbg.Bind(5, kernel::Name(d.status))
        .Bind(6, NonEmpty(d.path))
        .Bind(7, NonEmpty(d.origin))
        .Bind(8, NonEmpty(d.detail));
    RETURN_IF_ERROR(ins_dbg.Run());
  }
  return absl::OkStatus();
}

// Removes target `id` and every row that belongs to it. When it is the database's only target
// (a fleet replica's per-kernel index, a host's own), whole tables are emptied.
absl::Status DeleteTarget(Db& db, int64_t id) {
  ASSIGN_OR_RETURN(Stmt count, db.Prepare("SELECT COUNT(*) FROM targets"));
  ASSIGN_OR_RETURN(bool row, count.Step());
  const bool only = row && count.Int(0) == 1;
  if (only) {
    for (const char* sql : {"DELETE FROM symbols", "DELETE FROM module_sections", "DELETE FROM modules",
                            "DELETE FROM target_debuginfo", "DELETE FROM target_files"}) {
      ASSIGN_OR_RETURN(Stmt del, db.Prepare(sql));
      RETURN_IF_ERROR(del.Run());
    }
  } else {
    for (const char* sql :
         {"DELETE FROM symbols WHERE target_id = ?1",
          "DELETE FROM module_sections WHERE module_id IN "
          "(SELECT id FROM modules WHERE target_id = ?1)",
          "DELETE FROM modules WHERE target_id = ?1", "DELETE FROM target_debuginfo WHERE target_id = ?1",
          "DELETE FROM target_files WHERE target_id = ?1"}) {
      ASSIGN_OR_RETURN(Stmt del, db.Prepare(sql));
      del.Bind(1, id);
      RETURN_IF_ERROR(del.Run());
    }
  }
  ASSIGN_OR_RETURN(Stmt del, db.Prepare("DELETE FROM targets WHERE id = ?1"));
  del.Bind(1, id);
  return del.Run();
}

// What enforcement would have refused, checked once over the tables a target's rows live in
// (a reference to a debug file that is not stored, say): ~40 ms for 116k symbols.
absl::Status CheckTargetForeignKeys(Db& db) {
  for (const char* table : {"targets", "modules", "module_sections", "symbols", "target_files", "target_debuginfo"}) {
    ASSIGN_OR_RETURN(Stmt check, db.Prepare(StrCat("PRAGMA foreign_key_check(", table, ")")));
    ASSIGN_OR_RETURN(bool violated, check.Step());
    if (violated) {
      return absl::InternalError(StrCat("FOREIGN KEY constraint failed: ", check.Text(0), " row ", check.Int(1),
                                        " refers to a missing ", check.Text(2), " row"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t NewSymbolsStamp() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  for (;;) {
    const int64_t v = static_cast<int64_t>(gen() >> 1);
    if (v != 0) return v;
  }
}

absl::StatusOr<int64_t> ReplaceTarget(Db& db, const kernel::KernelTarget& t, int64_t now) {
  // Every child row of the old target is deleted here and the references checked once before the
  // commit (CheckTargetForeignKeys); with enforcement on, "DELETE FROM symbols" would visit and
  // unindex all 116k rows of a distribution kernel one by one (1.3 s here; off, 0.06 s).
  ForeignKeysOff fk(db);
  ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
  int64_t generation = 1;
  {
    ASSIGN_OR_RETURN(Stmt old, db.Prepare("SELECT id, generation FROM targets WHERE name = ?1"));
    old.Bind(1, t.name);
    ASSIGN_OR_RETURN(bool found, old.Step());
    if (found) {
      const int64_t old_id = old.Int(0);
      generation = old.Int(1) + 1;
      old.Reset();
      RETURN_IF_ERROR(DeleteTarget(db, old_id));
    }
  }
  ASSIGN_OR_RETURN(Stmt ins_target,
                   db.Prepare("INSERT INTO targets (name, kind, release, build_id, text_addr, source, "
                              "indexed_at, generation, warnings, kprobe_events_on_notrace, kernel_config, "
                              "text_anchor, anchor_addr, machine, symbols_stamp, fprobe, ftrace_direct) "
                              "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)"));
  ins_target.Bind(1, t.name).Bind(2, t.kind).Bind(3, NonEmpty(t.release)).Bind(4, OptHex(t.build_id));
  ins_target.Bind(5, OptAddr(t.text_addr)).Bind(6, t.source).Bind(7, now).Bind(8, generation);
  ins_target.Bind(9, StrJoin(t.warnings, "\n"));
  if (t.kprobe_events_on_notrace)
    ins_target.Bind(10, int64_t{*t.kprobe_events_on_notrace});
  else
    ins_target.BindNull(10);
  ins_target.Bind(11, t.kernel_config);
  ins_target.Bind(12, t.text_anchor).Bind(13, OptAddr(t.anchor_addr));
  if (t.machine != 0)
    ins_target.Bind(14, int64_t{t.machine});
  else
    ins_target.BindNull(14);
  ins_target.Bind(15, NewSymbolsStamp());
  if (t.fprobe)
    ins_target.Bind(16, int64_t{*t.fprobe});
  else
    ins_target.BindNull(16);
  if (t.ftrace_direct)
    ins_target.Bind(17, int64_t{*t.ftrace_direct});
  else
    ins_target.BindNull(17);
  RETURN_IF_ERROR(ins_target.Run());
  const int64_t target_id = sqlite3_last_insert_rowid(db.raw());

  {
    // The database's only target (a host's own index, a fleet replica's kernel): its symbols go
    // into an empty table, and their indexes are built once they are all in.
    ASSIGN_OR_RETURN(IndexesAfterLoad later, IndexesAfterLoad::Begin(db, "symbols"));
    RETURN_IF_ERROR(InsertOwned(db, target_id, t, [](const std::string&) { return true; }));
    RETURN_IF_ERROR(later.Rebuild());
  }
  ASSIGN_OR_RETURN(Stmt ins_file,
                   db.Prepare("INSERT INTO target_files (target_id, role, path, status, detail, dropped) "
                              "VALUES (?1,?2,?3,?4,?5,?6)"));
  for (const auto& f : t.files) {
    ins_file.Bind(1, target_id)
        .Bind(2, f.role)
        .Bind(3, f.path)
        .Bind(4, kernel::Name(f.status))
        .Bind(5, NonEmpty(f.detail))
        .Bind(6, EncodeDropped(f.dropped));
    RETURN_IF_ERROR(ins_file.Run());
  }
  RETURN_IF_ERROR(InsertDebugInfo(db, target_id, t, [](const std::string&) { return true; }));
  RETURN_IF_ERROR(CheckTargetForeignKeys(db));
  FaultPoint("target-commit");
  RETURN_IF_ERROR(tx.Commit());
  return generation;
}

absl::StatusOr<int64_t> ReplaceModules(Db& db, const kernel::KernelTarget& t, const std::set<std::string>& names,
                                       int64_t now) {
  ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
  ASSIGN_OR_RETURN(Stmt find, db.Prepare("SELECT id, generation FROM targets WHERE name = ?1"));
  find.Bind(1, t.name);
  ASSIGN_OR_RETURN(bool found, find.Step());
  if (!found) return absl::NotFoundError(StrCat("no target '", t.name, "' to update"));
  const int64_t target_id = find.Int(0);
  const int64_t generation = find.Int(1) + 1;
  ASSIGN_OR_RETURN(Stmt mod, db.Prepare("SELECT id FROM modules WHERE target_id = ?1 AND name = ?2"));
  ASSIGN_OR_RETURN(Stmt del_dbg, db.Prepare("DELETE FROM target_debuginfo WHERE target_id = ?1 AND module = ?2"));
  for (const std::string& name : names) {
    if (name.empty()) return absl::InvalidArgumentError("vmlinux is not a module");
    mod.Reset();
    mod.Bind(1, target_id).Bind(2, name);
    ASSIGN_OR_RETURN(bool row, mod.Step());
    if (row) {
      const int64_t id = mod.Int(0);
      for (const char* sql : {"DELETE FROM symbols WHERE target_id = ?1 AND module_id = ?2",
                              "DELETE FROM module_sections WHERE module_id = ?2",
                              "DELETE FROM modules WHERE target_id = ?1 AND id = ?2"}) {
        ASSIGN_OR_RETURN(Stmt del, db.Prepare(sql));
        del.Bind(1, target_id).Bind(2, id);
        RETURN_IF_ERROR(del.Run());
      }
    }
    del_dbg.Reset();
    del_dbg.Bind(1, target_id).Bind(2, name);
    RETURN_IF_ERROR(del_dbg.Run());
  }
  auto pick = [&](const std::string& name) { return names.count(name) > 0; };
  RETURN_IF_ERROR(InsertOwned(db, target_id, t, pick));
  RETURN_IF_ERROR(InsertDebugInfo(db, target_id, t, pick));
  ASSIGN_OR_RETURN(Stmt upd,
                   db.Prepare("UPDATE targets SET generation = ?2, indexed_at = ?3, warnings = ?4, symbols_stamp = ?5 "
                              "WHERE id = ?1"));
  upd.Bind(1, target_id).Bind(2, generation).Bind(3, now).Bind(4, StrJoin(t.warnings, "\n"));
  upd.Bind(5, NewSymbolsStamp());
  RETURN_IF_ERROR(upd.Run());
  FaultPoint("target-commit");
  RETURN_IF_ERROR(tx.Commit());
  return generation;
}

absl::Status SetTargetWarnings(Db& db, const std::string& name, int64_t generation,
                               const std::vector<std::string>& warnings) {
  ASSIGN_OR_RETURN(Stmt upd, db.Prepare("UPDATE targets SET warnings = ?3 WHERE name = ?1 AND generation = ?2"));
  upd.Bind(1, name).Bind(2, generation).Bind(3, StrJoin(warnings, "\n"));
  RETURN_IF_ERROR(upd.Run());
  if (sqlite3_changes(db.raw()) == 0)
    return absl::NotFoundError(StrCat("target ", name, " is no longer at generation ", generation));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ModuleNames(Db& db, int64_t target_id) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT name FROM modules WHERE target_id = ?1 ORDER BY name"));
  st.Bind(1, target_id);
  return st.TextColumn();
}

absl::StatusOr<std::vector<TargetInfo>> ListTargets(Db& db) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare(std::string("SELECT ") + kTargetCols + " FROM targets ORDER BY name"));
  std::vector<TargetInfo> out;
  RETURN_IF_ERROR(st.EachRow([&] { out.push_back(ReadTarget(st)); }));
  return out;
}

absl::StatusOr<std::optional<TargetInfo>> FindTarget(Db& db, const std::string& name) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare(std::string("SELECT ") + kTargetCols + " FROM targets WHERE name = ?1"));
  st.Bind(1, name);
  return st.FirstRow([&] { return ReadTarget(st); });
}

absl::StatusOr<TargetCounts> CountTarget(Db& db, int64_t id) {
  TargetCounts c;
  ASSIGN_OR_RETURN(Stmt st,
                   db.Prepare(StrCat("SELECT (SELECT COUNT(*) FROM modules WHERE target_id = ?1),"
                                     " (SELECT COUNT(*) FROM symbols WHERE target_id = ?1 AND module_id IS NULL),"
                                     " (SELECT COUNT(*) FROM symbols WHERE target_id = ?1 AND module_id IS NOT NULL),"
                                     " (SELECT COUNT(*) FROM symbols WHERE target_id = ?1 AND type IN ",
                                     SqlTypeList(kTextSymbolTypes), ")")));
  st.Bind(1, id);
  ASSIGN_OR_RETURN(bool row, st.Step());
  if (row) {
    c.modules = st.Int(0);
    c.vmlinux_symbols = st.Int(1);
    c.module_symbols = st.Int(2);
    c.text_symbols = st.Int(3);
  }
  return c;
}

absl::StatusOr<std::vector<FileRecord>> TargetFiles(Db& db, int64_t id) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT role, path, status, COALESCE(detail,''), dropped FROM target_files "
                                       "WHERE target_id = ?1 ORDER BY id"));
  st.Bind(1, id);
  std::vector<FileRecord> out;
  RETURN_IF_ERROR(st.EachRow([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto status, kernel::ParseInputFileStatus(st.Text(2)));
    out.push_back({st.Text(0), st.Text(1), status, st.Text(3), DecodeDropped(st.Text(4))});
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<DebugInfoStatus>> TargetDebugInfo(Db& db, int64_t id) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT t.module, COALESCE(t.build_id,''), t.status, COALESCE(t.path,''), "
                                       "COALESCE(t.origin,''), COALESCE(t.detail,''), t.debug_file_id, "
                                       "COALESCE(d.reader,'') FROM target_debuginfo t "
                                       "LEFT JOIN debug_files d ON d.id = t.debug_file_id "
                                       "WHERE t.target_id = ?1 ORDER BY t.module"));
  st.Bind(1, id);
  std::vector<DebugInfoStatus> out;
  RETURN_IF_ERROR(st.EachRow([&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto status, kernel::ParseDebugFileStatus(st.Text(2)));
    out.push_back({st.Text(0), st.Text(1), status, st.Text(3), st.Text(4), st.Text(5), st.OptInt(6), st.Text(7)});
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::optional<ModuleRecord>> FindModule(Db& db, int64_t id, const std::string& name) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT name, COALESCE(build_id,''), COALESCE(path,''), text_addr, size "
                                       "FROM modules WHERE target_id = ?1 AND name = ?2"));
  st.Bind(1, id).Bind(2, name);
  return st.FirstRow([&] {
    return ModuleRecord{st.Text(0), st.Text(1), st.Text(2), OptU64(st.OptInt(3)), OptU64(st.OptInt(4))};
  });
}

absl::StatusOr<std::vector<SymbolRecord>> SymbolsByName(Db& db, int64_t id, const std::string& name, bool with_clones) {
  // One index range: NAME and its clones NAME.* all sort in [NAME, NAME + "/") ('/' follows
  // '.' in ASCII); names such as "NAME-x" in that range are filtered out below. (An OR of the
  // two conditions would make SQLite scan the whole table.)
  std::string sql = std::string(kSymbolSelect) +
                    (with_clones ? "WHERE s.target_id = ?1 AND s.name >= ?2 AND s.name < ?3 "
                                 : "WHERE s.target_id = ?1 AND s.name = ?2 ") +
                    "ORDER BY m.name IS NOT NULL, m.name, s.section, s.addr, s.name";
  ASSIGN_OR_RETURN(Stmt st, db.Prepare(sql));
  st.Bind(1, id).Bind(2, name);
  if (with_clones) st.Bind(3, name + "/");
  std::vector<SymbolRecord> out;
  RETURN_IF_ERROR(st.EachRow([&] {
    SymbolRecord r = ReadSymbol(st);
    if (r.name.size() == name.size() || r.name[name.size()] == '.') out.push_back(std::move(r));
  }));
  return out;
}

absl::StatusOr<int64_t> CountVmlinuxSymbols(Db& db, int64_t target_id) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT COUNT(*) FROM symbols WHERE target_id = ?1 AND module_id IS NULL"));
  st.Bind(1, target_id);
  ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.Int(0) : 0;
}

absl::StatusOr<std::vector<BuildIdOwner>> KernelObjectsWithBuildId(Db& db, const std::string& hex) {
  std::vector<BuildIdOwner> out;
  const std::pair<const char*, const char*> kQueries[] = {
      {"target", "SELECT name, '' FROM targets WHERE build_id=?"},
      {"module", "SELECT m.name, t.name FROM modules m JOIN targets t ON t.id = m.target_id WHERE m.build_id=?"},
      {"debug-file", "SELECT path, '' FROM debug_files WHERE build_id=?"},
  };
  for (const auto& query : kQueries) {
    const char* kind = query.first;
    const char* sql = query.second;
    ASSIGN_OR_RETURN(Stmt q, db.Prepare(sql));
    q.Bind(1, hex);
    RETURN_IF_ERROR(q.EachRow([&] { out.push_back(BuildIdOwner{kind, q.Text(0), q.Text(1)}); }));
  }
  return out;
}

absl::StatusOr<int64_t> CountSymbolsNamed(Db& db, int64_t id, const std::string& name) {
  ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT COUNT(*) FROM symbols WHERE target_id = ?1 AND name = ?2"));
  st.Bind(1, id).Bind(2, name);
  ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? st.Int(0) : 0;
}

absl::StatusOr<NameCounts> CountName(Db& db, int64_t id, const std::string& name, const std::string& module) {
  ASSIGN_OR_RETURN(
      Stmt st,
      db.Prepare("SELECT COUNT(*), COALESCE(SUM(CASE WHEN COALESCE(m.name,'') = ?3 THEN 1 ELSE 0 END), 0) "
                 "FROM symbols s LEFT JOIN modules m ON m.id = s.module_id WHERE s.target_id = ?1 AND s.name = ?2"));
  st.Bind(1, id).Bind(2, name).Bind(3, module);
  ASSIGN_OR_RETURN(bool row, st.Step());
  NameCounts c;
  if (row) {
    c.total = st.Int(0);
    c.in_module = st.Int(1);
  }
  return c;
}

namespace {
constexpr uint8_t kSizeKnown = 1, kSizeExact = 2, kHasFunction = 4, kHasDwarf = 8, kElfKnown = 16;

Candidate CandidateOf(const SymbolRecord& r) { return {r.name, r.module, r.addr, r.size}; }
// The symbol among `st`'s rows (the aliases at one address) that names the code there
// (PreferAlias: a sized function over a label).
absl::StatusOr<std::optional<SymbolRecord>> PreferredAlias(Stmt& st) {
  std::optional<SymbolRecord> best;
  auto alias = [](const SymbolRecord& r) {
    return AliasFacts{r.name, r.type, r.elf_facts, r.dwarf && r.dwarf->has_function};
  };
  RETURN_IF_ERROR(st.EachRow([&] {
    SymbolRecord r = ReadSymbol(st);
    if (!best || PreferAlias(alias(r), alias(*best))) best = std::move(r);
  }));
  return best;
}

// The rule's verdict (WhyNotContained's `why` for candidate `c`, which views record `r`; both
// null when there is none) as an answer: the symbol, or why none holds `addr`, with the region's
// end label when `addr` is exactly it. `r` is moved from only after `c` is read. Both address
// lookups answer through this, so that they never disagree.
Containment Verdict(std::optional<std::string> why, const Candidate* c, SymbolRecord* r, uint64_t addr) {
  if (!why) return Containment{std::move(*r), "", std::nullopt};
  Containment out{std::nullopt, std::move(*why), std::nullopt};
  if (c != nullptr && c->addr == addr && IsRegionEndLabel(c->name)) out.end_label = std::move(*r);
  return out;
}

}  // namespace

absl::StatusOr<Containment> SymbolContaining(Db& db, int64_t id, uint64_t addr) {
  // Kernel addresses all sit in the upper half: as signed integers they order correctly.
  std::string sql = std::string(kSymbolSelect) + "WHERE s.target_id = ?1 AND s.section IS NULL AND s.type IN " +
                    SqlTypeList(kCodeSymbolTypes) +
                    " AND s.addr = (SELECT MAX(addr) FROM symbols WHERE target_id = ?1 AND section IS NULL "
                    "AND type IN " +
                    SqlTypeList(kCodeSymbolTypes) + " AND addr <= ?2 AND (addr < 0) = (?2 < 0))";
  ASSIGN_OR_RETURN(Stmt st, db.Prepare(sql));
  st.Bind(1, id).Bind(2, ToDb(addr));
  ASSIGN_OR_RETURN(std::optional<SymbolRecord> best, PreferredAlias(st));
  // Where vmlinux and the modules lie: read only when the symbol's own size does not decide.
  std::optional<OwnerExtents> extents;
  auto load = [&]() -> absl::StatusOr<const OwnerExtents*> {
    if (!extents) {
      ASSIGN_OR_RETURN(extents, LoadOwnerExtents(db, id));
    }
    return &*extents;
  };
  Candidate c;
  if (best) c = CandidateOf(*best);
  ASSIGN_OR_RETURN(auto why, WhyNotContained(best ? &c : nullptr, addr, load));
  return Verdict(std::move(why), best ? &c : nullptr, best ? &*best : nullptr, addr);
}

namespace {

// SymbolInSection's verdict on the alias-ranked symbol at the greatest offset <= `offset`.
Containment InSectionVerdict(std::optional<SymbolRecord> best, const std::string& module, const std::string& section,
                             uint64_t offset) {
  if (!best)
    return Containment{std::nullopt, StrCat("no code symbol of ", module, " at or below ", section, "+0x",
                                            fmt::format("{:x}", offset))};
  if (best->size && *best->size > 0 && offset - best->addr >= *best->size) {
    return Containment{std::nullopt, StrCat(section, "+0x", fmt::format("{:x}", offset), " is past the end of ", module,
                                            ":", best->name, " (", section, "+0x", fmt::format("{:x}", best->addr),
                                            ", size ", *best->size, ")")};
  }
  return Containment{std::move(best), ""};
}

std::string NotIndexed(const std::string& module) {
  return StrCat("module ", module, " is not indexed in this target");
}

}  // namespace

absl::StatusOr<Containment> SymbolInSection(Db& db, int64_t target_id, const std::string& module,
                                            const std::string& section, uint64_t offset) {
  ASSIGN_OR_RETURN(Stmt mod, db.Prepare("SELECT id FROM modules WHERE target_id = ?1 AND name = ?2"));
  mod.Bind(1, target_id).Bind(2, module);
  ASSIGN_OR_RETURN(bool has_module, mod.Step());
  if (!has_module) return Containment{std::nullopt, NotIndexed(module)};
  const int64_t module_id = mod.Int(0);
  // Offsets are small non-negative integers: their signed order is their order.
  std::string sql = std::string(kSymbolSelect) + "WHERE s.module_id = ?1 AND s.section = ?2 AND s.type IN " +
                    SqlTypeList(kCodeSymbolTypes) +
                    " AND s.addr = (SELECT MAX(addr) FROM symbols WHERE module_id = ?1 AND section = ?2 AND type IN " +
                    SqlTypeList(kCodeSymbolTypes) + " AND addr <= ?3) ORDER BY s.id";
  ASSIGN_OR_RETURN(Stmt st, db.Prepare(sql));
  st.Bind(1, module_id).Bind(2, section).Bind(3, ToDb(offset));
  ASSIGN_OR_RETURN(std::optional<SymbolRecord> best, PreferredAlias(st));
  return InSectionVerdict(std::move(best), module, section, offset);
}

absl::StatusOr<std::shared_ptr<const ModuleCodeSymbols>> LoadModuleCodeSymbols(Db& db, int64_t target_id,
                                                                               const std::string& module) {
  auto out = std::make_shared<ModuleCodeSymbols>();
  out->module_ = module;
  ASSIGN_OR_RETURN(Stmt mod, db.Prepare("SELECT id FROM modules WHERE target_id = ?1 AND name = ?2"));
  mod.Bind(1, target_id).Bind(2, module);
  ASSIGN_OR_RETURN(bool has_module, mod.Step());
  if (!has_module) return std::shared_ptr<const ModuleCodeSymbols>(std::move(out));
  out->indexed_ = true;
  ASSIGN_OR_RETURN(Stmt st, db.Prepare(std::string(kSymbolSelect) +
                                       "WHERE s.module_id = ?1 AND s.section IS NOT NULL AND s.type IN " +
                                       SqlTypeList(kCodeSymbolTypes) + " ORDER BY s.section, s.addr, s.id"));
  st.Bind(1, mod.Int(0));
  RETURN_IF_ERROR(st.EachRow([&] {
    SymbolRecord r = ReadSymbol(st);
    auto& v = out->by_section_[r.section];
    v.push_back(std::move(r));
    ++out->count_;
  }));
  return std::shared_ptr<const ModuleCodeSymbols>(std::move(out));
}

Containment ModuleCodeSymbols::InSection(const std::string& section, uint64_t offset) const {
  if (!indexed_) return Containment{std::nullopt, NotIndexed(module_)};
  std::optional<SymbolRecord> best;
  if (auto it = by_section_.find(section); it != by_section_.end()) {
    const std::vector<SymbolRecord>& v = it->second;
    // The greatest offset <= `offset` (stored as the database orders them: as signed integers),
    // then its aliases ranked as PreferredAlias ranks them, in the same (id) order.
    auto above = std::upper_bound(v.begin(), v.end(), ToDb(offset),
                                  [](int64_t o, const SymbolRecord& r) { return o < ToDb(r.addr); });
    if (above != v.begin()) {
      const uint64_t at = std::prev(above)->addr;
      auto alias = [](const SymbolRecord& r) {
        return AliasFacts{r.name, r.type, r.elf_facts, r.dwarf && r.dwarf->has_function};
      };
      for (auto k = std::lower_bound(v.begin(), above, ToDb(at),
                                     [](const SymbolRecord&r, int64_t o) { return ToDb(r.addr) < o; });
           k != above; ++k) {
        if (!best || PreferAlias(alias(*k), alias(*best))) best = *k;
      }
    }
  }
  return InSectionVerdict(std::move(best), module_, section, offset);
}

absl::StatusOr<std::shared_ptr<const TextSymbolTable>> LoadTextSymbolTable(Db& db, int64_t target_id) {
  auto t = std::make_shared<TextSymbolTable>();
  std::unordered_map<int64_t, uint32_t> module_of;
  t->modules_.push_back("");
  {
    ASSIGN_OR_RETURN(Stmt st, db.Prepare("SELECT id, name FROM modules WHERE target_id = ?1"));
    st.Bind(1, target_id);
    RETURN_IF_ERROR(st.EachRow([&] {
      module_of.emplace(st.Int(0), static_cast<uint32_t>(t->modules_.size()));
      t->modules_.push_back(st.Text(1));
    }));
  }
  // Served by the covering index symbols_text_by_addr (schema/005).
  // (The index's WHERE names the same letters; SQLite uses it only when the query's list matches.)
  ASSIGN_OR_RETURN(
      Stmt st, db.Prepare(StrCat("SELECT addr, type, name, size, size_exact, module_id, "
                                 "dwarf_function_id IS NOT NULL, src_line IS NOT NULL, elf_facts, probe FROM symbols "
                                 "WHERE target_id = ?1 AND section IS NULL AND type IN ",
                                 SqlTypeList(kCodeSymbolTypes), " ORDER BY addr, id")));
  st.Bind(1, target_id);
  RETURN_IF_ERROR(st.EachRow([&]() -> absl::Status {
    TextSymbolTable::Entry e{};
    e.addr = st.Int(0);
    std::string type = st.Text(1);
    e.type = type.empty() ? '?' : type[0];
    std::string name = st.Text(2);
    if (t->own_names_.size() + name.size() + 1 > UINT32_MAX) {
      return absl::ResourceExhaustedError("too many symbol names");
    }
    e.name = static_cast<uint32_t>(t->own_names_.size());
    t->own_names_ += name;
    t->own_names_.push_back('\0');
    if (!st.IsNull(3)) {
      e.size = static_cast<uint64_t>(st.Int(3));
      e.flags |= kSizeKnown;
    }
    if (st.Int(4) != 0) e.flags |= kSizeExact;
    if (!st.IsNull(5)) {
      auto it = module_of.find(st.Int(5));
      e.module = it == module_of.end() ? 0 : it->second;
    }
    if (st.Int(6) != 0) e.flags |= kHasFunction | kHasDwarf;
    if (st.Int(7) != 0) e.flags |= kHasDwarf;
    if (!st.IsNull(8)) {
      e.flags |= kElfKnown;
      e.elf_facts = static_cast<uint8_t>(st.Int(8));
    }
    e.probe = static_cast<uint32_t>(st.Int(9));
    t->own_entries_.push_back(e);
    return absl::OkStatus();
  }));
  t->entries_ = t->own_entries_;
  t->names_ = t->own_names_;
  ASSIGN_OR_RETURN(t->extents_, LoadOwnerExtents(db, target_id));
  return std::shared_ptr<const TextSymbolTable>(std::move(t));
}

Containment TextSymbolTable::Containing(uint64_t addr) const {
  const int64_t key = ToDb(addr);
  auto extents = [this]() -> absl::StatusOr<const OwnerExtents*> { return &extents_; };
  // `c` views `r`: r is moved only after the rule has looked at c.
  auto answer = [&](const Candidate* c, SymbolRecord* r) {
    // The extents are in memory: the rule cannot fail here.
    auto why = WhyNotContained(c, addr, extents);
    if (!why.ok()) return Containment{std::nullopt, std::string(why.status().message()), std::nullopt};
    return Verdict(std::move(*why), c, r, addr);
  };
  // The greatest address <= key, in the same half of the address space (as SymbolContaining).
  auto hi =
      std::upper_bound(entries_.begin(), entries_.end(), key, [](int64_t v, const Entry& e) { return v < e.addr; });
  if (hi == entries_.begin()) return answer(nullptr, nullptr);
  const int64_t at = std::prev(hi)->addr;
  if ((at < 0) != (key < 0)) return answer(nullptr, nullptr);
  auto lo = std::lower_bound(entries_.begin(), hi, at, [](const Entry& e, int64_t v) { return e.addr < v; });
  auto name_of = [&](const Entry& e) { return std::string_view(names_.data() + e.name); };
  auto alias = [&](const Entry& e) {
    return AliasFacts{name_of(e), e.type, (e.flags & kElfKnown) ? std::optional<uint8_t>(e.elf_facts) : std::nullopt,
                      (e.flags & kHasFunction) != 0};
  };
  const Entry* best = &*lo;
  for (auto it = lo + 1; it != hi; ++it) {
    if (PreferAlias(alias(*it), alias(*best))) best = &*it;
  }
  SymbolRecord r;
  r.name = std::string(name_of(*best));
  r.type = best->type;
  r.module = modules_[best->module];
  r.addr = FromDb(best->addr);
  if (best->flags & kSizeKnown) r.size = best->size;
  r.size_exact = (best->flags & kSizeExact) != 0;
  if (best->flags & kElfKnown) r.elf_facts = best->elf_facts;
  r.probe = best->probe;
  if (best->flags & kHasDwarf) {
    DwarfInfo d;
    d.has_function = (best->flags & kHasFunction) != 0;
    r.dwarf = std::move(d);
  }
  Candidate c = CandidateOf(r);
  return answer(&c, &r);
}

absl::StatusOr<std::vector<SymbolRecord>> AllSymbols(Db& db, int64_t id, bool all_types) {
  std::string sql =
      std::string(kSymbolSelect) + "WHERE s.target_id = ?1 AND (?2 OR s.type IN " + SqlTypeList(kTextSymbolTypes) + ")";
  ASSIGN_OR_RETURN(Stmt st, db.Prepare(sql));
  st.Bind(1, id).Bind(2, int64_t{all_types});
  std::vector<SymbolRecord> out;
  RETURN_IF_ERROR(st.EachRow([&] { out.push_back(ReadSymbol(st)); }));
  return out;
}

}  // namespace symdex::store
