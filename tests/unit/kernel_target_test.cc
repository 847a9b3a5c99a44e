// DeriveSizesAndDedupe against the definition it implements, spelled out the slow way.
#include "server/kernel/kernel_target.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace symdex::kernel {
namespace {

// The definition: every symbol ends at the next higher address among the symbols of its owner
// and section (the kernel's extent, not exact); the last of such a run keeps the size it had;
// exact duplicates (owner, section, address, name, type) go.
std::vector<SymbolEntry> Reference(std::vector<SymbolEntry> in) {
  std::vector<SymbolEntry> out;
  for (size_t i = 0; i < in.size(); ++i) {
    bool dup = false;
    for (size_t j = 0; j < i && !dup; ++j) {
      dup = std::tie(in[j].module, in[j].section, in[j].addr, in[j].name, in[j].type) ==
            std::tie(in[i].module, in[i].section, in[i].addr, in[i].name, in[i].type);
    }
    if (dup) continue;
    SymbolEntry s = in[i];
    std::optional<uint64_t> above;
    for (const auto& n : in) {
      if (n.module == s.module && n.section == s.section && n.addr > s.addr && (!above || n.addr < *above))
        above = n.addr;
    }
    if (above) {
      s.size = *above - s.addr;
      s.size_exact = false;
    }
    out.push_back(s);
  }
  return out;
}

TEST(KernelTargetTest, DerivedSizesAndDedupeMatchTheDefinition) {
  std::mt19937_64 rng(15);
  for (int round = 0; round < 200; ++round) {
    KernelTarget t;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      SymbolEntry s;
      s.name = "f" + std::to_string(rng() % 6);
      s.type = "tTd"[rng() % 3];
      s.addr = 0x1000 + 0x10 * (rng() % 8);  // few addresses: long runs of equal ones
      s.module = static_cast<int>(rng() % 3) - 1;
      if (rng() % 4 == 0) s.section = rng() % 2 ? ".text" : ".init.text";
      if (rng() % 3 == 0) {
        s.size = rng() % 3;  // a known size, 0 included
        s.size_exact = true;
      }
      t.symbols.push_back(s);
    }
    const auto want = Reference(t.symbols);
    DeriveSizesAndDedupe(t);
    ASSERT_EQ(t.symbols.size(), want.size()) << "round " << round;
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& g = t.symbols[i];
      const auto& w = want[i];
      EXPECT_EQ(std::tie(g.name, g.type, g.addr, g.module, g.section),
                std::tie(w.name, w.type, w.addr, w.module, w.section))
          << "round " << round << " #" << i;
      EXPECT_EQ(std::tie(g.size, g.size_exact), std::tie(w.size, w.size_exact))
          << "round " << round << " #" << i << " " << g.name << " at " << g.addr;
    }
  }
}

}  // namespace
}  // namespace symdex::kernel
