// Decompression of kernel module files (.ko.xz, .ko.zst, .ko.gz), bounded: the output may not
// exceed max_out bytes, whatever the compressed stream claims. Pure: bytes in, bytes out.
#pragma once

#include <string>
#include <string_view>

#include "server/common/status.h"

namespace symdex::ingest {

enum class Compression { kNone, kXz, kZstd, kGzip };

// By magic bytes, not by file name.
Compression DetectCompression(std::string_view data);

absl::StatusOr<std::string> Decompress(std::string_view data, Compression kind, size_t max_out);

// gzip, for what symdex writes in the formats that expect it (pprof profiles).
absl::StatusOr<std::string> GzipCompress(std::string_view data);

}  // namespace symdex::ingest
