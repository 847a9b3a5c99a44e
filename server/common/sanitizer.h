#pragma once
// SYMDEX_ASAN: 1 in an AddressSanitizer build, whichever compiler (gcc defines
// __SANITIZE_ADDRESS__; clang 14 answers __has_feature(address_sanitizer) only).
#if defined(__SANITIZE_ADDRESS__)
#define SYMDEX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYMDEX_ASAN 1
#endif
#endif
#ifndef SYMDEX_ASAN
#define SYMDEX_ASAN 0
#endif

namespace symdex {
inline constexpr bool kAddressSanitizer = SYMDEX_ASAN != 0;
}  // namespace symdex
