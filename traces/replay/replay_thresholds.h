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
// The fewest analysed steps the held-out validation (replay_holdout.h) splits: 4 a half. Each half then holds a whole
// period of the patterns these runs repeat (a batch late every other step with two workers, the Kineto
// slow-data-rank1; a checkpoint every other step, a peer late every third or fourth step, the simulated runs), so
// both halves see them; with fewer, one half may hold a late step the other never saw, and a steady run would be
// called one that changes. Fewer steps are said too few, and the run not trusted.
inline constexpr uint64_t kReplayHoldoutMinSteps = 8;
// Batches a loader worker may have made ahead per worker: PyTorch's DataLoader prefetch_factor default (2), ours.
inline constexpr int64_t kReplayPrefetch = 2;

}  // namespace ddp
