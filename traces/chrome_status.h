#pragma once
// Inside the Chrome reader (not for its users): how its parts report errors, and the size limit they share.
#include <cstdint>
#include <string>

#include "traces/chrome_reader.h"

namespace ddp {

// The largest JSON text the reader accepts (plain, or after inflating gzip).
inline constexpr uint64_t kMaxChromeJsonBytes = 8ull << 30;

// A failed status: the error's name, then `msg`.
ChromeStatus make_chrome_error(ChromeError e, std::string msg);

}  // namespace ddp
