// Debug files with compressed sections, read as plain ones.
//
// `objcopy --compress-debug-sections=zlib|zstd`, CONFIG_DEBUG_INFO_COMPRESSED_ZLIB/ZSTD and many
// distributions' debug packages store the .debug_* sections SHF_COMPRESSED: an Elf64_Chdr (the
// algorithm and the uncompressed size) before a zlib or zstd stream. libdw 0.188 inflates zlib
// sections into memory when a file is opened (every handle anew, and the DIE scanner and line
// reader cannot read them in place) and cannot read zstd ones at all. symdex decompresses such a
// file once, itself, into a plain copy: an unlinked temporary file holding the original bytes
// and, after them, each compressed section decompressed, its section header pointed there.
// Everything else reads the copy exactly as it reads an uncompressed file — the DIE scanner, the
// line reader, the bounded libdw handles — so the answers are the plain file's.
//
// The copy lives on disk (TMPDIR, else /var/tmp, else /tmp), never in this process's memory: sections are
// streamed through 1 MiB buffers, several at once. Untrusted sizes are bounded: each section's
// declared size and the copy's total are checked against limits before anything is written, and
// a stream that yields more or fewer bytes than its header declares is an error naming the
// section.
#pragma once

#include <cstdint>
#include <string>

#include "server/common/status.h"
#include "server/common/unique_fd.h"

namespace symdex::debuginfo {

struct PlainElfLimits {
  uint64_t max_section = uint64_t{8} << 30;  // one decompressed section
  uint64_t max_total = uint64_t{32} << 30;   // the copy, original bytes included
};

class PlainElf {
 public:
  // `path` itself when no section of it is compressed (or it is not a 64-bit little-endian ELF
  // file: the readers after this one say what they make of it), else the decompressed copy.
  // Errors: a compressed section that cannot be decompressed (unknown algorithm, corrupt or
  // truncated stream, a size over the limits) or no room for the copy; each names the file and
  // the section.
  static absl::StatusOr<PlainElf> Open(const std::string& path, unsigned jobs = 1, const PlainElfLimits& limits = {});

  // The file to read: the original path or /proc/self/fd/N of the copy (this process only,
  // while this object lives).
  const std::string& path() const { return path_; }
  // "" when nothing was compressed, else what was: "zlib", "zstd" or "zlib+zstd".
  const std::string& compression() const { return compression_; }
  uint64_t sections_decompressed() const { return sections_; }
  // DwarfIndex::reader of an index read from path(): `reader`, and what was decompressed.
  std::string ReadBy(const std::string& reader) const;
  // The copy as another process of this user opens it while this object lives
  // (/proc/PID/fd/N): a DWARF worker reads the copy its parent made. The original path when
  // nothing was decompressed.
  std::string SharedPath() const;
  // A message about path() or SharedPath() with the copy's name replaced by the original's.
  absl::Status Explain(const absl::Status& s) const;

 private:
  std::string original_, path_, compression_;
  uint64_t sections_ = 0;
  UniqueFd copy_;
};

}  // namespace symdex::debuginfo
