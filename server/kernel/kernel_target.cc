#include "server/kernel/kernel_target.h"

#include <algorithm>
#include <numeric>

namespace symdex::kernel {

void ChooseTextAnchor(KernelTarget& t, const std::function<std::optional<uint64_t>(std::string_view)>& symbol_of,
                      bool live) {
  const std::optional<uint64_t> text = symbol_of("_text"), stext = symbol_of("_stext");
  t.text_addr = text;
  if (text && (live || !stext || *stext == *text)) {
    t.text_anchor = "_text";
    t.anchor_addr = text;
  } else if (stext) {
    t.text_anchor = "_stext";
    t.anchor_addr = stext;
  }
}

void DeriveSizesAndDedupe(KernelTarget& t) { DeriveSizesAndDedupe(t.symbols); }

void DeriveSizesAndDedupe(std::vector<SymbolEntry>& syms) {
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
  // In that order each owner's symbols form runs sorted by address, one per section (one run of
  // absolute addresses for vmlinux and a live module). A symbol's extent is the kernel's: up to
  // the next higher address of its run, as kallsyms and a module's symbol lookup measure it (what
  // a stack trace prints as "+0x4/0x50"). In a section of a module file the last symbol's end
  // depends on where the kernel lays out the next section, so it keeps its .symtab size; with
  // absolute addresses it stays unknown. One backward pass (a forward scan from every symbol was
  // quadratic in a run of equal addresses: 9,121 of the Debian vmlinux's .symtab symbols share
  // one address).
  uint64_t above = 0;  // the lowest address above the current one, in this run (0: none)
  for (size_t k = order.size(); k-- > 0;) {
    SymbolEntry& s = syms[order[k]];
    const SymbolEntry* next = k + 1 < order.size() ? &syms[order[k + 1]] : nullptr;
    if (next == nullptr || next->module != s.module || next->section != s.section) {
      above = 0;  // s is the last of its run
    } else if (next->addr > s.addr) {
      above = next->addr;
    }
    if (above != 0) {
      s.size = above - s.addr;
      s.size_exact = false;
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

}  // namespace symdex::kernel
