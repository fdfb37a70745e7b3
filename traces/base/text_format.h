#pragma once
// printf-style formatting into a std::string: the one formatting helper of the text reports (analysis, diff).
#include <string>

namespace ddp {

// Formats like std::printf; the result has whatever length the text needs (never truncated).
__attribute__((format(printf, 1, 2))) std::string fmt(const char* format, ...);

}  // namespace ddp
