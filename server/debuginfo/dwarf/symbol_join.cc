#include "server/debuginfo/dwarf/symbol_join.h"

#include <algorithm>

namespace symdex::debuginfo {

FunctionLocator::FunctionLocator(std::vector<FunctionSpan> spans) {
  for (auto& s : spans) by_section_[s.section].push_back(std::move(s));
  for (auto& [_, v] : by_section_) {
    std::sort(v.begin(), v.end(),
              [](const FunctionSpan& a, const FunctionSpan& b) { return a.lo != b.lo ? a.lo < b.lo : a.hi > b.hi; });
  }
}

std::optional<FunctionLocator::Hit> FunctionLocator::Find(std::string_view section, uint64_t addr) const {
  auto it = by_section_.find(section);
  if (it == by_section_.end()) return std::nullopt;
  const auto& v = it->second;
  // The last range starting at or before addr; step back over ranges that end before it (a
  // range nested in a larger one can hide the larger one's tail).
  auto pos = std::upper_bound(v.begin(), v.end(), addr, [](uint64_t a, const FunctionSpan& s) { return a < s.lo; });
  for (int steps = 0; pos != v.begin() && steps < 8; ++steps) {
    --pos;
    if (addr < pos->hi) {
      Hit h;
      h.function_id = pos->function_id;
      h.at_entry = pos->entry == addr && pos->entry_section == section;
      h.offset = addr - pos->lo;
      // Prefer an exact entry match among ranges starting at the same address.
      for (auto q = pos; q != v.begin() && (q - 1)->lo == pos->lo;) {
        --q;
        if (q->entry == addr && q->entry_section == section) {
          h.function_id = q->function_id;
          h.at_entry = true;
        }
      }
      return h;
    }
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, uint64_t>> SectionOffset(
    const std::vector<std::pair<std::string, uint64_t>>& sections, uint64_t addr) {
  auto pos = std::upper_bound(sections.begin(), sections.end(), addr,
                              [](uint64_t a, const std::pair<std::string, uint64_t>& s) { return a < s.second; });
  if (pos == sections.begin()) return std::nullopt;
  --pos;
  return std::make_pair(pos->first, addr - pos->second);
}

}  // namespace symdex::debuginfo
