// An enumeration's names as one table, read both ways: the value's name where it is printed or
// stored, the value a name stands for where it is read back. A name and its parser written from
// one list cannot drift apart, which two hand switches (one each way) can.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace symdex {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The table's name for `value`; `otherwise` for a value the table leaves out (a number cast in
// from a file or the wire).
template <typename E, size_t N>
constexpr std::string_view NameIn(const std::array<EnumName<E>, N>& table, E value, std::string_view otherwise = "") {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return otherwise;
}

// The value the table names `name`, or nullopt.
template <typename E, size_t N>
constexpr std::optional<E> ValueIn(const std::array<EnumName<E>, N>& table, std::string_view name) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

}  // namespace symdex
