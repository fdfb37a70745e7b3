#pragma once
// Inside the Chrome reader: the pieces of JSON text the parser decodes (digits, \u escapes, timestamps).
#include <cstdint>
#include <string>
#include <string_view>

namespace ddp::chrome_json {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
// A JSON token without the whitespace simdjson leaves after it.
std::string_view trim_right(std::string_view s);
// The contents of the string whose opening quote is just before `p`, when it has no escapes (the common case: a view,
// no copy). simdjson's first pass has checked that every string is closed, so the scan stops before the text's end.
bool plain_string(const char* p, std::string_view& out);
// The value of a hex digit, or -1.
int hex_value(char c);
void append_utf8(std::string& s, uint32_t cp);

// Microseconds as written in a trace ("123", "123.456", "1.2e3") to nanoseconds. Decimal text is converted exactly
// (no float rounding) so our own export round-trips to the nanosecond; other forms (exponents, huge numbers) go
// through `fallback`, the value as parsed to a double. Clamped to +-2^61 ns (73 years), so sums and differences of
// two timestamps cannot overflow.
int64_t micros_text_to_ns(std::string_view t, double fallback);

// The same for a JSON number of the plain form -?(0|[1-9][0-9]*)(.[0-9]+)? with at most 15 integer digits (no
// exponent): true with `ns` set. False for any other text, valid JSON or not, which the caller then hands to a JSON
// number parser.
bool plain_micros_to_ns(std::string_view t, int64_t& ns);

}  // namespace ddp::chrome_json
