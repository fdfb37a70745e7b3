#pragma once
// A set of ranks said in a few words, whatever the world size: "rank 777", "ranks 4-11 (8 ranks)",
// "ranks 2, 6, 10, ... 1022 (256 ranks, every 4th)", "all 1024 ranks", "all 1024 ranks but rank 777". What a report at
// 1024 ranks says instead of a list (docs/stalls.md "At scale").
#include <string>
#include <vector>

namespace ddp {

// Above this many ranks a report says ranks as sets and distributions, never one line per rank (--analyze, the
// Kineto import's clock alignment); no line of it is longer than kReportLineMax (the JSON keeps everything whole).
inline constexpr int kRanksListedInFull = 8;
inline constexpr size_t kReportLineMax = 240;

// `ranks` in any order, duplicates ignored; `world` (0: unknown) lets a set that is every rank say so.
std::string describe_ranks(std::vector<int> ranks, int world = 0);

// `text` cut to at most `max_chars` bytes, ending in "..." when cut (a report line at 1024 ranks stays readable).
std::string clip(const std::string& text, size_t max_chars);

}  // namespace ddp
