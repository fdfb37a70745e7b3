#include "traces/base/text_format.h"

#include <cstdarg>
#include <cstdio>

namespace ddp {

std::string fmt(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list measure;
  va_copy(measure, args);
  const int n = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  std::string out;
  if (n > 0) {
    out.resize(static_cast<size_t>(n));
    // vsnprintf writes the terminating NUL too: size + 1 is the string's own buffer (C++11 guarantees it exists).
    std::vsnprintf(out.data(), out.size() + 1, format, args);
  }
  va_end(args);
  return out;
}

}  // namespace ddp
