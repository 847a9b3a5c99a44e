// The one RAII owner of a libelf handle, and libelf's last error as a Status. Every layer that
// opens an ELF image (ingest's symbol and probe-table readers, target's release check,
// debuginfo) uses these; libelf is linked wherever this header is included.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <memory>
#include <mutex>
#include <string_view>

#include "server/common/status.h"
#include "server/common/strings.h"

namespace symdex {

struct ElfEnd {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfPtr = std::unique_ptr<Elf, ElfEnd>;

// libelf's version handshake, once per process, before the first elf_begin.
inline void InitLibelf() {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
}

// InvalidArgument "WHAT: <libelf's message for its last error>".
inline absl::Status LibelfError(std::string_view what) {
  return absl::InvalidArgumentError(StrCat(what, ": ", elf_errmsg(-1)));
}

}  // namespace symdex
