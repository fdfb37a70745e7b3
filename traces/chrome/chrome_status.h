#pragma once
// Inside the Chrome reader (not for its users): how its parts report errors, and the size limit they share.
#include <cstdint>
#include <string>
#include <string_view>

#include "traces/chrome/chrome_reader.h"

namespace ddp {

// The largest JSON text the reader accepts (plain, or after inflating gzip).
inline constexpr uint64_t kMaxChromeJsonBytes = 8ull << 30;

// gunzip's output size: the first guess from the gzip trailer's ISIZE, and the next room after a member did not fit
// (chrome_input.cpp says how). Here for the tests.
uint64_t gzip_first_size_guess(std::string_view gz);
uint64_t gzip_grown_size(uint64_t room, size_t produced, size_t compressed_left, std::string_view gz);

// A failed status: the error's name, then `msg`.
ChromeStatus make_chrome_error(ChromeError e, std::string msg);

}  // namespace ddp
