// The readers of binary data from untrusted bytes, one family: every read is bounds-checked; the
// first failure sticks (later reads return zeros and do not move), so a parser may read a whole
// record and check ok() once.
//   DecodeUleb / DecodeSleb  LEB128 (DWARF) and protobuf varints: at most 10 bytes, ending
//                            before the end; the one decoder of them (AppendUleb / AppendSleb
//                            write them)
//   ByteReader               over a string_view, either byte order, with what went wrong and
//                            where (worker replies, ELF notes, jitdump records, pprof fields)
//   DwarfCursor              the hot loops' reader (DWARF line programs): raw pointers, little
//                            endian, no message — the parser that owns it says what failed
//   LoadLittle               one fixed-width little-endian value whose bytes the caller has
//                            bounds-checked (an instruction's operand, a table entry, a DWARF
//                            form's length): the one place such bytes are put together
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "server/common/strings.h"

namespace symdex {

enum class Leb : uint8_t {
  kOk,
  kTruncated,  // the input ends inside it
  kTooLong,    // more than 10 bytes
};

// The little-endian value of sizeof(T) bytes at p, which the caller has checked are there.
template <typename T>
T LoadLittle(const uint8_t* p) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  U v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof v);
  } else {
    for (size_t i = 0; i < sizeof v; ++i) v = static_cast<U>(v | static_cast<U>(U{p[i]} << (8 * i)));
  }
  return static_cast<T>(v);
}
// The little-endian value of `n` (1..8) bytes at p, which the caller has checked are there.
inline uint64_t LoadLittle(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, n);
  } else {
    for (size_t i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  }
  return v;
}

// An unsigned LEB128 at p (moved past what was read); v holds the bits read so far on failure.
inline Leb DecodeUleb(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p >= end) return Leb::kTruncated;
    const uint8_t b = *p++;
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return Leb::kOk;
  }
  return Leb::kTooLong;
}

// A signed LEB128 at p, sign-extended from its last byte.
inline Leb DecodeSleb(const uint8_t*& p, const uint8_t* end, int64_t& v) {
  uint64_t u = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p >= end) return Leb::kTruncated;
    const uint8_t b = *p++;
    u |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      shift += 7;
      if (shift < 64 && (b & 0x40)) u |= ~uint64_t{0} << shift;
      v = static_cast<int64_t>(u);
      return Leb::kOk;
    }
  }
  return Leb::kTooLong;
}

// The same, true when it is well formed: for parsers that say themselves what failed.
inline bool ReadUleb(const uint8_t*& p, const uint8_t* end, uint64_t& v) { return DecodeUleb(p, end, v) == Leb::kOk; }
inline bool ReadSleb(const uint8_t*& p, const uint8_t* end, int64_t& v) { return DecodeSleb(p, end, v) == Leb::kOk; }

// The length of the LEB128 at p as libdw steps over one (up to 16 bytes), 0 when it does not end
// before `end`; DecodeUleb over those bytes reads its value (the first 10 bytes' bits).
inline size_t LebLength(const uint8_t* p, const uint8_t* end) {
  for (size_t n = 0; p + n < end && n < 16; ++n) {
    if ((p[n] & 0x80) == 0) return n + 1;
  }
  return 0;
}

// LEB128 / a varint appended to `out` (what DecodeUleb / DecodeSleb read back).
inline void AppendUleb(std::string& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    if (v) b |= 0x80;
    out.push_back(static_cast<char>(b));
  } while (v);
}
inline void AppendSleb(std::string& out, int64_t v) {
  bool more = true;
  while (more) {
    uint8_t b = v & 0x7f;
    v >>= 7;  // arithmetic shift
    if ((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40))) {
      more = false;
    } else {
      b |= 0x80;
    }
    out.push_back(static_cast<char>(b));
  }
}

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

  // Each of `v` in turn, as Int of its own type (its width is the field's on disk): a record's
  // fixed fields, read in their order.
  template <typename... T>
  void Ints(T&... v) {
    ((v = Int<T>()), ...);
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

  // A NUL-terminated string; the NUL is consumed, not returned. nullopt (and failed) without one.
  std::optional<std::string_view> CString() {
    if (!ok_) return std::nullopt;
    const size_t nul = in_.find('\0', pos_);
    if (nul == std::string_view::npos) return Fail<std::optional<std::string_view>>("unterminated string");
    std::string_view s = in_.substr(pos_, nul - pos_);
    pos_ = nul + 1;
    return s;
  }

  // LEB128 / a protobuf varint (DecodeUleb).
  uint64_t Uleb() {
    if (!ok_) return 0;
    const auto* p = reinterpret_cast<const uint8_t*>(in_.data() + pos_);
    const auto* end = reinterpret_cast<const uint8_t*>(in_.data() + in_.size());
    uint64_t v = 0;
    const Leb r = DecodeUleb(p, end, v);
    if (r != Leb::kOk)
      return Fail<uint64_t>(r == Leb::kTruncated ? "truncated varint" : "a varint longer than 10 bytes");
    pos_ = static_cast<size_t>(reinterpret_cast<const char*>(p) - in_.data());
    return v;
  }

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
  const std::string& error() const { return error_; }    // what went wrong, at which byte
  const std::string& reason() const { return reason_; }  // what went wrong

  // Marks the input bad (first reason wins) and returns T{}: for checks the caller makes on
  // what it read.
  template <typename T = bool>
  T Fail(std::string_view why) {
    if (ok_) {
      reason_ = std::string(why);
      error_ = StrCat(why, " at byte ", pos_);
    }
    ok_ = false;
    return T{};
  }

 private:
  bool Have(size_t n) const { return ok_ && n <= in_.size() - pos_; }

  std::string_view in_;
  std::endian order_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string error_, reason_;
};

// The DWARF hot loops' cursor: little-endian, over [p, end); the first failure sticks and
// reads return zeros from then on (the parser checks ok() where it decides).
class DwarfCursor {
 public:
  DwarfCursor(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}

  bool ok() const { return ok_; }
  const uint8_t* pos() const { return p_; }
  const uint8_t* end() const { return end_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  void set_end(const uint8_t* e) { end_ = e; }

  uint8_t U8() {
    if (p_ >= end_) return Fail();
    return *p_++;
  }
  uint64_t Fixed(size_t n) {  // n in 1..8
    if (left() < n) return Fail();
    const uint64_t v = LoadLittle(p_, n);
    p_ += n;
    return v;
  }
  uint64_t Uleb() {
    uint64_t v = 0;
    return DecodeUleb(p_, end_, v) == Leb::kOk ? v : Fail();
  }
  int64_t Sleb() {
    int64_t v = 0;
    return DecodeSleb(p_, end_, v) == Leb::kOk ? v : static_cast<int64_t>(Fail());
  }
  // A NUL-terminated string inside the cursor's range.
  const char* CStr() {
    const void* nul = p_ < end_ ? std::memchr(p_, 0, left()) : nullptr;
    if (nul == nullptr) return reinterpret_cast<const char*>(Fail());
    const char* s = reinterpret_cast<const char*>(p_);
    p_ = static_cast<const uint8_t*>(nul) + 1;
    return s;
  }
  void Skip(uint64_t n) {
    if (n > left()) {
      Fail();
      return;
    }
    p_ += n;
  }
  uint64_t Fail() {
    ok_ = false;
    p_ = end_;
    return 0;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

}  // namespace symdex
