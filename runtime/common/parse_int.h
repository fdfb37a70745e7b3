#pragma once
// Whole-string decimal integers from the command line and the launcher's environment.
#include <cerrno>
#include <climits>
#include <cstdlib>

namespace ddp {
// True when `s` is a decimal int and nothing else (null, empty, trailing text or out of range: false).
inline bool parse_int(const char* s, int& v) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(s, &end, 10);
  if (*end || errno == ERANGE || x < INT_MIN || x > INT_MAX) return false;
  v = static_cast<int>(x);
  return true;
}
}  // namespace ddp
