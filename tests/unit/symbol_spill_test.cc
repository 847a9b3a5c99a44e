// The module symbols an index run keeps in a scratch file (kernel/symbol_spill.h): every field
// comes back as it went in, records are replaced in place or grown, and a spilled target gives
// its symbols back in load order.
#include "server/kernel/symbol_spill.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace symdex::kernel {
namespace {

auto Fields(const SymbolEntry& s) {
  return std::make_tuple(s.name, s.addr, s.size, s.debug_file_id.get(), s.dwarf_function_id.get(), s.src_unit.get(),
                         s.src_file.get(), s.src_line.get(), s.section.str(), s.dwarf_note.str(), s.module, s.probe,
                         s.type, s.size_exact, s.elf_facts);
}

std::vector<SymbolEntry> RandomSymbols(std::mt19937_64& rng, int module, size_t n) {
  std::vector<SymbolEntry> out;
  for (size_t i = 0; i < n; ++i) {
    SymbolEntry s;
    s.name = std::string(1 + rng() % 70, static_cast<char>('a' + rng() % 26)) + std::to_string(i);
    s.addr = rng();
    if (rng() % 2) s.size = rng() % 4096;
    auto id = [&]() -> SymbolEntry::Id {
      return rng() % 3 ? SymbolEntry::Id(static_cast<int64_t>(rng() >> 1) - (int64_t{1} << 62)) : std::nullopt;
    };
    s.debug_file_id = id();
    s.dwarf_function_id = id();
    s.src_unit = id();
    s.src_file = id();
    s.src_line = id();
    if (rng() % 2) s.section = rng() % 2 ? ".text" : ".init.text";
    if (rng() % 3 == 0) s.dwarf_note = "inside a function, +" + std::to_string(rng() % 100) + " from its range start";
    s.module = module;
    s.probe = static_cast<uint32_t>(rng());
    s.type = "tTdDbBrR"[rng() % 8];
    s.size_exact = rng() % 2;
    if (rng() % 2) s.elf_facts = static_cast<uint8_t>(rng());
    out.push_back(std::move(s));
  }
  return out;
}

void ExpectSame(const std::vector<SymbolEntry>& got, const std::vector<SymbolEntry>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(Fields(got[i]), Fields(want[i])) << "#" << i;
}

void RoundTrip(SymbolSpill& spill) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<SymbolEntry>> want;
  for (int m = 0; m < 5; ++m) {
    want.push_back(RandomSymbols(rng, m, m == 2 ? 0 : 50 + rng() % 200));
    ASSERT_TRUE(spill.Put(m, want.back()).ok());
  }
  // Changed in place (same lengths), then grown (longer notes): the other modules stay as they were.
  for (SymbolEntry& s : want[1]) s.probe ^= 0x5a5a;
  ASSERT_TRUE(spill.Put(1, want[1]).ok());
  for (SymbolEntry& s : want[3]) s.dwarf_note = "no DWARF function or line at this address";
  ASSERT_TRUE(spill
                  .Update(3,
                          [](std::vector<SymbolEntry>& syms) {
                            for (SymbolEntry& s : syms) s.dwarf_note = "no DWARF function or line at this address";
                          })
                  .ok());
  size_t total = 0;
  for (int m = 0; m < 5; ++m) {
    auto got = spill.Get(m);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSame(*got, want[static_cast<size_t>(m)]);
    EXPECT_EQ(spill.Count(m), want[static_cast<size_t>(m)].size());
    total += want[static_cast<size_t>(m)].size();
  }
  EXPECT_EQ(spill.total(), total);
  // In brief: each symbol's type, probe bits, name and whether it is joined, in order.
  for (int m = 0; m < 5; ++m) {
    size_t k = 0;
    ASSERT_TRUE(spill
                    .VisitBriefs(m,
                                 [&](const SymbolSpill::Brief& b) {
                                   const SymbolEntry& w = want[static_cast<size_t>(m)].at(k++);
                                   EXPECT_EQ(std::tie(b.type, b.probe, b.name), std::tie(w.type, w.probe, w.name));
                                   EXPECT_EQ(b.joined, w.dwarf_function_id || w.src_line);
                                 })
                    .ok());
    EXPECT_EQ(k, want[static_cast<size_t>(m)].size());
  }
  EXPECT_EQ(spill.Modules(), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_TRUE(spill.Get(9)->empty());
  EXPECT_FALSE(spill.Put(-1, want[0]).ok()) << "vmlinux's symbols stay in memory";
}

TEST(SymbolSpillTest, EveryFieldComesBackInAScratchFile) {
  auto spill = SymbolSpill::Create();
  EXPECT_TRUE(spill->on_disk()) << "no scratch directory takes a file on this machine";
  RoundTrip(*spill);
}

TEST(SymbolSpillTest, EveryFieldComesBackInMemory) {
  auto spill = SymbolSpill::InMemory();
  EXPECT_FALSE(spill->on_disk());
  RoundTrip(*spill);
}

TEST(SymbolSpillTest, ThreadsWorkOnDifferentModulesAtOnce) {
  for (const bool on_disk : {true, false}) {
    std::unique_ptr<SymbolSpill> spill = on_disk ? SymbolSpill::Create() : SymbolSpill::InMemory();
    std::vector<std::vector<SymbolEntry>> want(8);
    std::vector<std::thread> threads;
    for (int m = 0; m < 8; ++m) {
      threads.emplace_back([&, m] {
        std::mt19937_64 rng(static_cast<uint64_t>(m));
        for (int round = 0; round < 20; ++round) {
          auto syms = RandomSymbols(rng, m, 10 + rng() % 100);
          ASSERT_TRUE(spill->Put(m, syms).ok());
          auto got = spill->Get(m);
          ASSERT_TRUE(got.ok());
          ExpectSame(*got, syms);
          want[static_cast<size_t>(m)] = std::move(syms);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int m = 0; m < 8; ++m) ExpectSame(*spill->Get(m), want[static_cast<size_t>(m)]);
  }
}

TEST(SymbolSpillTest, ASpilledTargetGivesItsSymbolsBackInLoadOrder) {
  KernelTarget t;
  t.modules.resize(3);
  std::vector<std::string> order;
  auto add = [&](int module, std::string name) {
    SymbolEntry s;
    s.name = name;
    s.module = module;
    s.type = 't';
    t.symbols.push_back(s);
    order.push_back(std::move(name));
  };
  // Interleaved, as a live kernel's kallsyms may list them: vmlinux, modules, vmlinux again.
  add(-1, "_text");
  add(1, "b1");
  add(1, "b2");
  add(0, "a1");
  add(-1, "_etext");
  add(1, "b3");
  add(2, "c1");
  ASSERT_TRUE(SpillModuleSymbols(t).ok());
  ASSERT_TRUE(t.spill);
  ASSERT_EQ(t.symbols.size(), 2u) << "vmlinux's symbols stay in memory";
  EXPECT_EQ(t.symbols[0].name, "_text");
  EXPECT_EQ(t.symbols[1].name, "_etext");
  EXPECT_EQ(SymbolCount(t), 7u);
  EXPECT_EQ(t.spill->Count(1), 3u);
  EXPECT_EQ(t.spill->Count(0), 1u);
  std::vector<std::string> got;
  ASSERT_TRUE(ForEachSymbol(t, [&](const SymbolEntry& s) {
                got.push_back(s.name);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(got, order);
  // A step changes a module's symbols: the order holds, the change shows.
  ASSERT_TRUE(t.spill->Update(1, [](std::vector<SymbolEntry>& syms) { syms[2].name = "b3.cold"; }).ok());
  got.clear();
  ASSERT_TRUE(ForEachSymbol(t, [&](const SymbolEntry& s) {
                got.push_back(s.name);
                return absl::OkStatus();
              }).ok());
  order[5] = "b3.cold";
  EXPECT_EQ(got, order);
  // `finish` changes what ForEachSymbol hands out (the modules'), not what Get reads.
  t.spill->finish = [](std::vector<SymbolEntry>& syms) {
    for (SymbolEntry& s : syms) s.probe = 7;
  };
  std::vector<uint32_t> probes;
  ASSERT_TRUE(ForEachSymbol(t, [&](const SymbolEntry& s) {
                probes.push_back(s.probe);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(probes, (std::vector<uint32_t>{0, 7, 7, 7, 0, 7, 7}));
  EXPECT_EQ(t.spill->Get(1)->front().probe, 0u);
  t.spill->finish = nullptr;
  // Spilling again changes nothing; an error of the visitor ends the visit with it.
  ASSERT_TRUE(SpillModuleSymbols(t).ok());
  size_t seen = 0;
  absl::Status st = ForEachSymbol(
      t, [&](const SymbolEntry&) { return ++seen == 3 ? absl::CancelledError("enough") : absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(seen, 3u);
}

}  // namespace
}  // namespace symdex::kernel
