// A build-ID: the bytes of an NT_GNU_BUILD_ID note (usually 20, SHA-1 sized; perf's md5 era uses
// 16 + 4 zero bytes). Held as raw bytes; shown and stored as lower-case hex.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace symdex {

class BuildId {
 public:
  BuildId() = default;
  static BuildId FromRaw(std::string_view bytes) { return BuildId(std::string(bytes)); }
  // Accepts upper or lower case hex with an even number of digits; nullopt otherwise.
  static std::optional<BuildId> FromHex(std::string_view hex);

  const std::string& raw() const { return raw_; }
  std::string ToHex() const;
  bool empty() const { return raw_.empty(); }
  bool operator==(const BuildId&) const = default;

 private:
  explicit BuildId(std::string raw) : raw_(std::move(raw)) {}
  std::string raw_;
};

}  // namespace symdex
