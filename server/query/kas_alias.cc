#include "server/query/kas_alias.h"

#include <string_view>
#include <unordered_map>

#include "server/common/symbol_type.h"
#include "server/ingest/kallsyms.h"

namespace symdex::query {
namespace {

// kas_alias asks objdump for each module symbol's section and skips those whose section name
// contains ".init" or ".exit" anywhere (a substring test, not a prefix one).
bool InModuleInitOrExit(const Instance& in) {
  if (in.module.empty()) return false;
  if (in.init_or_exit) return true;
  std::string_view s = in.section;
  return s.find(".init") != std::string_view::npos || s.find(".exit") != std::string_view::npos;
}

}  // namespace

std::vector<bool> KasAliasCandidates(const std::vector<Instance>& all) {
  // Counted over every type: the name's text copies alone undercount, and a function named like
  // a variable elsewhere (kern_path T + kern_path d) would get no alias.
  std::unordered_map<std::string_view, int> count;
  for (const auto& in : all) {
    if (!ingest::IsPseudoModule(in.module)) ++count[in.name];
  }
  std::vector<bool> out(all.size(), false);
  for (size_t i = 0; i < all.size(); ++i) {
    const Instance& in = all[i];
    out[i] = IsTextSymbolType(in.type) && !ingest::IsPseudoModule(in.module) && count[in.name] > 1 &&
             !IsAliasNoise(in.name) && !InModuleInitOrExit(in);
  }
  return out;
}

}  // namespace symdex::query
