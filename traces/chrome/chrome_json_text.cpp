#include "traces/chrome/chrome_json_text.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "traces/chrome/chrome_parse_errors.h"

namespace ddp::chrome_json {
namespace {

constexpr int64_t kMaxNs = int64_t{1} << 61;

// The digits from t[i] on as a fraction of a microsecond, in whole nanoseconds: the first three digits, rounded by
// the fourth. Returns the index after the digits.
size_t fraction_ns(std::string_view t, size_t i, int64_t& ns) {
  int64_t frac = 0;
  int digits = 0;
  bool round_up = false;
  for (; i < t.size() && is_digit(t[i]); ++i) {
    if (digits < 3) {
      frac = frac * 10 + (t[i] - '0');
      ++digits;
    } else if (digits == 3) {
      round_up = t[i] >= '5';
      ++digits;
    }
  }
  for (; digits < 3; ++digits) frac *= 10;
  ns = frac + (round_up ? 1 : 0);
  return i;
}

int64_t micros_text_to_ns_raw(std::string_view t, double fallback) {
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && t[i] == '-') {
    neg = true;
    ++i;
  }
  int64_t whole = 0;
  size_t digits = 0;
  while (i < t.size() && is_digit(t[i])) {
    whole = whole * 10 + (t[i] - '0');
    ++i;
    if (++digits > 15) break;
  }
  int64_t frac = 0;
  if (i < t.size() && t[i] == '.') i = fraction_ns(t, i + 1, frac);
  if (i != t.size()) {  // exponent or a huge number: go through the double
    double ns = fallback * 1000.0;
    if (!std::isfinite(ns)) return 0;
    if (ns >= 9.2e18) return std::numeric_limits<int64_t>::max();
    if (ns <= -9.2e18) return std::numeric_limits<int64_t>::min();
    return static_cast<int64_t>(std::llround(ns));
  }
  const int64_t ns = whole * 1000 + frac;
  return neg ? -ns : ns;
}

}  // namespace

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool plain_micros_to_ns(std::string_view t, int64_t& ns) {
  // One pass: check the form and convert, as micros_text_to_ns_raw does for decimal text.
  size_t i = 0;
  const bool neg = !t.empty() && t[0] == '-';
  if (neg) ++i;
  const size_t int_begin = i;
  int64_t whole = 0;
  while (i < t.size() && is_digit(t[i])) whole = whole * 10 + (t[i++] - '0');
  const size_t int_digits = i - int_begin;
  if (int_digits == 0 || int_digits > 15 || (int_digits > 1 && t[int_begin] == '0')) return false;
  int64_t frac = 0;
  if (i < t.size()) {
    if (t[i] != '.') return false;
    const size_t frac_begin = ++i;
    i = fraction_ns(t, i, frac);
    if (i == frac_begin || i != t.size()) return false;
  }
  const int64_t v = whole * 1000 + frac;  // at most 10^18: no clamp needed
  ns = neg ? -v : v;
  return true;
}

int64_t micros_text_to_ns(std::string_view t, double fallback) {
  return std::clamp(micros_text_to_ns_raw(t, fallback), -kMaxNs, kMaxNs);
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && chrome_parse::is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool plain_string(const char* p, std::string_view& out) {
  const char* q = p;
  while (*q != '"' && *q != '\\') ++q;
  if (*q != '"') return false;
  out = std::string_view(p, static_cast<size_t>(q - p));
  return true;
}

}  // namespace ddp::chrome_json
