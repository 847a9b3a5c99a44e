#include "server/target/kernel_target.h"

#include <algorithm>
#include <numeric>

namespace symdex::target {

void DeriveSizesAndDedupe(KernelTarget& t) {
  auto& syms = t.symbols;
  std::vector<size_t> order(syms.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto key = [&](size_t i) {
    const SymbolEntry& s = syms[i];
    return std::tie(s.module, s.section, s.addr, s.name, s.type);
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });

  std::vector<bool> drop(syms.size(), false);
  for (size_t k = 1; k < order.size(); ++k) {
    if (key(order[k]) == key(order[k - 1])) drop[order[k]] = true;
  }
  for (size_t k = 0; k < order.size(); ++k) {
    SymbolEntry& s = syms[order[k]];
    if (s.size || !s.section.empty()) continue;
    for (size_t j = k + 1; j < order.size(); ++j) {
      const SymbolEntry& n = syms[order[j]];
      if (n.module != s.module || !n.section.empty()) break;
      if (n.addr > s.addr) {
        s.size = n.addr - s.addr;
        break;
      }
    }
  }
  size_t w = 0;
  for (size_t i = 0; i < syms.size(); ++i) {
    if (drop[i]) continue;
    if (w != i) syms[w] = std::move(syms[i]);  // a self-move would empty the strings
    ++w;
  }
  syms.resize(w);
}

}  // namespace symdex::target
