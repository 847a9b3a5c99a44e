// Parser for a blob of ELF notes, as found in /sys/kernel/notes,
// /sys/module/M/notes/.note.gnu.build-id, or an SHT_NOTE section.
//
// Each note: u32 namesz, u32 descsz, u32 type, name (namesz bytes, padded to 4),
// desc (descsz bytes, padded to 4); host byte order. NT_GNU_BUILD_ID = 3 with name "GNU\0".
#pragma once

#include <optional>
#include <string_view>

#include "server/common/build_id.h"
#include "server/common/status.h"

namespace symdex::ingest {

// The GNU build-ID in the notes, nullopt when there is none; an error when the blob is
// malformed (a note running past its end).
absl::StatusOr<std::optional<BuildId>> FindGnuBuildId(std::string_view notes);

}  // namespace symdex::ingest
