// Parser for jitdump files (`jit-<pid>.dump`), the format JIT runtimes (V8/Node --perf-prof,
// CPython -X perf_jit, JVM agents) write for `perf inject -j`.
//
// Usage overview
//   One shot:     ParseJitdump(bytes, "jit-123.dump") -> Jitdump {header, records, truncated?}
//   Growing file: JitdumpReader r("jit-123.dump");
//                 loop { data = read file from r.offset() to EOF; r.Feed(data, &records); }
//   Pure: bytes in, records out; no I/O. Every read is bounds-checked against the bytes given, and
//   no size taken from the file is used to allocate or read before it has been checked against
//   the bytes actually present.
//
// Layout (all fields in the writer's byte order; the magic read byte-swapped means the whole file
// is the other endianness):
//   header (total_size bytes, 40 known):
//     u32 magic 0x4A695444 ("JiTD"), u32 version, u32 total_size, u32 elf_mach, u32 pad1,
//     u32 pid, u64 timestamp, u64 flags (bit 0: timestamps are arch cycles, not CLOCK_MONOTONIC)
//     Bytes past the 40 we know (total_size > 40) belong to a newer header and are skipped.
//   records, back to back, each starting with a 16-byte prefix:
//     u32 id, u32 total_size (prefix included), u64 timestamp
//   id 0 CODE_LOAD       u32 pid, u32 tid, u64 vma, u64 code_addr, u64 code_size, u64 code_index,
//                        name\0, code. The code is the LAST code_size bytes of the record (perf's
//                        rule in jit_repipe_code_load), so padding between name and code is legal.
//   id 1 CODE_MOVE       u32 pid, u32 tid, u64 vma, u64 old_code_addr, u64 new_code_addr,
//                        u64 code_size, u64 code_index
//   id 2 DEBUG_INFO      u64 code_addr, u64 nr_entry, nr_entry x {u64 addr, u32 line, u32 discrim,
//                        name\0}; name "\xff\0" = same file as the previous entry of this record
//                        (V8's kRepeatedNameMarker). Padding may follow the entries.
//   id 3 CLOSE           (nothing)
//   id 4 UNWINDING_INFO  u64 unwinding_size, u64 eh_frame_hdr_size, u64 mapped_size, then
//                        unwinding_size bytes: .eh_frame followed by .eh_frame_hdr (the last
//                        eh_frame_hdr_size bytes). Padding may follow.
//   other ids            skipped by total_size (reported as UnknownRecord).
// DEBUG_INFO and UNWINDING_INFO describe the NEXT CODE_LOAD and are attached to it (a later one
// of the same kind before that CODE_LOAD replaces the earlier, as in perf).
//
// Truncation vs corruption. A file may still be growing, or its writer may have died mid-record:
// bytes at the end that do not yet form a whole record (fewer than 16 bytes, or fewer than the
// record's total_size) are an incomplete tail, not an error; the records before it are returned
// and the tail's offset is reported so the caller can re-read from there. A record whose own
// sizes contradict each other (total_size < 16, a name with no NUL, code_size larger than the
// record, nr_entry more entries than could fit...) cannot be skipped reliably, so it is an error
// naming the source, the file offset and the field.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/common/status.h"

namespace symdex::ingest {

inline constexpr uint32_t kJitdumpMagic = 0x4A695444;  // "JiTD" read as a u32 by its writer
inline constexpr size_t kJitdumpHeaderSize = 40;       // the part of the header we understand
inline constexpr size_t kJitRecordPrefixSize = 16;
inline constexpr uint64_t kJitdumpFlagArchTimestamp = 1;

enum class JitRecordId : uint32_t {
  kCodeLoad = 0,
  kCodeMove = 1,
  kDebugInfo = 2,
  kClose = 3,
  kUnwindingInfo = 4,
};

struct JitdumpHeader {
  std::endian byte_order = std::endian::little;  // of the file; every field below is converted
  uint32_t version = 0;
  uint32_t total_size = 0;  // header size as written; >= kJitdumpHeaderSize
  uint32_t elf_mach = 0;    // e_machine of the code: 62 = EM_X86_64, 183 = EM_AARCH64
  uint32_t pad1 = 0;
  uint32_t pid = 0;
  uint64_t timestamp = 0;  // when the dump was opened (units depend on the writer)
  uint64_t flags = 0;

  bool arch_timestamps() const { return (flags & kJitdumpFlagArchTimestamp) != 0; }
  bool operator==(const JitdumpHeader&) const = default;
};

// The 16-byte prefix every record has, plus where it sits in the file.
struct RecordPrefix {
  uint64_t file_offset = 0;
  uint32_t id = 0;
  uint32_t total_size = 0;
  uint64_t timestamp = 0;

  bool operator==(const RecordPrefix&) const = default;
};

struct DebugEntry {
  uint64_t addr = 0;  // V8 writes code address + ELF header size (where perf inject puts it)
  uint32_t line = 0;
  uint32_t discrim = 0;        // V8 stores the column here
  std::string file;            // "\xff\0" already resolved to the previous entry's file
  bool repeated_file = false;  // the entry used the "\xff\0" marker

  bool operator==(const DebugEntry&) const = default;
};

struct DebugInfo {
  RecordPrefix prefix;
  uint64_t code_addr = 0;
  std::vector<DebugEntry> entries;

  bool operator==(const DebugInfo&) const = default;
};

struct UnwindingInfo {
  RecordPrefix prefix;
  uint64_t unwinding_size = 0;     // bytes of data: .eh_frame then .eh_frame_hdr
  uint64_t eh_frame_hdr_size = 0;  // the last eh_frame_hdr_size bytes of data
  uint64_t mapped_size = 0;        // how much of it is mapped after the code (0 = none)
  std::string data;

  // The parser guarantees eh_frame_hdr_size <= data.size(); the clamp is for hand-built values.
  std::string_view eh_frame() const { return std::string_view(data).substr(0, data.size() - HdrSize()); }
  std::string_view eh_frame_hdr() const { return std::string_view(data).substr(data.size() - HdrSize()); }
  bool operator==(const UnwindingInfo&) const = default;

 private:
  size_t HdrSize() const {
    return eh_frame_hdr_size < data.size() ? static_cast<size_t>(eh_frame_hdr_size) : data.size();
  }
};

struct CodeLoad {
  RecordPrefix prefix;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t vma = 0;
  uint64_t code_addr = 0;
  uint64_t code_size = 0;   // == code.size()
  uint64_t code_index = 0;  // unique per process; perf inject names the DSO jitted-<pid>-<index>.so
  std::string name;
  std::string code;
  std::optional<DebugInfo> debug_info;          // the DEBUG_INFO record(s) before this load
  std::optional<UnwindingInfo> unwinding_info;  // the UNWINDING_INFO record before this load

  bool operator==(const CodeLoad&) const = default;
};

struct CodeMove {
  RecordPrefix prefix;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t vma = 0;
  uint64_t old_code_addr = 0;
  uint64_t new_code_addr = 0;
  uint64_t code_size = 0;
  uint64_t code_index = 0;

  bool operator==(const CodeMove&) const = default;
};

struct CodeClose {
  RecordPrefix prefix;
  bool operator==(const CodeClose&) const = default;
};

// A record whose id this parser does not know; skipped by its total_size.
struct UnknownRecord {
  RecordPrefix prefix;
  bool operator==(const UnknownRecord&) const = default;
};

// In file order. DEBUG_INFO and UNWINDING_INFO do not appear on their own: they are attached to
// the CODE_LOAD they describe.
using Record = std::variant<CodeLoad, CodeMove, CodeClose, UnknownRecord>;

const RecordPrefix& PrefixOf(const Record& record);
inline uint64_t TimestampOf(const Record& record) { return PrefixOf(record).timestamp; }

// Incremental parser for a file that may still be growing.
class JitdumpReader {
 public:
  // `source` names the file in error messages.
  explicit JitdumpReader(std::string source);

  struct FeedResult {
    size_t records_added = 0;
    // Bytes at the end of `data` that do not form a whole header/record yet. They start at file
    // offset next_offset (== offset() after the call); re-read from there when the file grows.
    uint64_t incomplete_bytes = 0;
    uint64_t next_offset = 0;
  };

  // `data` must be the file's bytes starting at offset() (initially 0) -- typically everything
  // from offset() to the current end of the file. Appends every complete record to *out and
  // advances offset() past them. On a malformed header or record returns an error; the records
  // before it have been appended already and offset() is the bad record's offset.
  absl::StatusOr<FeedResult> Feed(std::string_view data, std::vector<Record>* out);

  // Continues a file read earlier (by another reader, another run): `header` as parsed then, and
  // `offset` the end of a record after which no DEBUG_INFO/UNWINDING_INFO was pending (the end of
  // the last CODE_LOAD/CODE_MOVE/CLOSE taken). The next Feed must start at `offset`.
  void ResumeAt(const JitdumpHeader& header, uint64_t offset, bool closed = false) {
    header_ = header;
    offset_ = offset;
    closed_ = closed;
    pending_debug_.reset();
    pending_unwind_.reset();
  }

  // File offset of the first byte not consumed yet.
  uint64_t offset() const { return offset_; }
  // Set once the whole header has been seen.
  const std::optional<JitdumpHeader>& header() const { return header_; }
  // A CLOSE record has been seen (the writer says it is done).
  bool closed() const { return closed_; }
  // DEBUG_INFO / UNWINDING_INFO records waiting for their CODE_LOAD.
  bool has_pending_attachments() const { return pending_debug_.has_value() || pending_unwind_.has_value(); }

 private:
  std::string source_;
  uint64_t offset_ = 0;
  std::optional<JitdumpHeader> header_;
  std::optional<DebugInfo> pending_debug_;
  std::optional<UnwindingInfo> pending_unwind_;
  bool closed_ = false;
};

struct Jitdump {
  JitdumpHeader header;
  std::vector<Record> records;
  bool closed = false;  // a CLOSE record was seen
  // The file ends inside a record (still being written, or the writer died): the records before
  // it are in `records`; the incomplete one starts at truncated_at and has truncated_bytes bytes.
  bool truncated = false;
  uint64_t truncated_at = 0;
  uint64_t truncated_bytes = 0;
  // DEBUG_INFO / UNWINDING_INFO at the end with no CODE_LOAD after them (dropped).
  bool dangling_attachments = false;
};

// Parses a whole file. Errors: not a jitdump (bad magic), a header shorter than 40 bytes or than
// its own total_size, or a malformed record. Truncation in a record is not an error (see above).
absl::StatusOr<Jitdump> ParseJitdump(std::string_view bytes, std::string_view source);

}  // namespace symdex::ingest
