#pragma once
// The on-disk dataset format (.ddpd), documented in docs/data-format.md so users can bring their own data:
//   header (64 bytes): magic "DDPDATA1", u32 version (1 or 2), u32 features F, u64 samples N, u64 record_offset,
//                      u64 stats_offset, then version 2: u32 classes C, u32 shape rank R, u32 shape[4]
//                      (version 1: 24 zero bytes: shape {F}, classes from the labels)
//   stats:   float32 mean[F], float32 std[F]   (used by the loader's normalising transform)
//   records: N x (float32 x[F], int32 label)   (fixed size, so any sample is one pread)
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"

namespace ddp {

struct DatasetHeader {
  char magic[8];
  uint32_t version;
  uint32_t features;
  uint64_t samples;
  uint64_t record_offset;
  uint64_t stats_offset;
  uint32_t classes;     // version 2: labels are 0..classes-1
  uint32_t shape_rank;  // version 2: 1..4 dimensions of one sample, their product is `features`
  uint32_t shape[4];
};
static_assert(sizeof(DatasetHeader) == 64);

// Writes the synthetic dataset of the default job: features ~ N(0,1) from a seeded generator, label 1 when a fixed
// random projection of the sample plus noise is positive (a learnable task). Written to a temp file then renamed, so
// concurrent or interrupted writers never leave a partial file under the final name.
bool write_synthetic_dataset(const std::string& path, int64_t samples, int64_t features, uint64_t seed,
                             std::string& error);

// Writes a version 2 file: `x` holds samples x prod(shape) floats, `labels` one per sample in [0, classes).
bool write_dataset_file(const std::string& path, const std::vector<int64_t>& shape, int64_t classes,
                        const std::vector<float>& x, const std::vector<int32_t>& labels, std::string& error);

// Read-only, thread-safe random access to a dataset file. open() checks every label, so a label the model cannot
// take is refused before training (naming the first bad sample), not found by a rank mid-run.
class DatasetFile : public Dataset {
 public:
  ~DatasetFile() override;
  bool open(const std::string& path, std::string& error);
  int64_t samples() const override { return static_cast<int64_t>(header_.samples); }
  std::vector<int64_t> sample_shape() const override { return shape_; }
  int64_t classes() const override { return classes_; }
  // Dataset: the records as stored, then float features normalised with the file's statistics.
  uint64_t read(const int64_t* idx, size_t n, RawBatch& out) const override;
  void transform(const RawBatch& raw, const int64_t* idx, size_t n, int epoch, float* x) const override;
  std::string description() const override { return "tabular " + path_; }
  int64_t features() const { return header_.features; }
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& stddev() const { return std_; }
  size_t record_bytes() const { return features() * sizeof(float) + sizeof(int32_t); }

 private:
  int fd_ = -1;
  DatasetHeader header_{};
  bool read_header(std::string& error);
  bool check_labels(std::string& error);

  std::vector<float> mean_, std_;
  std::vector<int64_t> shape_;
  int64_t classes_ = 0;
  std::string path_;
};

}  // namespace ddp
