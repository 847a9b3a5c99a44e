// The one reader of binary data from untrusted bytes (worker replies, ELF notes, ...): every
// read is bounds-checked against the span; the first failure sticks (later reads return zeros
// and do not move), so a parser may read a whole record and check ok() once.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "server/common/strings.h"

namespace symdex {

class ByteReader {
 public:
  explicit ByteReader(std::string_view in, std::endian order = std::endian::little) : in_(in), order_(order) {}

  // An unsigned or signed integer of sizeof(T) bytes in the reader's byte order.
  template <typename T>
  T Int() {
    static_assert(std::is_integral_v<T>);
    if (!Have(sizeof(T))) return Fail<T>("truncated");
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      const size_t k = order_ == std::endian::little ? i : sizeof(T) - 1 - i;
      v |= uint64_t{static_cast<unsigned char>(in_[pos_ + i])} << (8 * k);
    }
    pos_ += sizeof(T);
    return static_cast<T>(v);
  }

  // A trivially copyable struct as laid out in memory (host byte order and padding).
  template <typename T>
  T Struct() {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!Have(sizeof(T))) return Fail<T>("truncated");
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // The next `n` bytes (a view into the input).
  std::string_view Bytes(size_t n) {
    if (!Have(n)) return Fail<std::string_view>("truncated");
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void Skip(size_t n) { Bytes(n); }

  // A u32 length, then that many bytes; the length may not exceed `max`.
  std::string Str(size_t max) {
    const uint32_t n = Int<uint32_t>();
    if (!ok_) return {};
    if (n > max || !Have(n)) return Fail<std::string>("string length out of bounds");
    return std::string(Bytes(n));
  }

  // A u32 count of elements each at least `min_size` bytes long: never more than the bytes
  // left could hold, so a caller may reserve() it.
  size_t Count(size_t min_size) {
    const uint32_t n = Int<uint32_t>();
    if (ok_ && static_cast<uint64_t>(n) * min_size > remaining()) return Fail<size_t>("count out of bounds");
    return ok_ ? n : 0;
  }

  bool ok() const { return ok_; }
  bool done() const { return pos_ == in_.size(); }
  size_t pos() const { return pos_; }
  size_t remaining() const { return in_.size() - pos_; }
  const std::string& error() const { return error_; }

  // Marks the input bad (first reason wins) and returns T{}: for checks the caller makes on
  // what it read.
  template <typename T = bool>
  T Fail(std::string_view why) {
    if (ok_) error_ = StrCat(why, " at byte ", pos_);
    ok_ = false;
    return T{};
  }

 private:
  bool Have(size_t n) const { return ok_ && n <= in_.size() - pos_; }

  std::string_view in_;
  std::endian order_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

}  // namespace symdex
