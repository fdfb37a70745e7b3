#pragma once
// Inside the Chrome reader: where a parse error is and what it says. simdjson names an error but rarely its place:
// the parser keeps the token it is reading (`at`), and an error is reported there with its byte offset and line,
// an error at the end of the text called truncated; errors of simdjson's first pass (the structural index) get a
// place found here.
#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "traces/chrome/chrome_reader.h"

namespace ddp::chrome_parse {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Line numbers for error messages: counted in the text in memory, or in the file a streamed text comes from.
class LineCounter {
 public:
  virtual ~LineCounter() = default;
  virtual uint64_t line_of(uint64_t offset) const = 0;  // 1-based line of byte `offset`
};

// The user's text [origin, user_end), which starts at byte `base` of the document `lines` counts.
class ErrorSite {
 public:
  ErrorSite(const char* origin, const char* user_end, const LineCounter& lines, uint64_t base)
      : at(origin), origin_(origin), user_end_(user_end), lines_(lines), base_(base) {}

  const char* at;       // the token being read: where an error is reported
  ChromeStatus status;  // the first error, kept

  bool fail(ChromeError err, const std::string& what);
  bool syntax(const std::string& what) { return fail(ChromeError::syntax, what); }
  bool truncated(const std::string& what);
  // The end of the user's text without trailing whitespace: an error there means the text was cut.
  const char* content_end() const;
  // An error of simdjson's second pass at the token `at` points to.
  bool fail_simdjson(simdjson::error_code err);
  // Errors of simdjson's first pass: no position from simdjson, so one is found where it can be.
  void first_pass_error(simdjson::error_code err);

 private:
  void unclosed_string();
  const char* first_invalid_utf8() const;

  const char* origin_;
  const char* user_end_;
  const LineCounter& lines_;
  uint64_t base_;
};

}  // namespace ddp::chrome_parse
