// The wire format between the indexer and symdex-debuginfo-worker, the child process that
// parses debug files (untrusted input: a crafted file may crash or hang libdw, so it is read in
// a process of its own with memory and time limits; see worker_client.h).
//
// One request, then its response, repeated over one socketpair (the worker's stdin/stdout):
//   request:  u32 magic (kRequestMagic: index the file; kStreamRequestMagic: index it, handing
//             out parts as they are read; kAddrMapRequestMagic: build its address map;
//             kIndexMapRequestMagic: index it, then build its address map), u32 jobs,
//             u64 memory limit (bytes), u32 CPU limit (s), u32 path length, path
//   response: u32 kResponseMagic, u32 status (0 ok, 1 error, 2 part: more follows), u64 payload
//             length, payload (ok: EncodeDwarfIndex, or the address map's bytes; error: the
//             message; part: EncodeDwarfIndex of the part). A streamed index is zero or more parts
//             and then ok or error; each part and the final ok add to the ones before
//             (AppendDwarfIndex). Index-then-map is the index as its one part (or an error: no
//             index), then ok (the map's bytes) or error (no map; the index stands).
// All integers little-endian. The parent treats the response as untrusted too: its length is
// bounded, every count is checked against the bytes left, every id against its table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "server/common/status.h"
#include "server/debuginfo/dwarf/dwarf_index.h"

namespace symdex::debuginfo {

inline constexpr uint32_t kRequestMagic = 0x51574453;          // "SDWQ"
inline constexpr uint32_t kStreamRequestMagic = 0x53574453;    // "SDWS"
inline constexpr uint32_t kAddrMapRequestMagic = 0x4d574453;   // "SDWM"
inline constexpr uint32_t kIndexMapRequestMagic = 0x42574453;  // "SDWB"
inline constexpr uint32_t kResponseMagic = 0x52574453;         // "SDWR"
inline constexpr size_t kRequestHeaderSize = 24;
inline constexpr size_t kResponseHeaderSize = 16;
inline constexpr uint32_t kMaxPathLength = 4096;
// Far above what the largest vmlinux yields (~20 MB for 6.1's 590 MB debug vmlinux). A streamed
// index's parts and final answer count together.
inline constexpr uint64_t kMaxResponsePayload = uint64_t{1} << 30;

struct WorkerRequest {
  enum class Kind { kIndex, kIndexStream, kAddrMap, kIndexThenMap };
  Kind kind = Kind::kIndex;
  std::string path;
  uint32_t jobs = 1;
  uint64_t memory_limit = 0;  // RLIMIT_AS for this file; 0 = none
  uint32_t cpu_seconds = 0;   // CPU time this file may use; 0 = none
};

std::string EncodeRequest(const WorkerRequest& r);
// Parses a request whose 24-byte header is `header`; returns the path length still to read.
absl::StatusOr<uint32_t> DecodeRequestHeader(std::string_view header, WorkerRequest& r);

std::string EncodeResponseHeader(bool ok, uint64_t payload_size);
std::string EncodePartHeader(uint64_t payload_size);  // a streamed index's part
struct ResponseHeader {
  bool ok = false;
  bool part = false;  // a part of a streamed index (ok is true): more follows
  uint64_t payload_size = 0;
};
absl::StatusOr<ResponseHeader> DecodeResponseHeader(std::string_view header);

std::string EncodeDwarfIndex(const DwarfIndex& idx);
// Rejects anything malformed: short or trailing bytes, counts beyond the data, ids outside
// their tables, names longer than 64 KiB.
absl::StatusOr<DwarfIndex> DecodeDwarfIndex(std::string_view bytes);
// Decodes the encoding of a part of an index and appends it to `into`, the parts before it: its
// files, units, functions, variables, symbol lines and sections after theirs, its ids checked
// against the tables as they are after it; build-ID and kind are the part's. All or nothing:
// on an error `into` is as it was. DecodeDwarfIndex is this onto an empty index.
absl::Status AppendDwarfIndex(std::string_view bytes, DwarfIndex& into);

}  // namespace symdex::debuginfo
