// An immutable string that many records share: 8 bytes in the record (a pointer to one
// reference-counted copy) against std::string's 32. For the fields of a kernel's symbols that
// take one of a few values over hundreds of thousands of rows: a module symbol's section name
// (.text, .init.text, ...) and the DWARF join's note. The copy is freed with its last user: a
// long-running daemon keeps nothing of a kernel it indexed once.
//
// Made from a string, it reuses a copy the same thread made recently (a small per-thread
// table of recent values, bounded: at most kRecent copies stay alive because of it), so
// that a module's thousands of ".text" become one string without a pool per target.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <compare>
#include <string>
#include <string_view>

namespace symdex {

class SharedText {
 public:
  SharedText() = default;
  SharedText(std::string_view s);                                        // NOLINT: as std::string converts
  SharedText(const std::string& s) : SharedText(std::string_view(s)) {}  // NOLINT
  SharedText(const char* s) : SharedText(std::string_view(s)) {}         // NOLINT
  SharedText(const SharedText& o) : node_(o.node_) { Ref(); }
  SharedText(SharedText&& o) noexcept : node_(o.node_) { o.node_ = nullptr; }
  SharedText& operator=(const SharedText& o) {
    SharedText copy(o);
    std::swap(node_, copy.node_);
    return *this;
  }
  SharedText& operator=(SharedText&& o) noexcept {
    std::swap(node_, o.node_);
    return *this;
  }
  ~SharedText() { Unref(); }

  const std::string& str() const { return node_ ? node_->text : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT: reads as the string it holds
  bool empty() const { return node_ == nullptr; }
  size_t size() const { return str().size(); }
  const char* c_str() const { return str().c_str(); }

  friend bool operator==(const SharedText& a, const SharedText& b) { return a.node_ == b.node_ || a.str() == b.str(); }
  friend bool operator==(const SharedText& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const SharedText& a, const char* b) { return a.str() == b; }
  friend bool operator==(const SharedText& a, const std::string& b) { return a.str() == b; }
  friend std::strong_ordering operator<=>(const SharedText& a, const SharedText& b) {
    return a.str().compare(b.str()) <=> 0;
  }

 private:
  struct Node {
    std::atomic<uint32_t> refs{1};
    std::string text;
  };
  static constexpr size_t kRecent = 16;
  static const std::string& Empty();
  void Ref() const {
    if (node_) node_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  void Unref() {
    if (node_ && node_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete node_;
    node_ = nullptr;
  }
  Node* node_ = nullptr;  // nullptr: the empty string
};

}  // namespace symdex

template <>
struct fmt::formatter<symdex::SharedText> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const symdex::SharedText& t, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(t.str()), ctx);
  }
};
