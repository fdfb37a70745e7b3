#pragma once
// Whole-string decimal integers, as the timeline loaders read them from keys ("12" as a pid or tid) and names
// ("ProfilerStep#12").
#include <charconv>
#include <cstdint>
#include <string_view>

namespace ddp {

// True when all of `s` is a decimal integer, which is then in `v`.
inline bool parse_decimal(std::string_view s, int64_t& v) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace ddp
