#include "server/debuginfo/worker/worker_protocol.h"

#include <cstring>
#include <iterator>
#include <tuple>

#include "server/common/byte_reader.h"
#include "server/common/strings.h"

namespace symdex::debuginfo {
namespace {

constexpr size_t kMaxString = size_t{1} << 20;

class Writer {
 public:
  template <typename T>
  void Int(T v) {
    for (size_t i = 0; i < sizeof(T); ++i)
      out_.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
  }
  void Str(std::string_view s) {
    Int(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  // Each of `v` in turn, as Int of its own type.
  template <typename... T>
  void Ints(const T&... v) {
    (Int(v), ...);
  }
  // A list: its count, then each element as `each` writes it.
  template <typename V, typename Fn>
  void List(const V& v, Fn&& each) {
    Int(static_cast<uint32_t>(v.size()));
    for (const auto& e : v) each(e);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Each record's fixed-width fields in their order on the pipe: one list, which the writer and the
// reader both walk (each field as wide as its member).
template <class R>
auto RangeFields(R& r) {
  return std::tie(r.lo, r.hi, r.section);
}
template <class F>
auto FunctionEntryFields(F& f) {
  return std::tie(f.entry, f.entry_section);
}
template <class F>
auto FunctionPlaceFields(F& f) {
  return std::tie(f.cu, f.decl_file, f.decl_line, f.entry_file, f.entry_line);
}
template <class V>
auto VariableFields(V& v) {
  return std::tie(v.addr, v.section, v.cu, v.decl_file, v.decl_line, v.external);
}
template <class L>
auto SymbolLineFields(L& l) {
  return std::tie(l.addr, l.section, l.cu, l.file, l.line);
}
template <class Tuple>
void Write(Writer& w, const Tuple& fields) {
  std::apply([&](const auto&... v) { w.Ints(v...); }, fields);
}
template <class Tuple>
void Read(ByteReader& rd, Tuple fields) {
  std::apply([&](auto&... v) { rd.Ints(v...); }, fields);
}

}  // namespace

std::string EncodeRequest(const WorkerRequest& r) {
  Writer w;
  w.Int(r.kind == WorkerRequest::Kind::kAddrMap        ? kAddrMapRequestMagic
        : r.kind == WorkerRequest::Kind::kIndexStream  ? kStreamRequestMagic
        : r.kind == WorkerRequest::Kind::kIndexThenMap ? kIndexMapRequestMagic
                                                       : kRequestMagic);
  w.Int(r.jobs);
  w.Int(r.memory_limit);
  w.Int(r.cpu_seconds);
  w.Str(r.path);
  return w.Take();
}

absl::StatusOr<uint32_t> DecodeRequestHeader(std::string_view header, WorkerRequest& r) {
  ByteReader rd(header.substr(0, kRequestHeaderSize));
  const uint32_t magic = rd.Int<uint32_t>();
  if (magic != kRequestMagic && magic != kStreamRequestMagic && magic != kAddrMapRequestMagic &&
      magic != kIndexMapRequestMagic) {
    return absl::InvalidArgumentError("bad request magic");
  }
  r.kind = magic == kAddrMapRequestMagic    ? WorkerRequest::Kind::kAddrMap
           : magic == kStreamRequestMagic   ? WorkerRequest::Kind::kIndexStream
           : magic == kIndexMapRequestMagic ? WorkerRequest::Kind::kIndexThenMap
                                            : WorkerRequest::Kind::kIndex;
  r.jobs = rd.Int<uint32_t>();
  r.memory_limit = rd.Int<uint64_t>();
  r.cpu_seconds = rd.Int<uint32_t>();
  uint32_t n = rd.Int<uint32_t>();
  if (!rd.ok()) return absl::InvalidArgumentError(StrCat("request: ", rd.error()));
  if (n == 0 || n > kMaxPathLength) return absl::InvalidArgumentError("request: bad path length");
  if (r.jobs == 0 || r.jobs > 1024) return absl::InvalidArgumentError("request: bad job count");
  return n;
}

namespace {
constexpr uint32_t kStatusOk = 0, kStatusError = 1, kStatusPart = 2;

std::string HeaderBytes(uint32_t status, uint64_t payload_size) {
  Writer w;
  w.Int(kResponseMagic);
  w.Int(status);
  w.Int(payload_size);
  return w.Take();
}
}  // namespace

std::string EncodeResponseHeader(bool ok, uint64_t payload_size) {
  return HeaderBytes(ok ? kStatusOk : kStatusError, payload_size);
}

std::string EncodePartHeader(uint64_t payload_size) { return HeaderBytes(kStatusPart, payload_size); }

absl::StatusOr<ResponseHeader> DecodeResponseHeader(std::string_view header) {
  ByteReader rd(header);
  ResponseHeader h;
  uint32_t magic = rd.Int<uint32_t>();
  uint32_t status = rd.Int<uint32_t>();
  h.payload_size = rd.Int<uint64_t>();
  if (!rd.ok() || magic != kResponseMagic || status > kStatusPart)
    return absl::DataLossError("garbage instead of a response header");
  if (h.payload_size > kMaxResponsePayload) {
    return absl::DataLossError(
        StrCat("response of ", h.payload_size, " bytes exceeds the limit of ", kMaxResponsePayload));
  }
  h.ok = status != kStatusError;
  h.part = status == kStatusPart;
  return h;
}

std::string EncodeDwarfIndex(const DwarfIndex& idx) {
  Writer w;
  w.Int(uint8_t{idx.build_id.has_value()});
  w.Str(idx.build_id ? idx.build_id->raw() : "");
  w.Int(uint8_t{idx.relocatable});
  w.Str(idx.reader);
  w.List(idx.sections, [&](const std::string& s) { w.Str(s); });
  w.Int(static_cast<uint32_t>(idx.files.size()));
  for (size_t i = 0; i < idx.files.size(); ++i) {
    w.Str(idx.files[i]);
    w.Str(i < idx.raw_files.size() ? idx.raw_files[i] : "");
  }
  w.List(idx.units, [&](const DwarfUnit& u) {
    w.Str(u.name);
    w.Str(u.raw_name);
    w.Str(u.comp_dir);
    w.Int(u.die_offset);
  });
  w.List(idx.functions, [&](const DwarfFunction& f) {
    w.Str(f.name);
    Write(w, FunctionEntryFields(f));
    w.List(f.ranges, [&](const AddrRange& r) { Write(w, RangeFields(r)); });
    Write(w, FunctionPlaceFields(f));
    w.Int(uint8_t((f.external ? 1 : 0) | (f.inline_copy ? 2 : 0)));
  });
  w.List(idx.variables, [&](const DwarfVariable& v) {
    w.Str(v.name);
    Write(w, VariableFields(v));
  });
  w.List(idx.symbol_lines, [&](const auto& l) { Write(w, SymbolLineFields(l)); });
  return w.Take();
}

namespace {

// Room for `n` more elements in each vector; returns n.
template <typename... V>
size_t ReserveCount(size_t n, V&... v) {
  (v.reserve(v.size() + n), ...);
  return n;
}

}  // namespace

absl::Status AppendDwarfIndex(std::string_view bytes, DwarfIndex& into) {
  ByteReader rd(bytes);
  DwarfIndex idx;  // the part, its ids the whole index's
  bool has_id = rd.Int<uint8_t>() != 0;
  std::string id = rd.Str(kMaxString);
  if (has_id) {
    if (id.empty() || id.size() > 64) return absl::DataLossError("worker response: bad build-ID");
    idx.build_id = BuildId::FromRaw(id);
  }
  idx.relocatable = rd.Int<uint8_t>() != 0;
  idx.reader = rd.Str(kMaxString);
  for (size_t n = rd.Count(4); n-- > 0 && rd.ok();) idx.sections.push_back(rd.Str(kMaxString));
  // Counts are bounded by the bytes left (Count), so reserving them is bounded by the payload.
  for (size_t n = ReserveCount(rd.Count(8), idx.files, idx.raw_files); n-- > 0 && rd.ok();) {
    idx.files.push_back(rd.Str(kMaxString));
    idx.raw_files.push_back(rd.Str(kMaxString));
  }
  for (size_t n = ReserveCount(rd.Count(20), idx.units); n-- > 0 && rd.ok();) {
    DwarfUnit u;
    u.name = rd.Str(kMaxString);
    u.raw_name = rd.Str(kMaxString);
    u.comp_dir = rd.Str(kMaxString);
    u.die_offset = rd.Int<uint64_t>();
    idx.units.push_back(std::move(u));
  }
  const size_t nfiles = into.files.size() + idx.files.size(), nunits = into.units.size() + idx.units.size(),
               nsections = into.sections.size() + idx.sections.size();
  auto file_ok = [&](uint32_t f) { return f == kNoFile || f < nfiles; };
  auto section_ok = [&](uint16_t s) { return s == kNoSection || s < nsections; };
  for (size_t n = ReserveCount(rd.Count(4 + 8 + 2 + 4 + 21), idx.functions); n-- > 0 && rd.ok();) {
    DwarfFunction f;
    f.name = rd.Str(kMaxString);
    Read(rd, FunctionEntryFields(f));
    for (size_t m = ReserveCount(rd.Count(18), f.ranges); m-- > 0 && rd.ok();) {
      AddrRange r;
      Read(rd, RangeFields(r));
      if (rd.ok() && (r.hi < r.lo || !section_ok(r.section))) {
        return absl::DataLossError(StrCat("worker response: bad range at byte ", rd.pos()));
      }
      f.ranges.push_back(r);
    }
    Read(rd, FunctionPlaceFields(f));
    uint8_t flags = rd.Int<uint8_t>();
    f.external = flags & 1;
    f.inline_copy = flags & 2;
    if (rd.ok() &&
        (f.cu >= nunits || !file_ok(f.decl_file) || !file_ok(f.entry_file) || !section_ok(f.entry_section))) {
      return absl::DataLossError(StrCat("worker response: function id out of range at byte ", rd.pos()));
    }
    idx.functions.push_back(std::move(f));
  }
  for (size_t n = ReserveCount(rd.Count(4 + 8 + 2 + 12 + 1), idx.variables); n-- > 0 && rd.ok();) {
    DwarfVariable v;
    v.name = rd.Str(kMaxString);
    Read(rd, VariableFields(v));
    if (rd.ok() && (v.cu >= nunits || !file_ok(v.decl_file) || !section_ok(v.section))) {
      return absl::DataLossError(StrCat("worker response: variable id out of range at byte ", rd.pos()));
    }
    idx.variables.push_back(std::move(v));
  }
  for (size_t n = ReserveCount(rd.Count(22), idx.symbol_lines); n-- > 0 && rd.ok();) {
    DwarfSymbolLine l;
    Read(rd, SymbolLineFields(l));
    if (rd.ok() && ((l.cu != UINT32_MAX && l.cu >= nunits) || !file_ok(l.file) || !section_ok(l.section))) {
      return absl::DataLossError(StrCat("worker response: symbol line id out of range at byte ", rd.pos()));
    }
    idx.symbol_lines.push_back(l);
  }
  if (!rd.ok()) return absl::DataLossError(StrCat("worker response: ", rd.error()));
  if (!rd.done()) return absl::DataLossError(StrCat("worker response: trailing bytes at ", rd.pos()));
  if (into.files.empty() && into.units.empty() && into.functions.empty() && into.variables.empty() &&
      into.symbol_lines.empty() && into.sections.empty()) {
    into = std::move(idx);
    return absl::OkStatus();
  }
  auto append = [](auto& to, auto& from) {
    to.reserve(to.size() + from.size());
    std::move(from.begin(), from.end(), std::back_inserter(to));
  };
  into.build_id = idx.build_id;
  into.relocatable = idx.relocatable;
  if (!idx.reader.empty()) into.reader = std::move(idx.reader);  // the parts before the rest have none
  append(into.sections, idx.sections);
  append(into.files, idx.files);
  append(into.raw_files, idx.raw_files);
  append(into.units, idx.units);
  append(into.functions, idx.functions);
  append(into.variables, idx.variables);
  append(into.symbol_lines, idx.symbol_lines);
  return absl::OkStatus();
}

absl::StatusOr<DwarfIndex> DecodeDwarfIndex(std::string_view bytes) {
  DwarfIndex idx;
  RETURN_IF_ERROR(AppendDwarfIndex(bytes, idx));
  return idx;
}

}  // namespace symdex::debuginfo
