#pragma once
// Every threshold of the what-if replay (replay.h), in one place: docs/stalls.md ("What if") names these constants.
// Each comment says what the number protects against.
#include <cstdint>

namespace ddp {

// A wait for data shorter than this is a hand-over (the batch was there), not a stall: 0.5 ms is above the queue get
// of a ready batch measured here (~0.05-0.2 ms with 2 workers) and well below a late batch (tens of ms).
inline constexpr int64_t kReplayStallNs = 500'000;
// The replay is trusted when, fitted on one half of the steps, it predicts the other half's mean step within this,
// each half in turn (replay_holdout.h, replay_trust.h). Measured (2026-12-07, the larger half's miss): recorded runs
// whose halves agree, ours_slow_forward 4.7 %, the Kineto (torch 2.11 CPU) slow-data-rank1 3.7 %,
// slow-optimizer-rank1 5.9 %, gloo-pinned-batch 6.9 %, slow-forward-rank0 7.6 % (whose straggler's removal its
// balanced twin confirms within 2.4 %, as ours_slow_forward's within 3.3 %); runs whose halves differ, ours_balanced
// 17.7 % (Gloo's slow collectives come in bursts on a shared 2-core machine), the Kineto balanced 24.5 %,
// user_slow_read 37.1 % (three steps of 0.3-0.7 s, storage stalls); simulated steady runs 0-5.4 %, a stage that
// doubles mid-run 88 %, bursts only the second half has 79 %. 10 % lies above every run whose prediction a twin
// confirmed and below every run whose halves differ.
inline constexpr double kReplayTrustedError = 0.10;
// The fewest analysed steps the held-out validation (replay_holdout.h) splits: 4 a half. Each half then holds a whole
// period of the patterns these runs repeat (a batch late every other step with two workers, the Kineto
// slow-data-rank1; a checkpoint every other step, a peer late every third or fourth step, the simulated runs), so
// both halves see them; with fewer, one half may hold a late step the other never saw, and a steady run would be
// called one that changes. Fewer steps are said too few, and the run not trusted.
inline constexpr uint64_t kReplayHoldoutMinSteps = 8;
// Batches a loader worker may have made ahead per worker: PyTorch's DataLoader prefetch_factor default (2), ours.
inline constexpr int64_t kReplayPrefetch = 2;

}  // namespace ddp
