#pragma once
// The on-disk dataset format (.ddpd), documented in docs/data-format.md so users can bring their own data:
//   header (64 bytes): magic "DDPDATA1", u32 version=1, u32 features F, u64 samples N, u64 record_offset,
//                      u64 stats_offset, 24 reserved bytes
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
  uint8_t reserved[24];
};
static_assert(sizeof(DatasetHeader) == 64);

// Writes the synthetic dataset of the default job: features ~ N(0,1) from a seeded generator, label 1 when a fixed
// random projection of the sample plus noise is positive (a learnable task). Written to a temp file then renamed, so
// concurrent or interrupted writers never leave a partial file under the final name.
bool write_synthetic_dataset(const std::string& path, int64_t samples, int64_t features, uint64_t seed,
                             std::string& error);

// Read-only, thread-safe random access to a dataset file.
class DatasetFile : public Dataset {
 public:
  ~DatasetFile() override;
  bool open(const std::string& path, std::string& error);
  int64_t samples() const override { return static_cast<int64_t>(header_.samples); }
  std::vector<int64_t> sample_shape() const override { return {features()}; }
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
  std::vector<float> mean_, std_;
  std::string path_;
};

}  // namespace ddp
