#pragma once
// Whole-string decimal integers: what the timeline loaders read from keys ("12" as a pid or tid) and names
// ("ProfilerStep#12"), and what the runtime reads from the command line and the launcher's environment.
#include <charconv>
#include <cstdint>
#include <limits>
#include <string_view>

namespace ddp {

// True when all of `s` is a decimal integer, which is then in `v`.
inline bool parse_decimal(std::string_view s, int64_t& v) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// The same for an int from a C string (null, empty, trailing text or out of range: false).
inline bool parse_int(const char* s, int& v) {
  int64_t x = 0;
  if (!s || !parse_decimal(s, x) || x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    return false;
  v = static_cast<int>(x);
  return true;
}

}  // namespace ddp
