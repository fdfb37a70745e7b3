#pragma once
// An image folder: index.txt lists "relative/path.png label" per sample; files are PNG/JPEG/BMP (decoded with
// stb_image). The transform decodes, takes a random 32x32 crop (offsets from seed, epoch and sample index) and
// normalises each channel to [-1, 1], giving {3, 32, 32} floats. The synthetic set (generated on first use) has
// 40x40 RGB images of stripes: horizontal = class 0, vertical = class 1, with random period, phase, colours and noise.
#include <string>
#include <vector>

#include "runtime/data/dataset.h"

namespace ddp {

inline constexpr int kImageCrop = 32;

bool write_synthetic_images(const std::string& dir, int64_t count, uint64_t seed, std::string& error);

class ImageFolder : public Dataset {
 public:
  bool open(const std::string& dir, uint64_t seed, std::string& error);
  int64_t samples() const override { return static_cast<int64_t>(files_.size()); }
  // Classes from the index's labels (at least 2, as a binary task has).
  int64_t classes() const override;
  std::vector<int64_t> sample_shape() const override { return {3, kImageCrop, kImageCrop}; }
  uint64_t read(const int64_t* idx, size_t n, RawBatch& out) const override;
  void transform(const RawBatch& raw, const int64_t* idx, size_t n, int epoch, float* x) const override;
  std::string description() const override;

 private:
  std::string dir_;
  uint64_t seed_ = 0;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
};

}  // namespace ddp
