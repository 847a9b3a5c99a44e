#include "server/ingest/pprof_wire.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "server/common/byte_reader.h"
#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

// profile.proto field numbers.
enum ProfileField { kSampleType = 1, kSample = 2, kMapping = 3, kLocation = 4, kFunction = 5, kStringTable = 6 };
enum MappingField { kMapId = 1, kMemStart = 2, kMemLimit = 3, kFileOffset = 4, kFilename = 5, kBuildId = 6 };
constexpr uint32_t kHasFunctions = 7, kHasFilenames = 8, kHasLineNumbers = 9, kHasInlineFrames = 10;
enum LocationField { kLocId = 1, kLocMapping = 2, kLocAddress = 3, kLocLine = 4 };

enum WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  WireType type = kVarint;
  uint64_t value = 0;     // varint / fixed
  std::string_view data;  // length-delimited
  std::string_view raw;   // the whole field as encoded (tag included)
};

// profile.proto's fields, one at a time, read through common/byte_reader.h.
class WireReader {
 public:
  explicit WireReader(std::string_view s) : s_(s), r_(s) {}
  bool done() const { return r_.done(); }
  // false at the end; an error for a malformed field.
  absl::StatusOr<bool> Next(Field& f) {
    if (done()) return false;
    const size_t start = r_.pos();
    ASSIGN_OR_RETURN(uint64_t tag, Varint());
    f.number = static_cast<uint32_t>(tag >> 3);
    if (f.number == 0 || (tag >> 3) > 0x1fffffff) return Bad("a field numbered 0 or out of range");
    f.type = static_cast<WireType>(tag & 7);
    switch (f.type) {
      case kVarint: {
        ASSIGN_OR_RETURN(f.value, Varint());
        break;
      }
      case kFixed64:
      case kFixed32: {
        f.value = f.type == kFixed64 ? r_.Int<uint64_t>() : r_.Int<uint32_t>();
        if (!r_.ok()) return Bad("truncated fixed-width field");
        break;
      }
      case kBytes: {
        ASSIGN_OR_RETURN(uint64_t len, Varint());
        if (len > r_.remaining()) return Bad("a length-delimited field runs past the end (truncated?)");
        f.data = r_.Bytes(static_cast<size_t>(len));
        break;
      }
      default:
        return Bad(StrCat("wire type ", static_cast<int>(f.type), " (groups are not used by profile.proto)"));
    }
    f.raw = s_.substr(start, r_.pos() - start);
    return true;
  }

 private:
  absl::StatusOr<uint64_t> Varint() {
    const uint64_t v = r_.Uleb();
    if (!r_.ok()) return Bad(r_.reason());
    return v;
  }
  static absl::Status Bad(std::string_view what) {
    return absl::InvalidArgumentError(StrCat("not a pprof profile: ", what));
  }
  std::string_view s_;
  ByteReader r_;
};

void PutTag(std::string& out, uint32_t number, WireType t) { AppendUleb(out, (uint64_t{number} << 3) | t); }
void PutUint(std::string& out, uint32_t number, uint64_t v) {
  PutTag(out, number, kVarint);
  AppendUleb(out, v);
}
void PutBytes(std::string& out, uint32_t number, std::string_view b) {
  PutTag(out, number, kBytes);
  AppendUleb(out, b.size());
  out.append(b);
}

absl::Status Limit(size_t n, std::string_view what) {
  if (n > kMaxPprofEntries) {
    return absl::InvalidArgumentError(StrCat("profile has more than ", kMaxPprofEntries, " ", what));
  }
  return absl::OkStatus();
}

// f(field) for each field of `data`, in order: the first error, the reader's or f's, ends it.
template <class F>
absl::Status ForEachField(std::string_view data, F&& f) {
  WireReader r(data);
  Field g;
  while (true) {
    ASSIGN_OR_RETURN(bool more, r.Next(g));
    if (!more) return absl::OkStatus();
    RETURN_IF_ERROR(f(g));
  }
}

// A Mapping message: its numbers, and its filename's and build_id's string indices (resolved
// once the string table is whole: it may come after the mappings).
struct MappingRead {
  PprofMapping m;
  std::optional<uint64_t> filename, build_id;
};
absl::StatusOr<MappingRead> ReadMapping(std::string_view data) {
  MappingRead out;
  RETURN_IF_ERROR(ForEachField(data, [&](const Field& g) {
    if (g.type != kVarint) return absl::OkStatus();
    if (g.number == kMapId) out.m.id = g.value;
    if (g.number == kMemStart) out.m.memory_start = g.value;
    if (g.number == kMemLimit) out.m.memory_limit = g.value;
    if (g.number == kFileOffset) out.m.file_offset = g.value;
    if (g.number == kFilename) out.filename = g.value;
    if (g.number == kBuildId) out.build_id = g.value;
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<PprofLocation> ReadLocation(std::string_view data) {
  PprofLocation l;
  RETURN_IF_ERROR(ForEachField(data, [&](const Field& g) {
    if (g.number == kLocLine && g.type == kBytes) ++l.lines;
    if (g.type != kVarint) return absl::OkStatus();
    if (g.number == kLocId) l.id = g.value;
    if (g.number == kLocMapping) l.mapping_id = g.value;
    if (g.number == kLocAddress) l.address = g.value;
    return absl::OkStatus();
  }));
  return l;
}

// A Function message's id.
absl::StatusOr<uint64_t> FunctionId(std::string_view data) {
  uint64_t id = 0;
  RETURN_IF_ERROR(ForEachField(data, [&](const Field& g) {
    if (g.number == 1 && g.type == kVarint) id = std::max(id, g.value);
    return absl::OkStatus();
  }));
  return id;
}

// A Sample's location ids, leaf first (field 1: varints, or packed runs of them).
absl::StatusOr<std::vector<uint64_t>> ReadStack(std::string_view data) {
  std::vector<uint64_t> ids;
  RETURN_IF_ERROR(ForEachField(data, [&](const Field& g) {
    if (g.number != 1) return absl::OkStatus();
    if (g.type == kVarint) {
      ids.push_back(g.value);
    } else if (g.type == kBytes) {  // packed: a run of varints
      ByteReader packed(g.data);
      while (!packed.done()) {
        const uint64_t v = packed.Uleb();
        if (!packed.ok()) return absl::InvalidArgumentError("not a pprof profile: a truncated packed location_id");
        ids.push_back(v);
      }
    }
    if (ids.size() > kMaxPprofStackDepth) {
      return absl::InvalidArgumentError(
          StrCat("a sample of more than ", kMaxPprofStackDepth, " locations: not a profile symdex reads"));
    }
    return absl::OkStatus();
  }));
  return ids;
}

// The id field (`number`, a varint) of an embedded message; the last one counts, 0 when none.
uint64_t IdOf(std::string_view message, uint32_t number) {
  WireReader r(message);
  Field g;
  uint64_t id = 0;
  while (r.Next(g).value_or(false)) {
    if (g.number == number && g.type == kVarint) id = g.value;
  }
  return id;
}

}  // namespace

absl::StatusOr<PprofProfile> ParsePprof(std::string_view bytes) {
  if (bytes.size() > kMaxPprofBytes) {
    return absl::InvalidArgumentError(StrCat("profile is ", bytes.size(), " bytes; the limit is ", kMaxPprofBytes));
  }
  PprofProfile p;
  std::unordered_map<uint64_t, size_t> loc_index;
  std::vector<std::vector<uint64_t>> stacks;  // sample location ids, resolved after every location is read
  // Each mapping's filename and build_id string indices, resolved after the string table is read.
  std::vector<std::pair<std::optional<uint64_t>, std::optional<uint64_t>>> mapping_strings;
  RETURN_IF_ERROR(ForEachField(bytes, [&](const Field& f) -> absl::Status {
    if (f.type != kBytes) return absl::OkStatus();
    switch (f.number) {
      case kStringTable:
        RETURN_IF_ERROR(Limit(p.strings.size() + 1, "strings"));
        p.strings.emplace_back(f.data);
        break;
      case kMapping: {
        RETURN_IF_ERROR(Limit(p.mappings.size() + 1, "mappings"));
        ASSIGN_OR_RETURN(MappingRead m, ReadMapping(f.data));
        mapping_strings.emplace_back(m.filename, m.build_id);
        p.mappings.push_back(std::move(m.m));
        break;
      }
      case kLocation: {
        RETURN_IF_ERROR(Limit(p.locations.size() + 1, "locations"));
        ASSIGN_OR_RETURN(PprofLocation l, ReadLocation(f.data));
        loc_index[l.id] = p.locations.size();
        p.locations.push_back(l);
        break;
      }
      case kFunction: {
        ASSIGN_OR_RETURN(uint64_t id, FunctionId(f.data));
        p.max_function_id = std::max(p.max_function_id, id);
        break;
      }
      case kSample: {
        RETURN_IF_ERROR(Limit(stacks.size() + 1, "samples"));
        ASSIGN_OR_RETURN(std::vector<uint64_t> ids, ReadStack(f.data));
        stacks.push_back(std::move(ids));
        break;
      }
      default:
        break;
    }
    return absl::OkStatus();
  }));
  // Mapping strings, now that the table is whole.
  auto str = [&](std::optional<uint64_t> i) { return i && *i < p.strings.size() ? p.strings[*i] : std::string(); };
  for (size_t k = 0; k < p.mappings.size(); ++k) {
    p.mappings[k].filename = str(mapping_strings[k].first);
    p.mappings[k].build_id = str(mapping_strings[k].second);
  }
  for (const auto& ids : stacks) {
    for (size_t k = 0; k < ids.size(); ++k) {
      auto it = loc_index.find(ids[k]);
      if (it == loc_index.end()) continue;
      (k == 0 ? p.locations[it->second].leaf : p.locations[it->second].caller) = true;
    }
  }
  p.samples = stacks.size();
  if (p.strings.empty() && !bytes.empty()) {
    return absl::InvalidArgumentError("not a pprof profile: no string table (a profile's first string is \"\")");
  }
  return p;
}

std::string RewritePprof(std::string_view bytes, const PprofProfile& p,
                         const std::map<uint64_t, std::vector<PprofFrame>>& lines,
                         const std::vector<uint64_t>& symbolized_mappings) {
  std::vector<std::string> strings = p.strings;
  std::unordered_map<std::string, uint64_t> string_ids;
  for (size_t i = 0; i < strings.size(); ++i) string_ids.emplace(strings[i], i);
  auto intern = [&](const std::string& s) -> uint64_t {
    auto [it, fresh] = string_ids.emplace(s, strings.size());
    if (fresh) strings.push_back(s);
    return it->second;
  };
  // One Function per (name, system_name, filename, start_line).
  std::map<std::tuple<std::string, std::string, std::string, int64_t>, uint64_t> functions;
  std::string new_functions;
  auto function_id = [&](const PprofFrame& fr) -> uint64_t {
    auto key = std::make_tuple(fr.name, fr.system_name, fr.filename, fr.start_line);
    auto [it, fresh] = functions.emplace(key, p.max_function_id + functions.size() + 1);
    if (fresh) {
      std::string msg;
      PutUint(msg, 1, it->second);
      PutUint(msg, 2, intern(fr.name));
      PutUint(msg, 3, intern(fr.system_name));
      PutUint(msg, 4, intern(fr.filename));
      if (fr.start_line > 0) PutUint(msg, 5, static_cast<uint64_t>(fr.start_line));
      PutBytes(new_functions, kFunction, msg);
    }
    return it->second;
  };
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 2);
  WireReader r(bytes);
  Field f;
  while (r.Next(f).value_or(false)) {
    if (f.type == kBytes && f.number == kStringTable) continue;  // written whole at the end
    if (f.type == kBytes && f.number == kLocation) {
      auto it = lines.find(IdOf(f.data, kLocId));
      if (it != lines.end()) {
        std::string msg;
        WireReader lr(f.data);
        Field g;
        while (lr.Next(g).value_or(false)) {
          if (g.number != kLocLine) msg.append(g.raw);  // id, mapping, address, is_folded: kept
        }
        for (const PprofFrame& fr : it->second) {
          std::string line;
          PutUint(line, 1, function_id(fr));
          PutUint(line, 2, static_cast<uint64_t>(fr.line));
          if (fr.column > 0) PutUint(line, 3, static_cast<uint64_t>(fr.column));
          PutBytes(msg, kLocLine, line);
        }
        PutBytes(out, kLocation, msg);
        continue;
      }
    }
    if (f.type == kBytes && f.number == kMapping) {
      const uint64_t id = IdOf(f.data, kMapId);
      if (std::find(symbolized_mappings.begin(), symbolized_mappings.end(), id) != symbolized_mappings.end()) {
        std::string msg(f.data);  // a repeated scalar field: the last one counts
        for (uint32_t n : {kHasFunctions, kHasFilenames, kHasLineNumbers, kHasInlineFrames}) PutUint(msg, n, 1);
        PutBytes(out, kMapping, msg);
        continue;
      }
    }
    out.append(f.raw);
  }
  out.append(new_functions);
  for (const std::string& s : strings) PutBytes(out, kStringTable, s);
  return out;
}

}  // namespace symdex::ingest
