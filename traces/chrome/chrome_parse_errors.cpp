#include "traces/chrome/chrome_parse_errors.h"

#include <algorithm>
#include <cstring>

#include "traces/chrome/chrome_status.h"

namespace ddp::chrome_parse {

bool ErrorSite::fail(ChromeError err, const std::string& what) {
  if (status.ok()) {
    const char* where = std::clamp(at, origin_, user_end_);
    status.error = err;
    status.offset = base_ + static_cast<uint64_t>(where - origin_);
    const uint64_t line = lines_.line_of(status.offset);
    status.message = std::string(chrome_error_name(err)) + ": " + what + " at byte " + std::to_string(status.offset) +
                     " (line " + std::to_string(line) + ")";
  }
  return false;
}
bool ErrorSite::truncated(const std::string& what) {
  at = user_end_;
  return fail(ChromeError::truncated, what);
}

// The end of the user's text without trailing whitespace: an error there means the text was cut.
const char* ErrorSite::content_end() const {
  const char* e = user_end_;
  while (e > origin_ && is_space(e[-1])) --e;
  return e;
}

// An error of simdjson's second pass at the token at points to.
bool ErrorSite::fail_simdjson(simdjson::error_code err) {
  if (err == simdjson::DEPTH_ERROR) return fail(ChromeError::too_deep, "nesting too deep");
  if (err == simdjson::MEMALLOC) return fail(ChromeError::too_large, "out of memory while reading the trace");
  const char* end = content_end();
  if (at >= end) return truncated("input ends inside a value");
  // The token the error is in runs to the end of the text: a number or literal cut short ("12.", "nul").
  const char* tok_end = at;
  while (tok_end < user_end_ && !is_space(*tok_end) && !std::strchr(",:[]{}\"", *tok_end)) ++tok_end;
  const std::string_view tok(at, static_cast<size_t>(tok_end - at));
  if (tok_end >= end && !tok.empty()) {
    for (std::string_view word : {"true", "false", "null"})
      if (tok.size() < word.size() && word.substr(0, tok.size()) == tok)
        return truncated("input ends inside a literal");
    if (tok.find_first_not_of("0123456789.eE+-") == std::string_view::npos)
      return truncated("input ends inside a number");
  }
  switch (err) {
    case simdjson::NUMBER_ERROR:
      return syntax("invalid number");
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
      return syntax("invalid literal");
    case simdjson::STRING_ERROR:
      return syntax("invalid escape in a string");
    default:
      break;
  }
  const char c = *at;
  return syntax(std::string("unexpected '") + (static_cast<unsigned char>(c) >= 0x20 ? c : '?') + "' (" +
                simdjson::error_message(err) + ")");
}

// Errors of simdjson's first pass (the structural index): no position from simdjson, so we find one where we can.
void ErrorSite::first_pass_error(simdjson::error_code err) {
  switch (err) {
    case simdjson::EMPTY:
      at = origin_;
      fail(ChromeError::empty, "no JSON text");
      return;
    case simdjson::CAPACITY:
      at = origin_;
      fail(ChromeError::too_large, "the text is larger than simdjson reads in one piece (4 GiB)");
      return;
    case simdjson::MEMALLOC:
      at = origin_;
      fail(ChromeError::too_large, "out of memory while indexing the trace");
      return;
    case simdjson::UNCLOSED_STRING:
      return unclosed_string();
    case simdjson::UTF8_ERROR:
      at = first_invalid_utf8();
      syntax("invalid UTF-8");
      return;
    case simdjson::UNESCAPED_CHARS: {
      at = origin_;
      while (at < user_end_ && (static_cast<unsigned char>(*at) >= 0x20 || is_space(*at))) ++at;
      syntax(at < user_end_ ? "control character" : "control character (a raw tab or line break) inside a string");
      return;
    }
    default:
      at = origin_;
      syntax(simdjson::error_message(err));
  }
}

// An odd number of quotes: the text was cut inside a string, unless the last string would hold a line break or
// another control character, which no string may: then a quote is missing or stray.
void ErrorSite::unclosed_string() {
  const char* q = user_end_;
  while (q > origin_ && q[-1] != '"') --q;
  at = q > origin_ ? q - 1 : origin_;
  for (const char* c = q; c < user_end_; ++c)
    if (static_cast<unsigned char>(*c) < 0x20) {
      syntax("a string is not closed (a stray or missing quote)");
      return;
    }
  truncated("input ends inside a string");
}

const char* ErrorSite::first_invalid_utf8() const {
  const auto* p = reinterpret_cast<const unsigned char*>(origin_);
  const auto* e = reinterpret_cast<const unsigned char*>(user_end_);
  while (p < e) {
    const unsigned c = *p;
    const int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || e - p <= n) break;
    bool ok = true;
    for (int k = 1; k <= n; ++k) ok &= (p[k] & 0xC0) == 0x80;
    if (!ok) break;
    p += n + 1;
  }
  return reinterpret_cast<const char*>(p);
}

}  // namespace ddp::chrome_parse
