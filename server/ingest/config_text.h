// A kernel's .config (/boot/config-R, /proc/config.gz once decompressed): the value of one
// option. Pure: text in, answer out.
#pragma once

#include <optional>
#include <string_view>

namespace symdex::ingest {

// Does `text` look like a kernel config at all (some "CONFIG_" line)?
bool LooksLikeKernelConfig(std::string_view text);

// "CONFIG_X=y" or "=m": true; "# CONFIG_X is not set": false; any other value: true unless
// it is "n"; absent: nullopt (the caller decides: an option this kernel does not have).
std::optional<bool> KernelConfigBool(std::string_view text, std::string_view option);

}  // namespace symdex::ingest
