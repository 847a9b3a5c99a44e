// Fuzzes ReadLineTable (.debug_line of debug files from anywhere: debuginfod, a fleet's uploads).
// Input: one byte of address size, a u32 length and that many bytes of .debug_line_str (also
// used as .debug_str), then .debug_line; the table at offset 0 is read. Any bytes give a table
// or an error; a table keeps the order and the references its users rely on.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "server/debuginfo/dwarf/line_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const unsigned address_size = (data[0] & 1) ? 8 : 4;
  uint32_t str_len = 0;
  std::memcpy(&str_len, data + 1, 4);
  std::string_view rest(reinterpret_cast<const char*>(data + 5), size - 5);
  if (str_len > rest.size()) str_len = static_cast<uint32_t>(rest.size());
  symdex::debuginfo::LineSections s;
  s.debug_line_str = rest.substr(0, str_len);
  s.debug_str = s.debug_line_str;
  s.debug_line = rest.substr(str_len);
  auto t = symdex::debuginfo::ReadLineTable(s, 0, (data[0] & 2) ? "/comp" : nullptr, address_size);
  if (!t.ok()) return 0;
  if (t->files.empty()) __builtin_trap();  // at least libdw's entry 0
  for (size_t i = 0; i < t->rows.size(); ++i) {
    const auto& r = t->rows[i];
    if (i > 0) {
      const auto& p = t->rows[i - 1];
      // End rows first at one address — except the last row, which libdw marks as an end afterwards.
      const bool last = i + 1 == t->rows.size();
      if (p.addr > r.addr || (!last && p.addr == r.addr && !p.end_sequence && r.end_sequence)) __builtin_trap();
    }
    if (auto path = t->FilePath(r.file); path && path->empty() && t->files[r.file].name[0] != 0) __builtin_trap();
    const auto* at = t->RowFor(r.addr);
    if (at != nullptr && (at->addr != r.addr || at->end_sequence)) __builtin_trap();
  }
  if (!t->rows.empty() && !t->rows.back().end_sequence) __builtin_trap();
  return 0;
}
