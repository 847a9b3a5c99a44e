#include "server/ingest/config_text.h"

#include "server/common/strings.h"

namespace symdex::ingest {

bool LooksLikeKernelConfig(std::string_view text) {
  for (std::string_view line : Split(text, '\n', true)) {
    line = StripWhitespace(line);
    if (line.starts_with("CONFIG_") || line.starts_with("# CONFIG_")) return true;
  }
  return false;
}

std::optional<bool> KernelConfigBool(std::string_view text, std::string_view option) {
  for (std::string_view line : Split(text, '\n', true)) {
    line = StripWhitespace(line);
    if (line.starts_with("# ")) {
      line.remove_prefix(2);
      if (line.starts_with(option) && line.substr(option.size()) == " is not set") return false;
      continue;
    }
    if (!line.starts_with(option) || line.size() <= option.size() || line[option.size()] != '=') continue;
    std::string_view v = StripWhitespace(line.substr(option.size() + 1));
    return !(v.empty() || v == "n");
  }
  return std::nullopt;
}

}  // namespace symdex::ingest
