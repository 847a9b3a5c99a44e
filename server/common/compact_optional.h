// An optional integer in the space of the integer: one value, which the field never holds, says
// "none". For fields of records the indexer keeps by the hundred thousand (a kernel's symbols):
// std::optional<int64_t> is 16 bytes, this is 8.
#pragma once

#include <optional>

namespace symdex {

template <class T, T kNone>
class CompactOptional {
 public:
  constexpr CompactOptional() = default;
  constexpr CompactOptional(std::nullopt_t) {}                                  // NOLINT: as std::optional converts
  constexpr CompactOptional(T v) : v_(v) {}                                     // NOLINT: as std::optional converts
  constexpr CompactOptional(const std::optional<T>& v) : v_(v ? *v : kNone) {}  // NOLINT

  constexpr bool has_value() const { return v_ != kNone; }
  constexpr explicit operator bool() const { return has_value(); }
  constexpr const T& operator*() const { return v_; }
  constexpr T value_or(T other) const { return has_value() ? v_ : other; }
  constexpr std::optional<T> get() const { return has_value() ? std::optional<T>(v_) : std::nullopt; }
  constexpr bool operator==(const CompactOptional&) const = default;

 private:
  T v_ = kNone;
};

}  // namespace symdex
