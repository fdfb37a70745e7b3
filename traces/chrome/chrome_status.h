#pragma once
// Inside the Chrome reader (not for its users): how its parts report errors, and the size limit they share.
#include <cstdint>
#include <string>
#include <string_view>

#include "traces/chrome/chrome_reader.h"

namespace ddp {

// The largest JSON text the reader holds in memory whole (a gzip file inflated, a text that cannot be read in pieces).
inline constexpr uint64_t kMaxChromeJsonBytes = 8ull << 30;
// The largest plain file read in pieces through the streaming window (never in memory whole: users' per-rank traces
// reach 10 GB and more); a bound only so that an endless input ends.
inline constexpr uint64_t kMaxStreamedChromeJsonBytes = 1ull << 40;

// gunzip's output size: the first guess from the gzip trailer's ISIZE, and the next room after a member did not fit
// (chrome_input.cpp says how). Here for the tests.
uint64_t gzip_first_size_guess(std::string_view gz);
uint64_t gzip_grown_size(uint64_t room, size_t produced, size_t compressed_left, std::string_view gz);

// A failed status: the error's name, then `msg`.
ChromeStatus make_chrome_error(ChromeError e, std::string msg);

}  // namespace ddp
