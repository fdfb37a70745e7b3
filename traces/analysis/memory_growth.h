#pragma once
// Memory that grows after warm-up: the one rule of the analysis' memory_growth flag (a rank's host RSS or CUDA
// allocated bytes, sampled over time; docs/stalls.md, Flags) and of the check memory.steady (the bytes a rank holds
// after each optimizer step; docs/checks.md), with each caller's marks and the measurements behind them.
//
// The rule. The first tenth of a series is warm-up (kMemoryWarmupParts), cut by the caller: of the sampled time for
// the counters, of the logged steps for the check. What is left, the window, is cut into parts by sample count; it
// grows when its last part's median rises above its first's by the marks (bytes, and a share of where it began),
// every part's above the one before where the marks ask it, and the median slope between every two samples
// (Theil-Sen) reaches the marks' rate where they give one.
//
// Each caller's rule also says how it reads its window (how the parts are cut, which middle a median of an even
// count takes), as its marks were measured with: made one reading, either caller's numbers (the flag's evidence,
// the check's slope and rise) would move on the same runs.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddp {

// The first 1/kMemoryWarmupParts of a series is warm-up (allocator pools, first batches, caches filled once) and is
// dropped before the rule reads it.
inline constexpr int64_t kMemoryWarmupParts = 10;

struct GrowthRule {
  size_t parts = 3;               // the window in this many parts of window/parts samples (at least one)
  bool last_part_to_end = true;   // the last part runs to the window's end (else: its last window/parts samples)
  bool upper_median = false;      // a median of an even count is its upper middle (else the two middles' mean)
  bool each_part_higher = false;  // every part's median above the one before, not only the last above the first
  double per_sample = 0;          // the Theil-Sen slope at least this many bytes a sample; 0: no rate asked
  double rise = 0;                // the last part's median above the first's by `rise` bytes: at least, or
  bool rise_exceeds = false;      //   with rise_exceeds more than
  double rise_share = 0;          // ... and by more than this share of the first part's median (0: none asked)
};

// ---- the analysis' memory_growth flag: host RSS or CUDA allocated bytes, sampled over time ----
// Fewer samples than this cannot show a trend.
inline constexpr size_t kMemoryMinSamples = 8;
// After warm-up, fewer samples than this make thirds too small for a median.
inline constexpr size_t kMemoryMinSamplesAfterWarmup = 6;
// Thirds, each above the one before, the last more than 50 MiB and more than 10 % above the first: 50 MiB ignores
// allocator noise in small runs, 10 % ignores it in large ones.
inline constexpr GrowthRule kCounterGrowth = {3, true, false, true, 0, 50.0 * (1 << 20), true, 0.10};

// ---- the check memory.steady: the bytes a rank holds after each optimizer step ----
// A rank leaks when it grows at least `per_sample` a step (a one-time rise, such as the first checkpoint's save or a
// cache filled once, +285 KB at once on a Trainer's rank 0, moves the median of the pairwise slopes hardly at all,
// while a leak moves every one of them) and at least `rise` in all, its window's last quarter over its first.
// The heap in use and CUDA's allocated bytes count what is held, not the pages an allocator keeps. Correct scripts
// here still creep (a CNN with BatchNorm, a loop, a Trainer class, Lightning, accelerate; 48-120 steps): 1.4-4.3 KB
// a step and at most 0.43 MB in all, of which ~1.3 KB a step without the companion (torch's own, below Python).
// A kept graph that holds its activations grows 24 KB a step on the test loop's MLP; one kept after backward (its
// saved tensors freed) only ~0.6 KB on a small CNN: below the creep, not told apart.
inline constexpr GrowthRule kLeakHeld = {4, false, true, false, 10e3, 256e3, false, 0};
// The resident set, where the heap is not measured: the same correct scripts creep by up to ~3 KB a step (pages the
// allocator keeps), and creeps of 36-59 KB a step were seen on others; a kept graph of a 512-wide MLP grows ~220 KB.
inline constexpr GrowthRule kLeakResident = {4, false, true, false, 64e3, 2e6, false, 0};
// Steps after warm-up needed to tell growth from warm-up.
inline constexpr size_t kMemoryMinSteps = 8;

struct MemoryGrowth {
  std::vector<double> part_medians;  // the window's parts, in order (empty parts: 0)
  double rise = 0;                   // the last part's median less the first's
  double per_sample = 0;             // the Theil-Sen slope, bytes a sample (0 where the rule asks no rate)
  double median = 0;                 // the whole window's, read as the rule reads a part
  bool grows = false;                // the rule's verdict
};

// The rule applied to `window` (a series after its warm-up, in order, one value a sample).
MemoryGrowth memory_growth(const std::vector<double>& window, const GrowthRule& rule);

}  // namespace ddp
