#include "server/kernel/file_status.h"

#include <array>
#include <utility>

#include "server/common/strings.h"

namespace symdex::kernel {
namespace {

// One table per enum, in enum order: Name indexes it, Parse searches it.
constexpr std::array<std::string_view, 4> kInputNames = {"used", "missing", "error", "skipped"};
constexpr std::array<std::string_view, 6> kDebugNames = {"used",        "cached",     "not-found", "build-id-mismatch",
                                                         "parse-error", "no-build-id"};

template <typename E, size_t N>
std::string_view NameIn(const std::array<std::string_view, N>& names, E e) {
  const auto i = static_cast<size_t>(e);
  return i < N ? names[i] : std::string_view("?");
}

template <typename E, size_t N>
absl::StatusOr<E> ParseIn(const std::array<std::string_view, N>& names, std::string_view name, const char* what) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return absl::InvalidArgumentError(StrCat("unknown ", what, " status '", Excerpt(name),
                                           "' in the index (written by a newer symdex? re-run 'symdex index')"));
}

}  // namespace

std::string_view Name(InputFileStatus s) { return NameIn(kInputNames, s); }
std::string_view Name(DebugFileStatus s) { return NameIn(kDebugNames, s); }

absl::StatusOr<InputFileStatus> ParseInputFileStatus(std::string_view name) {
  return ParseIn<InputFileStatus>(kInputNames, name, "input file");
}
absl::StatusOr<DebugFileStatus> ParseDebugFileStatus(std::string_view name) {
  return ParseIn<DebugFileStatus>(kDebugNames, name, "debug file");
}

}  // namespace symdex::kernel
