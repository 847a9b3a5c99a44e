// Which of several symbols at one address names it (store::AliasRank): by the ELF symbol
// table's facts when the index has them (sized, STT_FUNC, binding: as llvm-symbolizer ranks),
// by the name rule otherwise. The facts come from a compiled image's symbol table through the
// indexer's step 5b (AttachElfFacts), and both address lookups (the per-address SQL query and
// the batch table) must then answer the same.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "server/common/elf_facts.h"
#include "server/debuginfo/files/symtab_file.h"
#include "server/indexer/steps.h"
#include "server/store/index_store.h"
#include "server/store/migrations.h"
#include "server/store/open_index.h"
#include "server/store/symbol_extent.h"
#include "tests/unit/test_util.h"

namespace symdex::store {
namespace {

using symdex::testing::RunCommand;
using symdex::testing::TempDir;
using symdex::testing::WriteFile;

constexpr uint8_t kFunc = kElfSized | kElfFunction;  // a sized STT_FUNC
constexpr uint8_t kSizedLabel = kElfSized;           // a sized STT_NOTYPE (assembly: .size, no .type)
constexpr uint8_t kLabel = 0;                        // STT_NOTYPE, size 0

// The best of `group` by PreferAlias, asked in every order the group can come in.
std::string Best(std::vector<AliasFacts> group) {
  std::sort(group.begin(), group.end(), [](const AliasFacts& a, const AliasFacts& b) { return a.name < b.name; });
  std::string first;
  do {
    const AliasFacts* best = &group[0];
    for (const auto& a : group) {
      if (PreferAlias(a, *best)) best = &a;
    }
    if (first.empty()) first = best->name;
    EXPECT_EQ(best->name, first) << "the answer depends on the order the rows come in";
  } while (std::next_permutation(group.begin(), group.end(),
                                 [](const AliasFacts& a, const AliasFacts& b) { return a.name < b.name; }));
  return first;
}

// The groups as Debian 6.1.0-57's debug vmlinux has them (readelf -sW; letters from System.map).
TEST(AliasRankTest, TheElfSymbolTableDecidesWhereTheIndexHasIt) {
  EXPECT_EQ(Best({{"_sinittext", 'T', kLabel}, {"early_idt_handler_array", 'T', kSizedLabel}}),
            "early_idt_handler_array");
  EXPECT_EQ(Best({{"__irqentry_text_end", 'T', kLabel},
                  {"common_interrupt_return", 't', kSizedLabel},
                  {"swapgs_restore_regs_and_return_to_usermode", 'T', kLabel}}),
            "common_interrupt_return");
  // All three are 12-byte functions: the global names beat the static one they were made from.
  EXPECT_EQ(Best({{"__do_sys_ni_syscall", 't', kFunc, true},
                  {"__ia32_sys_ni_syscall", 'T', kFunc, true},
                  {"__x64_sys_ni_syscall", 'T', kFunc, true}}),
            "__x64_sys_ni_syscall");
  // A size beats a shorter name.
  EXPECT_EQ(Best({{"ftrace_ops_list_func", 'T', kElfFunction}, {"arch_ftrace_ops_list_func", 'T', kFunc}}),
            "arch_ftrace_ops_list_func");
  // Global beats weak.
  EXPECT_EQ(Best({{"memmove", 'W', kFunc}, {"__memmove", 'T', kFunc}}), "__memmove");
  // A function beats a sized label; __pfx_ padding never names an address it shares.
  EXPECT_EQ(Best({{"__pfx_foo", 'T', kFunc}, {"foo_label", 'T', kSizedLabel}, {"foo", 'T', kFunc}}), "foo");
  // Equal facts: the shorter name, then the one that sorts first, whatever the row order.
  EXPECT_EQ(Best({{"thermal_genl_event_tz_enable", 'T', kFunc},
                  {"thermal_genl_event_tz_delete", 'T', kFunc},
                  {"thermal_genl_event_tz_disable", 'T', kFunc}}),
            "thermal_genl_event_tz_delete");
}

TEST(AliasRankTest, WithoutTheElfFactsTheNameRuleDecides) {
  EXPECT_EQ(Best({{"_sinittext", 'T'}, {"early_idt_handler_array", 'T'}}), "early_idt_handler_array");
  // Binding is not used without sizes: it would pick the global label here.
  EXPECT_EQ(Best({{"__irqentry_text_end", 'T'},
                  {"common_interrupt_return", 't'},
                  {"swapgs_restore_regs_and_return_to_usermode", 'T'}}),
            "common_interrupt_return");
  EXPECT_EQ(Best({{"_text", 'T'}, {"_stext", 'T'}, {"startup_64", 'T'}}), "startup_64");
  // The shorter name: all kallsyms can say.
  EXPECT_EQ(Best({{"__do_sys_ni_syscall", 't'}, {"__x64_sys_ni_syscall", 'T'}}), "__do_sys_ni_syscall");
  // A symbol the symbol table sized beats one it did not cover.
  EXPECT_EQ(Best({{"__do_sys_ni_syscall", 't'}, {"__x64_sys_ni_syscall", 'T', kFunc}}), "__x64_sys_ni_syscall");
}

// An image laid out as the kernel's assembly and syscall wrappers are.
constexpr char kImageSource[] = R"(
__asm__(".text\n"
        ".globl _sinittext\n_sinittext:\n"
        ".globl early_idt_handler_array\nearly_idt_handler_array:\n nop\n nop\n ret\n"
        ".size early_idt_handler_array, .-early_idt_handler_array\n"
        ".globl __irqentry_text_end\n__irqentry_text_end:\n"
        ".globl swapgs_restore_regs_and_return_to_usermode\nswapgs_restore_regs_and_return_to_usermode:\n"
        "common_interrupt_return:\n nop\n ret\n"
        ".size common_interrupt_return, .-common_interrupt_return\n"
        ".globl arch_ftrace_ops_list_func\n.type arch_ftrace_ops_list_func,@function\n"
        ".globl ftrace_ops_list_func\n.type ftrace_ops_list_func,@function\n"
        "arch_ftrace_ops_list_func:\nftrace_ops_list_func:\n nop\n ret\n"
        ".size arch_ftrace_ops_list_func, .-arch_ftrace_ops_list_func\n"
        ".weak memmove\n.type memmove,@function\n.globl __memmove\n.type __memmove,@function\n"
        "memmove:\n__memmove:\n nop\n ret\n.size memmove,2\n.size __memmove,2\n");
__attribute__((noinline, used)) static long __do_sys_ni_syscall(void) { return -38; }
long __x64_sys_ni_syscall(void) __attribute__((alias("__do_sys_ni_syscall")));
void _start(void) {}
)";

TEST(AliasRankTest, TheIndexerCarriesTheDebugFilesFactsToBothLookups) {
  TempDir d;
  WriteFile(d / "image.c", kImageSource);
  auto cc =
      RunCommand(fmt::format("cc -O2 -nostdlib -static -Wl,--build-id -o '{}' '{}'", d / "vmlinux", d / "image.c"));
  ASSERT_EQ(cc.exit_code, 0) << cc.err;
  auto elf = debuginfo::ReadSymtabFile(d / "vmlinux");
  ASSERT_TRUE(elf.ok()) << elf.status();
  ASSERT_TRUE(elf->build_id.has_value());

  // The target as a live host's kallsyms shows it: KASLR-slid, names and letters only.
  constexpr uint64_t kSlide = 0x20000000;
  kernel::KernelTarget t;
  t.name = "host";
  t.kind = "live";
  t.source = "fixture";
  t.build_id = elf->build_id;
  std::map<std::string, uint64_t> addr_of;
  for (const auto& s : elf->symbols) {
    if (s.section == "*ABS*") continue;
    addr_of[s.name] = s.value;
    t.symbols.push_back({.name = s.name, .addr = s.value + kSlide, .type = s.type});
  }
  ASSERT_TRUE(addr_of.count("_sinittext") && addr_of.count("_end"));
  t.text_addr = addr_of["_sinittext"] + kSlide;
  kernel::DeriveSizesAndDedupe(t);

  indexer::Part vmlinux{.module = -1};
  vmlinux.record.build_id = elf->build_id->ToHex();
  vmlinux.record.debug_file_id = 1;
  vmlinux.record.path = d / "vmlinux";
  vmlinux.debug_text_addr = addr_of["_sinittext"];
  std::vector<indexer::Part> parts;
  parts.push_back(std::move(vmlinux));
  indexer::AttachElfFacts(t, parts, 2);
  auto facts_of = [&](const std::string& name) -> std::optional<uint8_t> {
    for (const auto& s : t.symbols) {
      if (s.name == name) return s.elf_facts;
    }
    return std::nullopt;
  };
  EXPECT_EQ(facts_of("_sinittext"), kLabel);
  EXPECT_EQ(facts_of("early_idt_handler_array"), kSizedLabel);
  EXPECT_EQ(facts_of("__do_sys_ni_syscall"), kFunc);
  EXPECT_EQ(facts_of("ftrace_ops_list_func"), kElfFunction);

  auto db = OpenIndex(d / "i.db", IndexUse::kCreate);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(ReplaceTarget(*db, t, 1).ok());
  auto info = FindTarget(*db, "host");
  ASSERT_TRUE(info.ok() && info->has_value());
  auto table = LoadTextSymbolTable(*db, (*info)->id);
  ASSERT_TRUE(table.ok()) << table.status();
  const std::pair<const char*, const char*> cases[] = {
      {"_sinittext", "early_idt_handler_array"},
      {"__irqentry_text_end", "common_interrupt_return"},
      {"__do_sys_ni_syscall", "__x64_sys_ni_syscall"},
      {"ftrace_ops_list_func", "arch_ftrace_ops_list_func"},
      {"memmove", "__memmove"},
  };
  for (const auto& [at, want] : cases) {
    for (uint64_t off : {0, 1}) {
      const uint64_t addr = addr_of.at(at) + kSlide + off;
      SCOPED_TRACE(fmt::format("{}+{} (0x{:x})", at, off, addr));
      auto single = SymbolContaining(*db, (*info)->id, addr);
      ASSERT_TRUE(single.ok()) << single.status();
      ASSERT_TRUE(single->symbol.has_value()) << single->why;
      EXPECT_EQ(single->symbol->name, want);
      EXPECT_TRUE(single->symbol->elf_facts.has_value());
      Containment batch = (*table)->Containing(addr);
      ASSERT_TRUE(batch.symbol.has_value()) << batch.why;
      EXPECT_EQ(batch.symbol->name, want);
    }
  }

  // A debug file of another build: its facts are not this kernel's.
  for (auto& s : t.symbols) s.elf_facts.reset();
  parts[0].record.build_id = std::string(40, '0');
  indexer::AttachElfFacts(t, parts, 1);
  EXPECT_EQ(facts_of("early_idt_handler_array"), std::nullopt);
}

// A loaded module: its kallsyms addresses are matched to the debug .ko's (section, offset)
// through /sys/module/M/sections; an offline module's symbols carry the facts of their own .ko.
TEST(AliasRankTest, ALoadedModulesSymbolsGetTheirDebugFilesFacts) {
  TempDir d;
  symdex::testing::CompileObject(R"(
__asm__(".text\n.globl mod_label\nmod_label:\n"
        ".globl mod_asm\nmod_asm:\n nop\n ret\n.size mod_asm, .-mod_asm\n");
__attribute__((noinline, used)) static int mod_impl(int x) { return x * 3; }
int mod_export(int x) __attribute__((alias("mod_impl")));
__asm__(".section .note.gnu.build-id,\"a\",@note\n.long 4\n.long 20\n.long 3\n.asciz \"GNU\"\n"
        ".byte 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20\n.previous\n");
)",
                                 d / "mod.ko");
  auto elf = debuginfo::ReadSymtabFile(d / "mod.ko");
  ASSERT_TRUE(elf.ok()) << elf.status();
  ASSERT_TRUE(elf->relocatable);
  constexpr uint64_t kBase = 0xffffffffc0100000ull;
  kernel::KernelTarget t;
  t.name = "host";
  t.kind = "live";
  t.modules.push_back(
      {.name = "mod", .build_id = elf->build_id, .text_addr = kBase, .size = 0x1000, .sections = {{".text", kBase}}});
  std::map<std::string, uint64_t> addr_of;
  for (const auto& s : elf->symbols) {
    if (s.section != ".text") continue;
    addr_of[s.name] = kBase + s.value;
    t.symbols.push_back({.name = s.name, .addr = kBase + s.value, .module = 0, .type = s.type});
  }
  ASSERT_EQ(addr_of.size(), 4u);
  indexer::Part mod{.module = 0};
  mod.record.module = "mod";
  mod.record.build_id = elf->build_id->ToHex();
  mod.record.debug_file_id = 1;
  mod.record.path = d / "mod.ko";
  std::vector<indexer::Part> parts;
  parts.push_back(std::move(mod));
  indexer::AttachElfFacts(t, parts, 1);
  std::map<std::string, std::optional<uint8_t>> facts;
  for (const auto& s : t.symbols) facts[s.name] = s.elf_facts;
  EXPECT_EQ(facts["mod_label"], kLabel);
  EXPECT_EQ(facts["mod_asm"], kSizedLabel);
  EXPECT_EQ(facts["mod_impl"], kFunc);
  EXPECT_EQ(facts["mod_export"], kFunc);

  std::vector<AliasFacts> at_asm, at_impl;
  for (const auto& s : t.symbols) {
    auto& group = s.addr == addr_of["mod_asm"] ? at_asm : at_impl;
    group.push_back({s.name, s.type, s.elf_facts});
  }
  EXPECT_EQ(Best(at_asm), "mod_asm");
  EXPECT_EQ(Best(at_impl), "mod_export");
}

}  // namespace
}  // namespace symdex::store
