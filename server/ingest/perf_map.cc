#include "server/ingest/perf_map.h"
#include "server/common/hex.h"

#include <cctype>
#include <iterator>

#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

void SkipBlanks(std::string_view& s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
}

std::string_view NextField(std::string_view& rest) {
  SkipBlanks(rest);
  size_t j = 0;
  while (j < rest.size() && !IsBlank(rest[j])) ++j;
  std::string_view field = rest.substr(0, j);
  rest.remove_prefix(j);
  return field;
}

// perf maps print bare hex; some writers add "0x".
bool ParseHex(std::string_view s, uint64_t& out) {
  auto v = symdex::ParseHex(s, HexPrefix::kOptional);
  if (v) out = *v;
  return v.has_value();
}

// The reason a line is malformed, or empty when it parsed into `entry`.
std::string_view ParseLine(std::string_view line, PerfMapEntry& entry) {
  if (line.find('\0') != std::string_view::npos) return "line contains a NUL byte";
  std::string_view rest = line;
  std::string_view start = NextField(rest);
  std::string_view size = NextField(rest);
  if (!ParseHex(start, entry.start)) return "start address is not 1-16 hex digits";
  if (size.empty()) return "missing size";
  if (!ParseHex(size, entry.size)) return "size is not 1-16 hex digits";
  SkipBlanks(rest);
  if (rest.empty()) return "missing symbol name";
  if (entry.size > 0 && entry.size - 1 > UINT64_MAX - entry.start) {
    return "range wraps past the end of the address space";
  }
  entry.name = std::string(rest);
  return {};
}

}  // namespace

absl::StatusOr<PerfMapParseResult> ParsePerfMap(std::string_view text, std::string_view source,
                                                const PerfMapParseOptions& options) {
  PerfMapParseResult result;
  size_t line_no = options.first_line_number;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos && options.last_line_may_be_partial) {
      result.incomplete_tail = true;
      break;
    }
    size_t end = eol == std::string_view::npos ? text.size() : eol;
    std::string_view line = text.substr(pos, end - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    size_t this_line = line_no++;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

    std::string_view probe = line;
    SkipBlanks(probe);
    if (probe.empty()) continue;

    PerfMapEntry entry;
    entry.line = this_line;
    std::string_view why = ParseLine(line, entry);
    if (why.empty()) {
      result.entries.push_back(std::move(entry));
      continue;
    }
    std::string issue = StrCat(source, ":", this_line, ": ", why, ": '", Excerpt(line), "'");
    if (options.strict) return absl::InvalidArgumentError(issue);
    ++result.malformed_lines;
    if (result.issues.size() < options.max_issues) result.issues.push_back(std::move(issue));
  }
  result.consumed_bytes = pos;
  result.next_line_number = line_no;
  return result;
}

void PerfMap::Add(const std::vector<PerfMapEntry>& entries) {
  for (const auto& e : entries) Add(e);
}

void PerfMap::Add(PerfMapEntry entry) {
  const size_t index = entries_.size();
  const uint64_t first = entry.start;
  const uint64_t size = entry.size;
  entries_.push_back(std::move(entry));
  if (size == 0) return;
  const uint64_t last = first + (size - 1);  // the parser rejects wrapping ranges
  if (last < first) return;                  // ... and so does this, for entries built by hand

  // Paint [first, last] over the existing disjoint segments: trim or split the ones it overlaps.
  auto it = segments_.upper_bound(first);
  if (it != segments_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.last >= first) {
      Segment old = prev->second;
      if (prev->first == first) {
        segments_.erase(prev);
      } else {
        prev->second.last = first - 1;
      }
      if (old.last > last) segments_[last + 1] = Segment{old.last, old.entry};
    }
  }
  it = segments_.lower_bound(first);
  while (it != segments_.end() && it->first <= last) {
    Segment old = it->second;
    it = segments_.erase(it);
    if (old.last > last) {
      segments_[last + 1] = old;
      break;
    }
  }
  segments_[first] = Segment{last, index};
}

std::optional<PerfMapEntry> PerfMap::Lookup(uint64_t addr) const {
  auto it = segments_.upper_bound(addr);
  if (it == segments_.begin()) return std::nullopt;
  --it;
  if (addr > it->second.last) return std::nullopt;
  return entries_[it->second.entry];
}

}  // namespace symdex::ingest
