// The build-ID schemes of jitted code, as named in jit_build_ids.scheme (schema/004_jit.sql).
// The IDs themselves are computed at ingest (server/jit/build_ids.h, libcrypto); the store and
// the query layer only name and choose schemes, so they live here, below all three, header-only.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "server/common/enum_names.h"

namespace symdex {

enum class JitBuildIdScheme {
  kMd5Addr,     // perf <= 6.16 with libcrypto
  kSha1Code,    // perf 6.17
  kSha1Symtab,  // perf with the Nov 2025 sym/str-tables fix
  kSymdex,      // symdex's own, truncated SHA-256 over process instance + code object
};

inline constexpr std::array<JitBuildIdScheme, 4> kAllJitBuildIdSchemes = {
    JitBuildIdScheme::kMd5Addr, JitBuildIdScheme::kSha1Code, JitBuildIdScheme::kSha1Symtab, JitBuildIdScheme::kSymdex};

inline constexpr std::array<EnumName<JitBuildIdScheme>, 4> kJitBuildIdSchemeNames = {
    {{JitBuildIdScheme::kMd5Addr, "md5-addr"},
     {JitBuildIdScheme::kSha1Code, "sha1-code"},
     {JitBuildIdScheme::kSha1Symtab, "sha1-symtab"},
     {JitBuildIdScheme::kSymdex, "symdex"}}};

inline std::string_view JitBuildIdSchemeName(JitBuildIdScheme scheme) {
  return NameIn(kJitBuildIdSchemeNames, scheme, "?");
}

inline std::optional<JitBuildIdScheme> ParseJitBuildIdScheme(std::string_view name) {
  return ValueIn(kJitBuildIdSchemeNames, name);
}

}  // namespace symdex
