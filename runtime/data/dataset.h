#pragma once
// What the loader reads: a dataset split into the two host stages the profiler shows separately — read(), the bytes
// of some samples as stored (disk_read), and transform(), those bytes turned into normalised float tensors
// (transform: decoding, augmentation, normalisation). Implementations are thread-safe for concurrent workers.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/job_config.h"

namespace ddp {

struct RawBatch {
  std::vector<uint8_t> bytes;
  std::vector<size_t> offsets;  // sample i is bytes[offsets[i], offsets[i + 1])
  std::vector<int64_t> labels;
};

// The most classes a dataset may have: one corrupt label must not size the output layer to billions.
inline constexpr int64_t kMaxClasses = 1 << 20;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t samples() const = 0;
  // Shape of one sample as the model sees it: {F} for tabular data, {C, H, W} for images.
  virtual std::vector<int64_t> sample_shape() const = 0;
  int64_t sample_floats() const;
  // Classes the labels come from (0..classes-1): what the model's output layer is sized to.
  virtual int64_t classes() const = 0;
  // The stored bytes of samples `idx` (appended to `out`, which is cleared first). Returns bytes read.
  virtual uint64_t read(const int64_t* idx, size_t n, RawBatch& out) const = 0;
  // Decodes/augments/normalises into x (n * sample_floats() floats). Random augmentation is a pure function of
  // (seed, epoch, sample index), so a reference or a resumed run reproduces it exactly.
  virtual void transform(const RawBatch& raw, const int64_t* idx, size_t n, int epoch, float* x) const = 0;
  virtual std::string description() const = 0;
};

// Opens the job's dataset: the .ddpd file (synthetic or user's) or an image folder (--dataset images[:DIR]).
std::unique_ptr<Dataset> open_dataset(const JobConfig& job, std::string& error);
bool is_image_dataset(const JobConfig& job);
// Sizes the job from its data: the class count (the model's output layer) and, for a .ddpd file, its features.
void fit_job_to_dataset(JobConfig& job, const Dataset& data);

}  // namespace ddp
