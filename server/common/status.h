// One error type end to end: absl::Status / absl::StatusOr<T>.
// "Not found" is std::optional; "failed" is a Status whose message a user can act on.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SYMDEX_CONCAT_INNER(a, b) a##b
#define SYMDEX_CONCAT(a, b) SYMDEX_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status symdex_status__ = (expr);           \
    if (!symdex_status__.ok()) return symdex_status__; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(SYMDEX_CONCAT(symdex_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)    \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return std::move(tmp).status(); \
  lhs = std::move(tmp).value()
