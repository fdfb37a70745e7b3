#pragma once
// Every threshold of the what-if replay (replay.h), in one place: docs/stalls.md ("What if") names these constants.
// Each comment says what the number protects against.
#include <cstdint>

namespace ddp {

// A wait for data shorter than this is a hand-over (the batch was there), not a stall: 0.5 ms is above the queue get
// of a ready batch measured here (~0.05-0.2 ms with 2 workers) and well below a late batch (tens of ms).
inline constexpr int64_t kReplayStallNs = 500'000;
// The replay is trusted when its mean step error stays within this (replay_trust.h): the bar replays of Kineto traces
// reach (Lumos, MLSys'25: 3.3 % mean), and what a prediction needs to rank causes.
inline constexpr double kReplayTrustedError = 0.05;
// Batches a loader worker may have made ahead per worker: PyTorch's DataLoader prefetch_factor default (2), ours.
inline constexpr int64_t kReplayPrefetch = 2;

}  // namespace ddp
