// Decompression of kernel module files (.ko.xz, .ko.zst, .ko.gz), bounded: the output may not
// exceed max_out bytes, whatever the compressed stream claims. Pure: bytes in, bytes out.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "server/common/status.h"

namespace symdex::ingest {

// kZlib: a bare zlib stream (RFC 1950), what an ELF section compressed as ELFCOMPRESS_ZLIB holds
// after its header; never detected from magic bytes.
enum class Compression { kNone, kXz, kZstd, kGzip, kZlib };

// By magic bytes, not by file name.
Compression DetectCompression(std::string_view data);

absl::StatusOr<std::string> Decompress(std::string_view data, Compression kind, size_t max_out);
// The same into `out`, which it replaces, reusing its capacity: a caller that decompresses file
// after file keeps one buffer, whose pages are not faulted in again for each. On an error `out`
// holds no meaningful bytes.
absl::Status DecompressInto(std::string_view data, Compression kind, size_t max_out, std::string& out);

// The same, streamed: the decompressed bytes go to `sink` in pieces of at most 1 MiB as they are
// made, so nothing holds the whole output. Fails when the output would exceed max_out bytes, when
// the stream ends early or is corrupt, or when `sink` fails (its status is returned). Zstd, Gzip
// and Zlib; Xz and None are not streamed (Unimplemented).
absl::Status DecompressStream(std::string_view data, Compression kind, size_t max_out,
                              const std::function<absl::Status(std::string_view)>& sink);

// gzip, for what symdex writes in the formats that expect it (pprof profiles).
absl::StatusOr<std::string> GzipCompress(std::string_view data);

}  // namespace symdex::ingest
