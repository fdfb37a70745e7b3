// The image folder dataset: generated PNGs, decoded and cropped on the loader's two stages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/data/image_dataset.h"
#include "runtime/data/loader.h"
#include "tests/support/remove_tree.h"

namespace {
namespace fs = std::filesystem;

std::string temp_dir(const char* name) {
  auto d = fs::temp_directory_path() / ("ddp_img_" + std::to_string(::getpid()) + "_" + name);
  ddp::testing::remove_tree(fs::path(d).string());
  return d.string();
}

TEST(ImageFolder, GeneratedImagesDecodeCropAndNormalise) {
  std::string d = temp_dir("gen"), err;
  ASSERT_TRUE(ddp::write_synthetic_images(d, 24, 5, err)) << err;
  ddp::ImageFolder f;
  ASSERT_TRUE(f.open(d, 5, err)) << err;
  EXPECT_EQ(f.samples(), 24);
  EXPECT_EQ(f.sample_shape(), (std::vector<int64_t>{3, 32, 32}));
  int64_t idx[3] = {0, 7, 23};
  ddp::RawBatch raw;
  uint64_t bytes = f.read(idx, 3, raw);
  EXPECT_EQ(bytes, raw.bytes.size());
  EXPECT_GT(bytes, 3u * 100) << "PNG files, not raw pixels";
  ASSERT_EQ(raw.labels.size(), 3u);
  for (auto l : raw.labels) EXPECT_TRUE(l == 0 || l == 1);
  std::vector<float> a(3 * f.sample_floats()), b(a.size()), c(a.size());
  f.transform(raw, idx, 3, 0, a.data());
  f.transform(raw, idx, 3, 0, b.data());
  f.transform(raw, idx, 3, 1, c.data());
  EXPECT_EQ(a, b) << "crops are a function of (seed, epoch, index)";
  EXPECT_NE(a, c) << "another epoch crops elsewhere";
  for (float v : a) {
    ASSERT_GE(v, -1.0f);
    ASSERT_LE(v, 1.0f);
  }
}

TEST(ImageFolder, BadFoldersAreClearErrors) {
  std::string d = temp_dir("bad"), err;
  fs::create_directories(d);
  ddp::ImageFolder none;
  EXPECT_FALSE(none.open(d, 0, err));
  EXPECT_NE(err.find("index.txt"), std::string::npos);
  std::ofstream(d + "/index.txt") << "a.png notanumber\n";
  ddp::ImageFolder bad;
  EXPECT_FALSE(bad.open(d, 0, err));
  EXPECT_NE(err.find("line 1"), std::string::npos) << err;
  std::ofstream(d + "/index.txt") << "junk.png 1\n";
  std::ofstream(d + "/junk.png") << "this is not a png";
  ddp::ImageFolder junk;
  ASSERT_TRUE(junk.open(d, 0, err));
  int64_t i = 0;
  ddp::RawBatch raw;
  junk.read(&i, 1, raw);
  std::vector<float> x(junk.sample_floats());
  EXPECT_THROW(junk.transform(raw, &i, 1, 0, x.data()), std::runtime_error);
}

TEST(ImageFolder, FeedsTheLoader) {
  std::string d = temp_dir("loader"), err;
  ASSERT_TRUE(ddp::write_synthetic_images(d, 40, 1, err)) << err;
  ddp::ImageFolder f;
  ASSERT_TRUE(f.open(d, 1, err));
  ddp::LoaderOptions o;
  o.workers = 2;
  o.batch_size = 8;
  ddp::StagingAllocator alloc{[](size_t n) { return std::malloc(n); }, [](void* p) { std::free(p); }};
  ddp::Loader loader(f, o, alloc);
  std::vector<std::vector<int64_t>> batches;
  for (int b = 0; b < 5; ++b) {
    batches.emplace_back();
    for (int i = 0; i < 8; ++i) batches.back().push_back(b * 8 + i);
  }
  loader.start_epoch(0, 0, batches);
  for (int b = 0; b < 5; ++b) {
    ddp::StagedBatch* s = loader.next();
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->samples, 8u);
    EXPECT_EQ(s->bytes, 8u * (3 * 32 * 32 * sizeof(float) + sizeof(int64_t)));
    loader.release(s);
  }
}
}  // namespace
