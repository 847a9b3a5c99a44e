// The one RAII owner of a libelf handle, and libelf's last error as a Status. Every layer that
// opens an ELF image (ingest's symbol and probe-table readers, target's release check,
// debuginfo) uses these; libelf is linked wherever this header is included.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <memory>
#include <string_view>

#include "server/common/status.h"
#include "server/common/strings.h"

namespace symdex {

struct ElfEnd {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfPtr = std::unique_ptr<Elf, ElfEnd>;

// InvalidArgument "WHAT: <libelf's message for its last error>".
inline absl::Status LibelfError(std::string_view what) {
  return absl::InvalidArgumentError(StrCat(what, ": ", elf_errmsg(-1)));
}

}  // namespace symdex
