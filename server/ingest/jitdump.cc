#include "server/ingest/jitdump.h"

#include <cstring>

#include "server/common/byte_reader.h"
#include "server/common/enum_names.h"
#include "server/common/strings.h"

namespace symdex::ingest {
namespace {

// Fixed parts of the record bodies, prefix included (see the layout in jitdump.h).
constexpr size_t kCodeLoadFixed = kJitRecordPrefixSize + 40;
constexpr size_t kCodeMoveFixed = kJitRecordPrefixSize + 48;
constexpr size_t kDebugInfoFixed = kJitRecordPrefixSize + 16;
constexpr size_t kDebugEntryMin = 8 + 4 + 4 + 1;  // addr, line, discrim, empty name's NUL
constexpr size_t kUnwindingFixed = kJitRecordPrefixSize + 24;

constexpr std::array<EnumName<JitRecordId>, 5> kRecordNames = {{
    {JitRecordId::kCodeLoad, "CODE_LOAD"},
    {JitRecordId::kCodeMove, "CODE_MOVE"},
    {JitRecordId::kDebugInfo, "DEBUG_INFO"},
    {JitRecordId::kClose, "CLOSE"},
    {JitRecordId::kUnwindingInfo, "UNWINDING_INFO"},
}};

std::string_view RecordName(uint32_t id) {
  return NameIn(kRecordNames, static_cast<JitRecordId>(id), "unknown record");
}

// What parsing one record produced.
using Parsed = std::variant<std::monostate, CodeLoad, CodeMove, CodeClose, UnknownRecord, DebugInfo, UnwindingInfo>;

class RecordParser {
 public:
  RecordParser(std::string_view source, std::endian order, const RecordPrefix& prefix, std::string_view record)
      : source_(source), order_(order), prefix_(prefix), record_(record) {}

  absl::StatusOr<Parsed> Parse() {
    switch (static_cast<JitRecordId>(prefix_.id)) {
      case JitRecordId::kCodeLoad:
        return ParseCodeLoad();
      case JitRecordId::kCodeMove:
        return ParseCodeMove();
      case JitRecordId::kDebugInfo:
        return ParseDebugInfo();
      case JitRecordId::kClose:
        return Parsed(CodeClose{prefix_});
      case JitRecordId::kUnwindingInfo:
        return ParseUnwindingInfo();
    }
    return Parsed(UnknownRecord{prefix_});
  }

 private:
  absl::Status Error(std::string_view why) const {
    return absl::InvalidArgumentError(StrCat(source_, ": offset ", prefix_.file_offset, ": ", RecordName(prefix_.id),
                                             " record (", record_.size(), " bytes): ", why));
  }

  // The record's body, positioned after the prefix, once the record holds its `fixed`-byte
  // part; `r` gets the prefix.
  template <class R>
  absl::StatusOr<ByteReader> Body(size_t fixed, R& r) const {
    if (record_.size() < fixed) return Error(StrCat("shorter than its ", fixed, "-byte fixed part"));
    r.prefix = prefix_;
    ByteReader c(record_, order_);
    (void)c.Bytes(kJitRecordPrefixSize);
    return c;
  }

  absl::StatusOr<Parsed> ParseCodeLoad() {
    CodeLoad r;
    ASSIGN_OR_RETURN(ByteReader c, Body(kCodeLoadFixed, r));
    c.Ints(r.pid, r.tid, r.vma, r.code_addr, r.code_size, r.code_index);
    std::optional<std::string_view> name = c.CString();
    if (!name) return Error("function name has no terminating NUL");
    // perf takes the code as the last code_size bytes; they must not overlap the name.
    if (r.code_size > c.remaining()) {
      return Error(StrCat("code_size ", r.code_size, " exceeds the ", c.remaining(), " bytes after the name"));
    }
    r.name = std::string(*name);
    r.code = std::string(record_.substr(record_.size() - static_cast<size_t>(r.code_size)));
    return Parsed(std::move(r));
  }

  absl::StatusOr<Parsed> ParseCodeMove() {
    CodeMove r;
    ASSIGN_OR_RETURN(ByteReader c, Body(kCodeMoveFixed, r));
    c.Ints(r.pid, r.tid, r.vma, r.old_code_addr, r.new_code_addr, r.code_size, r.code_index);
    return Parsed(std::move(r));
  }

  absl::StatusOr<Parsed> ParseDebugInfo() {
    DebugInfo r;
    ASSIGN_OR_RETURN(ByteReader c, Body(kDebugInfoFixed, r));
    r.code_addr = c.Int<uint64_t>();
    uint64_t nr_entry = c.Int<uint64_t>();
    // Bound the count by what could fit before trusting it (no multiplication to overflow).
    if (nr_entry > c.remaining() / kDebugEntryMin) {
      return Error(StrCat("nr_entry ", nr_entry, " cannot fit in the ", c.remaining(),
                          " bytes left (an entry takes at least ", kDebugEntryMin, ")"));
    }
    r.entries.reserve(static_cast<size_t>(nr_entry));
    for (uint64_t i = 0; i < nr_entry; ++i) {
      DebugEntry e;
      c.Ints(e.addr, e.line, e.discrim);
      std::optional<std::string_view> file = c.CString();
      if (!c.ok() || !file) {
        return Error(StrCat("entry ", i, " of ", nr_entry, " runs past the end of the record"));
      }
      if (*file == "\xff") {
        // Same file as the previous entry of this record. A marker on the first entry has
        // nothing to refer to; it is kept as an empty file name rather than failing the dump.
        e.repeated_file = true;
        if (!r.entries.empty()) e.file = r.entries.back().file;
      } else {
        e.file = std::string(*file);
      }
      r.entries.push_back(std::move(e));
    }
    return Parsed(std::move(r));
  }

  absl::StatusOr<Parsed> ParseUnwindingInfo() {
    UnwindingInfo r;
    ASSIGN_OR_RETURN(ByteReader c, Body(kUnwindingFixed, r));
    c.Ints(r.unwinding_size, r.eh_frame_hdr_size, r.mapped_size);
    if (r.eh_frame_hdr_size > r.unwinding_size) {
      return Error(StrCat("eh_frame_hdr_size ", r.eh_frame_hdr_size, " exceeds unwinding_size ", r.unwinding_size));
    }
    if (r.unwinding_size > c.remaining()) {
      return Error(StrCat("unwinding_size ", r.unwinding_size, " exceeds the ", c.remaining(), " bytes left"));
    }
    r.data = std::string(c.Bytes(static_cast<size_t>(r.unwinding_size)));
    return Parsed(std::move(r));
  }

  std::string_view source_;
  std::endian order_;
  RecordPrefix prefix_;
  std::string_view record_;
};

}  // namespace

const RecordPrefix& PrefixOf(const Record& record) {
  return std::visit([](const auto& r) -> const RecordPrefix& { return r.prefix; }, record);
}

JitdumpReader::JitdumpReader(std::string source) : source_(std::move(source)) {}

absl::StatusOr<JitdumpReader::FeedResult> JitdumpReader::Feed(std::string_view data, std::vector<Record>* out) {
  FeedResult result;
  size_t pos = 0;  // into data; data[0] is at file offset offset_
  auto finish = [&]() {
    result.incomplete_bytes = data.size() - pos;
    result.next_offset = offset_;
    return result;
  };

  if (!header_) {
    if (data.size() < kJitdumpHeaderSize) return finish();
    JitdumpHeader h;
    if (std::memcmp(data.data(), "DTiJ", 4) == 0) {
      h.byte_order = std::endian::little;
    } else if (std::memcmp(data.data(), "JiTD", 4) == 0) {
      h.byte_order = std::endian::big;
    } else {
      ByteReader m(data, std::endian::little);
      return absl::InvalidArgumentError(
          fmt::format("{}: not a jitdump file: magic is 0x{:08x}, expected 0x{:08x} in either byte order", source_,
                      m.Int<uint32_t>(), kJitdumpMagic));
    }
    ByteReader c(data, h.byte_order);
    (void)c.Int<uint32_t>();  // magic
    c.Ints(h.version, h.total_size, h.elf_mach, h.pad1, h.pid, h.timestamp, h.flags);
    if (h.total_size < kJitdumpHeaderSize) {
      return absl::InvalidArgumentError(StrCat(source_, ": jitdump header total_size ", h.total_size,
                                               " is smaller than the ", kJitdumpHeaderSize, "-byte header"));
    }
    if (data.size() < h.total_size) return finish();  // the rest of a longer header is still coming
    header_ = h;
    pos = h.total_size;
    offset_ += h.total_size;
  }

  const std::endian order = header_->byte_order;
  while (data.size() - pos >= kJitRecordPrefixSize) {
    ByteReader c(data.substr(pos), order);
    RecordPrefix prefix;
    prefix.file_offset = offset_;
    c.Ints(prefix.id, prefix.total_size, prefix.timestamp);
    if (prefix.total_size < kJitRecordPrefixSize) {
      return absl::InvalidArgumentError(StrCat(source_, ": offset ", offset_, ": ", RecordName(prefix.id),
                                               " record total_size ", prefix.total_size, " is smaller than the ",
                                               kJitRecordPrefixSize, "-byte record prefix"));
    }
    if (prefix.total_size > data.size() - pos) break;  // incomplete: the writer is not done
    std::string_view record = data.substr(pos, prefix.total_size);
    ASSIGN_OR_RETURN(Parsed parsed, RecordParser(source_, order, prefix, record).Parse());

    // State changes only after the whole record parsed, so an error leaves the reader at it.
    pos += prefix.total_size;
    offset_ += prefix.total_size;
    if (auto* debug = std::get_if<DebugInfo>(&parsed)) {
      pending_debug_ = std::move(*debug);
      continue;
    }
    if (auto* unwind = std::get_if<UnwindingInfo>(&parsed)) {
      pending_unwind_ = std::move(*unwind);
      continue;
    }
    if (auto* load = std::get_if<CodeLoad>(&parsed)) {
      load->debug_info = std::move(pending_debug_);
      load->unwinding_info = std::move(pending_unwind_);
      pending_debug_.reset();
      pending_unwind_.reset();
      out->push_back(std::move(*load));
    } else if (auto* move = std::get_if<CodeMove>(&parsed)) {
      out->push_back(std::move(*move));
    } else if (auto* close = std::get_if<CodeClose>(&parsed)) {
      closed_ = true;
      out->push_back(std::move(*close));
    } else if (auto* unknown = std::get_if<UnknownRecord>(&parsed)) {
      out->push_back(std::move(*unknown));
    }
    ++result.records_added;
  }
  return finish();
}

absl::StatusOr<Jitdump> ParseJitdump(std::string_view bytes, std::string_view source) {
  JitdumpReader reader{std::string(source)};
  Jitdump dump;
  ASSIGN_OR_RETURN(JitdumpReader::FeedResult fed, reader.Feed(bytes, &dump.records));
  if (!reader.header()) {
    return absl::InvalidArgumentError(
        StrCat(source, ": ", bytes.size(), " bytes is too short for the jitdump header",
               bytes.size() >= kJitdumpHeaderSize ? " (its total_size says it is longer)" : ""));
  }
  dump.header = *reader.header();
  dump.closed = reader.closed();
  dump.truncated = fed.incomplete_bytes > 0;
  dump.truncated_at = fed.next_offset;
  dump.truncated_bytes = fed.incomplete_bytes;
  dump.dangling_attachments = reader.has_pending_attachments();
  return dump;
}

}  // namespace symdex::ingest
