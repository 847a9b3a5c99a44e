// The build-ID schemes of jitted code, as named in jit_build_ids.scheme (schema/004_jit.sql).
// The IDs themselves are computed at ingest (server/jit/build_ids.h, libcrypto); the store and
// the query layer only name and choose schemes, so they live here, header-only.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace symdex::store {

enum class JitBuildIdScheme {
  kMd5Addr,     // perf <= 6.16 with libcrypto
  kSha1Code,    // perf 6.17
  kSha1Symtab,  // perf with the Nov 2025 sym/str-tables fix
  kSymdex,      // symdex's own, truncated SHA-256 over process instance + code object
};

inline constexpr std::array<JitBuildIdScheme, 4> kAllJitBuildIdSchemes = {
    JitBuildIdScheme::kMd5Addr, JitBuildIdScheme::kSha1Code, JitBuildIdScheme::kSha1Symtab, JitBuildIdScheme::kSymdex};

// "md5-addr", "sha1-code", "sha1-symtab", "symdex".
inline std::string_view JitBuildIdSchemeName(JitBuildIdScheme scheme) {
  switch (scheme) {
    case JitBuildIdScheme::kMd5Addr:
      return "md5-addr";
    case JitBuildIdScheme::kSha1Code:
      return "sha1-code";
    case JitBuildIdScheme::kSha1Symtab:
      return "sha1-symtab";
    case JitBuildIdScheme::kSymdex:
      return "symdex";
  }
  return "?";
}

inline std::optional<JitBuildIdScheme> ParseJitBuildIdScheme(std::string_view name) {
  for (JitBuildIdScheme s : kAllJitBuildIdSchemes) {
    if (JitBuildIdSchemeName(s) == name) return s;
  }
  return std::nullopt;
}

}  // namespace symdex::store
