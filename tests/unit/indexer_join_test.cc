// The indexer joins symbols to a freshly parsed debug file in memory (indexer/dwarf_join.cc)
// and to one indexed by an earlier run from the store: both must give the same answer for
// every address, ties between aliases included, or a re-index would change the index.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "server/indexer/steps.h"
#include "server/store/debuginfo_store.h"
#include "server/store/migrations.h"
#include "server/store/open_index.h"
#include "tests/unit/test_util.h"

namespace symdex::indexer {
namespace {

using symdex::testing::TempDir;

// A module-style (relocatable) index: two aliases with the very same range, stored in an
// order that is not their name order, a .cold part in another section, a line-only address.
debuginfo::DwarfIndex AliasIndex() {
  debuginfo::DwarfIndex idx;
  idx.relocatable = true;
  idx.sections = {".text", ".text.unlikely"};
  idx.files = {"lib/memmove.S", "lib/x.c"};
  idx.raw_files = idx.files;
  idx.units = {{.name = "lib/memmove.S"}, {.name = "lib/x.c"}};
  auto fn = [&](std::string name, uint64_t entry, std::vector<debuginfo::AddrRange> ranges) {
    debuginfo::DwarfFunction f;
    f.name = std::move(name);
    f.entry = entry;
    f.entry_section = 0;
    f.ranges = std::move(ranges);
    f.cu = 0;
    idx.functions.push_back(std::move(f));
  };
  fn("zz_memmove", 0x100, {{0x100, 0x180, 0}});
  fn("memmove", 0x100, {{0x100, 0x180, 0}});
  fn("__memmove", 0x100, {{0x100, 0x180, 0}});
  fn("x_func", 0x200, {{0x200, 0x240, 0}, {0x10, 0x30, 1}});
  idx.symbol_lines = {{.addr = 0x100, .section = 0, .cu = 0, .file = 0, .line = 12},
                      {.addr = 0x300, .section = 0, .cu = 1, .file = 1, .line = 40},
                      {.addr = 0x10, .section = 1, .cu = UINT32_MAX, .file = debuginfo::kNoFile, .line = 0}};
  return idx;
}

TEST(IndexerJoin, InMemoryTableAnswersAsTheStoredOne) {
  TempDir d;
  auto db = store::OpenIndex(d / "i.db", store::IndexUse::kCreate);
  ASSERT_TRUE(db.ok()) << db.status();
  const debuginfo::DwarfIndex idx = AliasIndex();
  auto stored = store::InsertDebugFile(*db, idx, "aabbccdd", "/x.ko.debug", std::nullopt, std::nullopt, 0.1, 1);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_TRUE(stored->function_ids.has_value());
  ASSERT_EQ(stored->function_ids->size(), idx.functions.size());

  auto mem = JoinTableOf(idx, *stored->function_ids);
  auto loaded = LoadJoinTable(*db, stored->id);
  ASSERT_TRUE(loaded.ok()) << loaded.status();

  for (const char* sec : {".text", ".text.unlikely", ""}) {
    for (uint64_t a : {0x0, 0x10, 0x20, 0x100, 0x101, 0x17f, 0x180, 0x200, 0x23f, 0x300}) {
      auto m = mem->locator.Find(sec, a), l = (*loaded)->locator.Find(sec, a);
      ASSERT_EQ(m.has_value(), l.has_value()) << sec << "+" << a;
      if (!m) continue;
      EXPECT_EQ(m->function_id, l->function_id) << sec << "+" << a;
      EXPECT_EQ(m->at_entry, l->at_entry) << sec << "+" << a;
      EXPECT_EQ(m->offset, l->offset) << sec << "+" << a;
    }
  }
  ASSERT_EQ(mem->lines.size(), (*loaded)->lines.size());
  for (const JoinTable::Line& line : mem->lines) {
    const std::string& section = mem->sections.at(line.section);
    const JoinTable::Line* it = (*loaded)->LineAt(section, line.addr);
    ASSERT_NE(it, nullptr) << section << "+" << line.addr;
    EXPECT_EQ(line.unit, it->unit);
    EXPECT_EQ(line.file, it->file);
    EXPECT_EQ(line.line, it->line);
    EXPECT_EQ(mem->LineAt(section, line.addr), &line);
  }
  EXPECT_EQ(mem->LineAt(".text", 0x12345), nullptr);
  EXPECT_EQ(mem->LineAt(".no_such_section", 0x100), nullptr);
  // The tie between the three aliases goes the same way in both; which one it is follows the
  // store's order (by name), not the order the parser produced them in.
  auto hit = mem->locator.Find(".text", 0x100);
  ASSERT_TRUE(hit);
  EXPECT_TRUE(hit->at_entry);
}

TEST(IndexerJoin, RowsAlreadyStoredGiveNoFunctionIds) {
  TempDir d;
  auto db = store::OpenIndex(d / "i.db", store::IndexUse::kCreate);
  ASSERT_TRUE(db.ok()) << db.status();
  const debuginfo::FileStamp stamp{.size = 1, .mtime_ns = 2, .ctime_ns = 3, .ino = 4, .dev = 5};
  auto first = store::InsertDebugFile(*db, AliasIndex(), "aabbccdd", "/x.ko.debug", stamp, std::nullopt, 0.1, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = store::InsertDebugFile(*db, AliasIndex(), "aabbccdd", "/x.ko.debug", stamp, std::nullopt, 0.1, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id, first->id);
  // Nothing was written: the caller must read the stored rows, not trust its own parse.
  EXPECT_FALSE(again->function_ids.has_value());
}

// The ids handed out before the rows are written (for the join table made beside the insert)
// are the ids the rows get, in the parse's order; a second file's follow the first's; and a
// call that writes nothing hands out none.
TEST(IndexerJoin, FunctionIdsKnownBeforeTheRowsAreTheirIds) {
  TempDir d;
  auto db = store::OpenIndex(d / "i.db", store::IndexUse::kCreate);
  ASSERT_TRUE(db.ok()) << db.status();
  auto ids_of = [&](int64_t file) {
    auto st = db->Prepare("SELECT id FROM dwarf_functions WHERE debug_file_id = ?1 ORDER BY id");
    EXPECT_TRUE(st.ok());
    st->Bind(1, file);
    std::vector<int64_t> out;
    while (*st->Step()) out.push_back(st->Int(0));
    return out;
  };
  auto rows_now = [&] {
    auto st = db->Prepare("SELECT COUNT(*) FROM dwarf_functions");
    EXPECT_TRUE(st.ok());
    EXPECT_TRUE(*st->Step());
    return st->Int(0);
  };
  const debuginfo::FileStamp stamp{.size = 1, .mtime_ns = 2, .ctime_ns = 3, .ino = 4, .dev = 5};
  int64_t rows_before_first = -1, rows_before_second = -1;
  std::vector<int64_t> told_first, told_second;
  auto first = store::InsertDebugFile(*db, AliasIndex(), "aabbccdd", "/x.ko.debug", stamp, std::nullopt, 0.1, 1,
                                      [&](const std::vector<int64_t>& ids) {
                                        told_first = ids;
                                        rows_before_first = rows_now();
                                      });
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(rows_before_first, 0);  // told before any row went in
  ASSERT_EQ(told_first.size(), AliasIndex().functions.size());
  EXPECT_EQ(told_first, *first->function_ids);
  EXPECT_EQ(told_first, ids_of(first->id));  // ascending, one per function, in the parse's order

  auto second = store::InsertDebugFile(*db, AliasIndex(), "eeff0011", "/y.ko.debug", stamp, std::nullopt, 0.1, 1,
                                       [&](const std::vector<int64_t>& ids) {
                                         told_second = ids;
                                         rows_before_second = rows_now();
                                       });
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(rows_before_second, static_cast<int64_t>(told_first.size()));
  EXPECT_EQ(told_second, ids_of(second->id));
  ASSERT_FALSE(told_second.empty());
  EXPECT_GT(told_second.front(), told_first.back());

  bool called = false;
  auto again = store::InsertDebugFile(*db, AliasIndex(), "aabbccdd", "/x.ko.debug", stamp, std::nullopt, 0.1, 2,
                                      [&](const std::vector<int64_t>&) { called = true; });
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(called);
}

// Every row of the debug-file tables, in a fixed order (debug_files without its time).
std::string DumpDebugRows(store::Db& db) {
  std::string out;
  for (const char* q :
       {"SELECT id, build_id, relocatable, path, text_addr, units, functions, variables, file_size FROM debug_files",
        "SELECT * FROM dwarf_sections ORDER BY 1, 2", "SELECT * FROM dwarf_files ORDER BY 1, 2",
        "SELECT * FROM dwarf_units ORDER BY 1, 2", "SELECT * FROM dwarf_functions ORDER BY id",
        "SELECT * FROM dwarf_ranges ORDER BY function_id, lo", "SELECT * FROM dwarf_variables ORDER BY id",
        "SELECT * FROM dwarf_symbol_lines ORDER BY 1, 2, 3"}) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db.raw(), q, -1, &st, nullptr), SQLITE_OK) << q;
    out += q;
    out += "\n";
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const unsigned char* t = sqlite3_column_text(st, c);
        out += t ? reinterpret_cast<const char*>(t) : "NULL";
        out += '|';
      }
      out += '\n';
    }
    sqlite3_finalize(st);
  }
  return out;
}

// The first `n` of each table of `idx` (a part as a streamed parse hands it over, and what came
// before it).
debuginfo::DwarfIndex Prefix(const debuginfo::DwarfIndex& idx, const debuginfo::DwarfIndexSizes& n) {
  debuginfo::DwarfIndex p = idx;
  p.sections.resize(n.sections);
  p.files.resize(n.files);
  p.raw_files.resize(n.files);
  p.units.resize(n.units);
  p.functions.resize(n.functions);
  p.variables.resize(n.variables);
  p.symbol_lines.resize(n.symbol_lines);
  return p;
}

// A debug file written in parts (store::DebugFileWriter, as vmlinux is while the worker reads
// it) is stored row for row as InsertDebugFile stores it in one piece; a writer dropped before
// Finish stores nothing.
TEST(IndexerJoin, AFileWrittenInPartsIsStoredAsInOnePiece) {
  TempDir d;
  debuginfo::DwarfIndex idx = AliasIndex();
  idx.variables.push_back({.name = "v", .addr = 0x900, .section = 1, .cu = 1, .decl_file = 1, .decl_line = 3});
  const debuginfo::FileStamp stamp{.size = 1, .mtime_ns = 2, .ctime_ns = 3, .ino = 4, .dev = 5};
  auto whole_db = store::OpenIndex(d / "whole.db", store::IndexUse::kCreate);
  ASSERT_TRUE(whole_db.ok()) << whole_db.status();
  auto whole = store::InsertDebugFile(*whole_db, idx, "aabbccdd", "/x.ko.debug", stamp, 0x1000, 0.5, 7);
  ASSERT_TRUE(whole.ok()) << whole.status();

  auto parts_db = store::OpenIndex(d / "parts.db", store::IndexUse::kCreate);
  ASSERT_TRUE(parts_db.ok()) << parts_db.status();
  auto w = store::DebugFileWriter::Begin(*parts_db, "aabbccdd", "/x.ko.debug", stamp, idx.relocatable, 7);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->writes());
  const debuginfo::DwarfIndexSizes first{.sections = 1, .files = 1, .units = 1, .functions = 2};
  const debuginfo::DwarfIndexSizes second{.sections = 2, .files = 2, .units = 2, .functions = 3, .variables = 1};
  ASSERT_TRUE((*w)->Add(Prefix(idx, first), {}).ok());
  ASSERT_TRUE((*w)->Add(Prefix(idx, second), first).ok());
  auto parts = (*w)->Finish(idx, second, 0x1000, 0.5);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->id, whole->id);
  EXPECT_EQ(parts->function_ids, whole->function_ids);
  EXPECT_EQ(DumpDebugRows(*parts_db), DumpDebugRows(*whole_db));

  auto dropped_db = store::OpenIndex(d / "dropped.db", store::IndexUse::kCreate);
  ASSERT_TRUE(dropped_db.ok()) << dropped_db.status();
  const std::string empty = DumpDebugRows(*dropped_db);
  {
    auto dropped = store::DebugFileWriter::Begin(*dropped_db, "aabbccdd", "/x.ko.debug", stamp, true, 7);
    ASSERT_TRUE(dropped.ok()) << dropped.status();
    ASSERT_TRUE((*dropped)->Add(Prefix(idx, first), {}).ok());
  }  // the worker died: no Finish
  EXPECT_EQ(DumpDebugRows(*dropped_db), empty);
}

// A debug file that changed is stored again under its id: its old rows go — ranges included,
// which foreign-key cascades no longer delete (InsertDebugFile writes with enforcement off) —
// another file's rows stay, and every reference still points at a stored row.
TEST(IndexerJoin, AChangedFileReplacesItsRowsAndLeavesNoneBehind) {
  TempDir d;
  auto db = store::OpenIndex(d / "i.db", store::IndexUse::kCreate);
  ASSERT_TRUE(db.ok()) << db.status();
  auto count = [&](const char* sql) {
    auto st = db->Prepare(sql);
    EXPECT_TRUE(st.ok());
    return *st->Step() ? st->Int(0) : -1;
  };
  const debuginfo::FileStamp before{.size = 1, .mtime_ns = 2, .ctime_ns = 3, .ino = 4, .dev = 5};
  const debuginfo::FileStamp after{.size = 1, .mtime_ns = 9, .ctime_ns = 9, .ino = 4, .dev = 5};
  auto first = store::InsertDebugFile(*db, AliasIndex(), "aabbccdd", "/x.ko.debug", before, std::nullopt, 0.1, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  auto other = store::InsertDebugFile(*db, AliasIndex(), "eeff0011", "/y.ko.debug", before, std::nullopt, 0.1, 1);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(count("SELECT COUNT(*) FROM dwarf_ranges"), 10);  // 5 ranges per file

  debuginfo::DwarfIndex changed = AliasIndex();
  changed.functions.pop_back();  // x_func and its two ranges are gone from the new file
  auto again = store::InsertDebugFile(*db, changed, "aabbccdd", "/x.ko.debug", after, std::nullopt, 0.1, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id, first->id);
  ASSERT_TRUE(again->function_ids.has_value());
  EXPECT_EQ(count("SELECT COUNT(*) FROM dwarf_ranges"), 8);
  EXPECT_EQ(count("SELECT COUNT(*) FROM dwarf_ranges r WHERE NOT EXISTS "
                  "(SELECT 1 FROM dwarf_functions f WHERE f.id = r.function_id)"),
            0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM dwarf_functions"), 7);
  EXPECT_EQ(count("SELECT COUNT(*) FROM dwarf_symbol_lines"), 6);
  for (const char* table : {"dwarf_functions", "dwarf_ranges", "dwarf_variables", "dwarf_symbol_lines", "dwarf_units",
                            "dwarf_files", "dwarf_sections"}) {
    auto check = db->Prepare(std::string("PRAGMA foreign_key_check(") + table + ")");
    ASSERT_TRUE(check.ok());
    EXPECT_FALSE(*check->Step()) << table << ": a row refers to a missing parent";
  }
  // The ids handed to the join are the stored rows' ids.
  auto mem = JoinTableOf(changed, *again->function_ids);
  auto loaded = LoadJoinTable(*db, again->id);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (uint64_t a : {0x100, 0x17f, 0x200}) {
    auto m = mem->locator.Find(".text", a), l = (*loaded)->locator.Find(".text", a);
    ASSERT_EQ(m.has_value(), l.has_value()) << a;
    if (m) {
      EXPECT_EQ(m->function_id, l->function_id) << a;
    }
  }
}

}  // namespace
}  // namespace symdex::indexer
