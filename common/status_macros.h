// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status and absl::StatusOr (abseil 20220623 lacks them).
#ifndef CHRONOSERVE_COMMON_STATUS_MACROS_H_
#define CHRONOSERVE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CS_CONCAT_INNER_(a, b) a##b
#define CS_CONCAT_(a, b) CS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    const ::absl::Status cs_status_ = (expr);              \
    if (!cs_status_.ok()) return cs_status_;               \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); returns the error, or moves the value into `lhs`.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  CS_ASSIGN_OR_RETURN_IMPL_(CS_CONCAT_(cs_statusor_, __LINE__), lhs, rexpr)

#define CS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#endif  // CHRONOSERVE_COMMON_STATUS_MACROS_H_
