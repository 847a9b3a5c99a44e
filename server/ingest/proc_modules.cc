#include "server/ingest/proc_modules.h"

#include <charconv>

#include "server/common/hex.h"
#include "server/common/strings.h"

namespace symdex::ingest {

absl::StatusOr<std::vector<ProcModule>> ParseProcModules(std::string_view text, std::string_view source) {
  std::vector<ProcModule> out;
  size_t line_no = 0;
  for (std::string_view line : Split(text, '\n', false)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::string_view> f = Split(line, ' ', true);
    if (f.empty()) continue;
    auto fail = [&](std::string_view why) {
      return absl::InvalidArgumentError(StrCat(source, ":", line_no, ": ", why));
    };
    if (f.size() < 6) return fail("expected at least 6 fields: NAME SIZE REFS DEPS STATE ADDR");
    ProcModule m;
    m.name = std::string(f[0]);
    auto sz = std::from_chars(f[1].data(), f[1].data() + f[1].size(), m.size);
    if (sz.ec != std::errc() || sz.ptr != f[1].data() + f[1].size()) return fail("bad size");
    if (f[3] != "-") {
      for (std::string_view d : Split(f[3], ',', true)) {
        m.deps.emplace_back(d);
      }
    }
    m.state = std::string(f[4]);
    auto addr = ParseHex(f[5]);
    if (!addr) return fail("bad load address");
    m.addr = *addr;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace symdex::ingest
