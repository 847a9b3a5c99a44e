// The address -> symbol rule (store/symbol_extent.h), through both lookups that apply it: the
// per-address SQL query and the batch table. Every case is asked of both, and both must answer
// the same.
#include "server/store/symbol_extent.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "server/common/file_util.h"
#include "server/store/index_store.h"
#include "server/store/migrations.h"
#include "server/store/open_index.h"
#include "server/store/text_symbol_file.h"
#include "tests/unit/test_util.h"

namespace symdex::store {
namespace {

using symdex::testing::TempDir;

TEST(SymbolExtentTest, RegionLabelsAreOnlyTheReservedForms) {
  for (const char* end : {"_etext", "_einittext", "_end", "__bss_stop", "__irqentry_text_end", "__sched_text_end",
                          "__end_entry_SYSENTER_compat", "__stop___jump_table", "__indirect_thunk_end"}) {
    EXPECT_TRUE(IsRegionEndLabel(end)) << end;
  }
  for (const char* start : {"_text", "_stext", "_sinittext", "__irqentry_text_start", "__start___jump_table"}) {
    EXPECT_TRUE(IsRegionStartLabel(start)) << start;
  }
  // Ordinary functions whose names merely look like bounds.
  for (const char* fn : {"__stop_tty", "entry_SYSRETQ_end", "__delayacct_blkio_end", "__key_link_end",
                         "_ext4_get_block", "common_interrupt_return", "_text_poke"}) {
    EXPECT_FALSE(IsRegionEndLabel(fn)) << fn;
    EXPECT_FALSE(IsRegionStartLabel(fn)) << fn;
  }
}

constexpr uint64_t kV = 0xffffffff81000000ull;  // _text
constexpr uint64_t kUio = 0xffffffffc0a00000ull;

kernel::KernelTarget LaidOutTarget() {
  kernel::KernelTarget t;
  t.name = "host";
  t.kind = "live";
  t.text_addr = kV;
  t.source = "fixture";
  t.modules.push_back({.name = "uio", .text_addr = kUio, .size = 0x6000});
  t.modules.push_back({.name = "nosize", .text_addr = 0xffffffffc0b00000ull});
  t.modules.push_back({.name = "mei", .text_addr = 0xffffffffc0c00000ull, .size = 0x1000});
  auto add = [&](std::string n, char type, uint64_t addr, int module = -1) {
    t.symbols.push_back({.name = std::move(n), .addr = addr, .module = module, .type = type});
  };
  add("_text", 'T', kV);
  add("_stext", 'T', kV);
  add("startup_64", 'T', kV);
  add("foo", 't', kV + 0x100);
  add("__irqentry_text_start", 'T', kV + 0x200);
  add("asm_irq", 'T', kV + 0x200);
  add("__irqentry_text_end", 'T', kV + 0x300);
  add("common_interrupt_return", 'T', kV + 0x300);
  add("bar", 'T', kV + 0x400);
  add("_etext", 'T', kV + 0x500);
  add("some_rodata", 'r', kV + 0x800000);
  add("_sinittext", 'T', kV + 0x1000000);
  add("early_idt_handler_array", 'T', kV + 0x1000000);
  add("init_fn", 't', kV + 0x1000100);
  add("_einittext", 'T', kV + 0x1000200);
  add("data_x", 'D', kV + 0x1100000);
  add("_end", 'B', kV + 0x1200000);
  add("uio_open", 't', kUio + 0x40, 0);
  add("uio_read", 't', kUio + 0x100, 0);
  add("uio_data", 'd', kUio + 0x100000, 0);       // placed apart from uio's text: uio's end bounds uio_read
  add("last_fn", 't', 0xffffffffc0b00000ull, 1);  // nosize has no /proc/modules size
  add("mei_fn", 't', 0xffffffffc0c00100ull, 2);   // the last symbol of mei: extends to mei's end
  kernel::DeriveSizesAndDedupe(t);
  return t;
}

struct Want {
  uint64_t addr;
  const char* symbol;  // nullptr: not found
  const char* why;     // not found: a part of the reason
};

TEST(SymbolExtentTest, BothLookupsApplyTheSameRule) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(ReplaceTarget(*db, LaidOutTarget(), 1).ok());
  auto info = FindTarget(*db, "host");
  ASSERT_TRUE(info.ok() && info->has_value());
  const int64_t id = (*info)->id;
  auto table = LoadTextSymbolTable(*db, id);
  ASSERT_TRUE(table.ok()) << table.status();
  // The same table as the file beside the index, mapped (store/text_symbol_file.h).
  ASSERT_TRUE(WriteTextSymbolFile(*db, **info).ok());
  auto mapped = MapTextSymbolFile(TextSymbolFilePath(d / "i.db-addrmaps", id), **info);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ((*mapped)->size(), (*table)->size());

  const Want cases[] = {
      {kV, "startup_64", nullptr},  // a function beats _text/_stext at its address
      {kV + 0x50, "startup_64", nullptr},
      {kV + 0x250, "asm_irq", nullptr},                  // ... and a region start label
      {kV + 0x300, "common_interrupt_return", nullptr},  // ... and a region end label
      {kV + 0x4ff, "bar", nullptr},
      {kV + 0x500, nullptr, "after _etext"},  // _etext holds nothing
      {kV + 0x900000, nullptr, "in vmlinux but in no function"},
      {kV + 0x1000000, "early_idt_handler_array", nullptr},
      {kV + 0x1000150, "init_fn", nullptr},
      {kV + 0x1000200, nullptr, "after _einittext"},
      {kV + 0x1300000, nullptr, "not in vmlinux or any module"},         // past _end
      {kV - 0x1000, nullptr, "not in vmlinux or any module"},            // below _text
      {0xffffffffc0000000ull, nullptr, "not in vmlinux or any module"},  // between vmlinux and modules
      {kUio + 0x5fff, "uio_read", nullptr},
      {kUio + 0x6000, nullptr, "not in vmlinux or any module"},  // past uio's end, short of uio_data
      {0xffffffffc0c00fffull, "mei_fn", nullptr},                // the last symbol: up to mei's end
      {0xffffffffc0c01000ull, nullptr, "not in vmlinux or any module"},
      {0xffffffffc0b00010ull, nullptr, "whose end is unknown"},  // never a guess
      {0x1000, nullptr, "not in vmlinux or any module"},         // user space
  };
  for (const Want& w : cases) {
    SCOPED_TRACE(fmt::format("0x{:x}", w.addr));
    auto single = SymbolContaining(*db, id, w.addr);
    ASSERT_TRUE(single.ok()) << single.status();
    Containment batch = (*table)->Containing(w.addr);
    Containment from_file = (*mapped)->Containing(w.addr);
    EXPECT_EQ(from_file.symbol.has_value(), batch.symbol.has_value());
    EXPECT_EQ(from_file.why, batch.why);
    // Exactly at a region's end label, all three name it (an address spec resolves to it).
    ASSERT_EQ(single->end_label.has_value(), batch.end_label.has_value());
    ASSERT_EQ(from_file.end_label.has_value(), batch.end_label.has_value());
    if (batch.end_label) {
      EXPECT_EQ(single->end_label->name, batch.end_label->name);
      EXPECT_EQ(from_file.end_label->name, batch.end_label->name);
    }
    EXPECT_EQ(batch.end_label.has_value(), w.addr == kV + 0x500 || w.addr == kV + 0x1000200);
    if (from_file.symbol && batch.symbol) {
      EXPECT_EQ(from_file.symbol->name, batch.symbol->name);
      EXPECT_EQ(from_file.symbol->module, batch.symbol->module);
      EXPECT_EQ(from_file.symbol->addr, batch.symbol->addr);
      EXPECT_EQ(from_file.symbol->size, batch.symbol->size);
    }
    if (w.symbol == nullptr) {
      EXPECT_FALSE(single->symbol.has_value()) << single->symbol->name;
      EXPECT_FALSE(batch.symbol.has_value()) << batch.symbol->name;
      EXPECT_NE(single->why.find(w.why), std::string::npos) << single->why;
      EXPECT_EQ(single->why, batch.why);
    } else {
      ASSERT_TRUE(single->symbol.has_value()) << single->why;
      ASSERT_TRUE(batch.symbol.has_value()) << batch.why;
      EXPECT_EQ(single->symbol->name, w.symbol);
      EXPECT_EQ(batch.symbol->name, w.symbol);
    }
  }
}

TEST(SymbolExtentTest, AnOfflineTargetSaysItsModulesHaveNoAddresses) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  kernel::KernelTarget t = LaidOutTarget();
  t.kind = "offline";
  t.modules = {{.name = "uio"}};
  t.symbols.erase(std::remove_if(t.symbols.begin(), t.symbols.end(), [](const auto& s) { return s.module >= 0; }),
                  t.symbols.end());
  ASSERT_TRUE(ReplaceTarget(*db, t, 1).ok());
  auto info = FindTarget(*db, "host");
  auto r = SymbolContaining(*db, (*info)->id, 0xffffffffc0000000ull);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->symbol);
  EXPECT_EQ(r->why, "not in vmlinux (this offline target's modules have no addresses)");
}

// The text-symbol file is a cache: one made before the target's symbols changed, or damaged in
// any of its parts, is refused with the reason, and the table is read from the database.
TEST(SymbolExtentTest, AStaleOrDamagedTextSymbolFileIsNotUsed) {
  TempDir d;
  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(ReplaceTarget(*db, LaidOutTarget(), 1).ok());
  auto info = FindTarget(*db, "host");
  ASSERT_TRUE(info.ok() && info->has_value());
  ASSERT_NE((*info)->symbols_stamp, 0);
  const std::string path = TextSymbolFilePath(d / "i.db-addrmaps", (*info)->id);
  ASSERT_TRUE(WriteTextSymbolFile(*db, **info).ok());
  bool from_file = false;
  auto current = OpenTextSymbolTable(*db, **info, &from_file);
  ASSERT_TRUE(current.ok());
  EXPECT_TRUE(from_file);
  auto read = ReadFileBounded(path);
  ASSERT_TRUE(read.ok()) << read.status();
  const std::string good = *read;

  // The target written again (same name, same symbols): the old file is stale.
  ASSERT_TRUE(ReplaceTarget(*db, LaidOutTarget(), 2).ok());
  auto again = FindTarget(*db, "host");
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_NE((*again)->symbols_stamp, (*info)->symbols_stamp);
  auto stale = MapTextSymbolFile(path, **again);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition) << stale.status();
  auto fallback = OpenTextSymbolTable(*db, **again, &from_file);
  ASSERT_TRUE(fallback.ok());
  EXPECT_FALSE(from_file);
  EXPECT_EQ((*fallback)->Containing(kV + 0x150).symbol->name, "foo");

  // Damaged copies of the good file, each refused for what is wrong with it.
  struct Damage {
    const char* what;
    std::function<void(std::string&)> apply;
    const char* says;
  };
  const size_t header = 112;  // the file's header (text_symbol_file.cc)
  const Damage damages[] = {
      {"cut short", [](std::string& b) { b.resize(b.size() - 3); }, "past the end"},
      {"a byte more", [](std::string& b) { b.push_back('x'); }, "after its last part"},
      {"not ours", [](std::string& b) { b[0] = 'X'; }, "not a text-symbol file"},
      {"a name past the names", [&](std::string& b) { std::memset(&b[header + 16], 0xff, 4); }, "does not have"},
      {"a module past the modules", [&](std::string& b) { std::memset(&b[header + 20], 0x7f, 4); }, "does not have"},
      {"out of order", [&](std::string& b) { std::memset(&b[header + 32], 0x7f, 8); }, "address order"},
      {"only a header", [&](std::string& b) { b.resize(40); }, "shorter than its header"},
  };
  for (const Damage& dmg : damages) {
    SCOPED_TRACE(dmg.what);
    std::string bytes = good;
    dmg.apply(bytes);
    testing::WriteFile(path, bytes);
    auto bad = MapTextSymbolFile(path, **info);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find(dmg.says), std::string::npos) << bad.status();
  }
}

}  // namespace
}  // namespace symdex::store
