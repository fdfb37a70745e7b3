#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "runtime/data/dataset_file.h"
#include "runtime/data/loader.h"
#include "tests/support/remove_tree.h"

namespace {
namespace fs = std::filesystem;

// The folders this process made, removed when it exits (ctest runs each test in a process of its own); a test that
// crashes leaves its folder to look at. Only by the process that made them: a forked loader worker exits too.
struct MadeDirs {
  pid_t owner = ::getpid();
  std::vector<std::string> dirs;
  ~MadeDirs() {
    if (::getpid() == owner)
      for (const std::string& d : dirs) ddp::testing::remove_tree(d);
  }
};

std::string temp_dir() {
  static MadeDirs made;
  auto d = fs::temp_directory_path() / ("ddp_ds_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  ddp::testing::remove_tree(fs::path(d).string());
  fs::create_directories(d);
  made.dirs.push_back(d.string());
  return d.string();
}

TEST(DatasetFile, WriteReadRoundTripIsDeterministic) {
  std::string d = temp_dir(), err;
  ASSERT_TRUE(ddp::write_synthetic_dataset(d + "/a.ddpd", 300, 16, 7, err)) << err;
  ASSERT_TRUE(ddp::write_synthetic_dataset(d + "/b.ddpd", 300, 16, 7, err)) << err;
  std::ifstream a(d + "/a.ddpd", std::ios::binary), b(d + "/b.ddpd", std::ios::binary);
  std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(sa, sb);
  ddp::DatasetFile f;
  ASSERT_TRUE(f.open(d + "/a.ddpd", err)) << err;
  EXPECT_EQ(f.samples(), 300);
  EXPECT_EQ(f.features(), 16);
  int64_t idx[3] = {0, 299, 5};
  ddp::RawBatch raw;
  EXPECT_EQ(f.read(idx, 3, raw), 3 * f.record_bytes());
  ASSERT_EQ(raw.labels.size(), 3u);
  for (auto l : raw.labels) EXPECT_TRUE(l == 0 || l == 1);
  std::vector<float> x(3 * 16);
  f.transform(raw, idx, 3, 0, x.data());
  float stored;
  std::memcpy(&stored, raw.bytes.data() + raw.offsets[1], sizeof(float));
  EXPECT_FLOAT_EQ(x[16], (stored - f.mean()[0]) / f.stddev()[0]) << "transform normalises with the file's statistics";
  int64_t bad = 300;
  EXPECT_THROW(f.read(&bad, 1, raw), std::out_of_range);
}

// Version 2 carries the sample shape and the class count; every label is checked when the file is opened, so a
// label the model cannot take is named up front instead of failing a rank mid-run ("Target 4 is out of bounds").
TEST(DatasetFile, Version2CarriesShapeAndClassesAndLabelsAreCheckedOnOpen) {
  std::string d = temp_dir(), err;
  const std::vector<int64_t> shape = {2, 3};
  std::vector<float> x(12 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
  std::vector<int32_t> y = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 4, 2};
  ASSERT_TRUE(ddp::write_dataset_file(d + "/ten.ddpd", shape, 10, x, y, err)) << err;
  ddp::DatasetFile f;
  ASSERT_TRUE(f.open(d + "/ten.ddpd", err)) << err;
  EXPECT_EQ(f.sample_shape(), shape);
  EXPECT_EQ(f.classes(), 10);
  EXPECT_EQ(f.sample_floats(), 6);

  y[7] = 10;  // outside [0, 10)
  ASSERT_TRUE(ddp::write_dataset_file(d + "/bad.ddpd", shape, 10, x, y, err)) << err;
  ddp::DatasetFile bad;
  EXPECT_FALSE(bad.open(d + "/bad.ddpd", err));
  EXPECT_NE(err.find("sample 7 has label 10"), std::string::npos) << err;

  // A version 1 file (no shape or class count in its header) still loads: shape {F}, classes from its labels.
  y[7] = 7;
  ASSERT_TRUE(ddp::write_dataset_file(d + "/v1.ddpd", shape, 10, x, y, err)) << err;
  {
    std::fstream io(d + "/v1.ddpd", std::ios::in | std::ios::out | std::ios::binary);
    ddp::DatasetHeader h{};
    io.read(reinterpret_cast<char*>(&h), sizeof(h));
    h.version = 1;
    h.classes = h.shape_rank = 0;
    std::memset(h.shape, 0, sizeof(h.shape));
    io.seekp(0);
    io.write(reinterpret_cast<const char*>(&h), sizeof(h));
  }
  ddp::DatasetFile v1;
  ASSERT_TRUE(v1.open(d + "/v1.ddpd", err)) << err;
  EXPECT_EQ(v1.sample_shape(), std::vector<int64_t>{6});
  EXPECT_EQ(v1.classes(), 10);
  // A crafted header: a shape whose product overflows, and a class count no model should be sized to.
  for (auto patch : {std::pair{0, 0}, std::pair{1, 0}}) {
    ASSERT_TRUE(ddp::write_dataset_file(d + "/crafted.ddpd", shape, 10, x, y, err)) << err;
    std::fstream io(d + "/crafted.ddpd", std::ios::in | std::ios::out | std::ios::binary);
    ddp::DatasetHeader h{};
    io.read(reinterpret_cast<char*>(&h), sizeof(h));
    if (patch.first == 0) {
      h.shape_rank = 4;
      for (auto& dim : h.shape) dim = 0xFFFFFFFFu;
    } else {
      h.classes = 0xFFFFFFFFu;
    }
    io.seekp(0);
    io.write(reinterpret_cast<const char*>(&h), sizeof(h));
    io.close();
    ddp::DatasetFile crafted;
    EXPECT_FALSE(crafted.open(d + "/crafted.ddpd", err)) << patch.first;
    EXPECT_NE(err.find(patch.first == 0 ? "sample shape" : "classes"), std::string::npos) << err;
  }
  ddp::testing::remove_tree(fs::path(d).string());
}

TEST(DatasetFile, DamagedFilesAreRejectedWithAReason) {
  std::string d = temp_dir(), err;
  ASSERT_TRUE(ddp::write_synthetic_dataset(d + "/a.ddpd", 100, 8, 1, err));
  fs::resize_file(d + "/a.ddpd", fs::file_size(d + "/a.ddpd") - 10);
  ddp::DatasetFile f;
  EXPECT_FALSE(f.open(d + "/a.ddpd", err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  std::ofstream(d + "/junk.ddpd") << "hello";
  ddp::DatasetFile g;
  EXPECT_FALSE(g.open(d + "/junk.ddpd", err));
  ddp::DatasetFile h;
  EXPECT_FALSE(h.open(d + "/missing.ddpd", err));
}

class LoaderTest : public ::testing::TestWithParam<int> {};

TEST_P(LoaderTest, DeliversEveryBatchInOrderNormalised) {
  std::string d = temp_dir(), err;
  ASSERT_TRUE(ddp::write_synthetic_dataset(d + "/a.ddpd", 1000, 8, 3, err));
  ddp::DatasetFile f;
  ASSERT_TRUE(f.open(d + "/a.ddpd", err));
  ddp::LoaderOptions o;
  o.workers = GetParam();
  o.batch_size = 10;
  ddp::StagingAllocator alloc{[](size_t n) { return std::malloc(n); }, [](void* p) { std::free(p); }};
  ddp::Loader loader(f, o, alloc);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::vector<int64_t>> batches;
    for (int b = 0; b < 50; ++b) {
      batches.emplace_back();
      for (int i = 0; i < 10; ++i) batches.back().push_back((b * 10 + i + epoch * 7) % 1000);
    }
    loader.start_epoch(static_cast<uint16_t>(epoch), 0, batches);
    double sum = 0, sq = 0;
    for (int b = 0; b < 50; ++b) {
      ddp::StagedBatch* s = loader.next();
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->index, b);
      EXPECT_EQ(s->indices, batches[b]);
      for (int i = 0; i < 80; ++i) {
        sum += s->x[i];
        sq += s->x[i] * s->x[i];
      }
      loader.release(s);
    }
    EXPECT_EQ(loader.next(), nullptr);
    // Normalised with the file's statistics: mean ~0, variance ~1 over the whole dataset.
    EXPECT_NEAR(sum / 4000, 0.0, 0.05);
    EXPECT_NEAR(sq / 4000, 1.0, 0.1);
  }
}
TEST(Loader, DestroyedMidEpochWhileWorkersProduceDoesNotHang) {
  // Regression: a worker that finished producing after the destructor's notify used to wait forever for a slot.
  std::string d = temp_dir(), err;
  ASSERT_TRUE(ddp::write_synthetic_dataset(d + "/a.ddpd", 2000, 8, 3, err));
  ddp::DatasetFile f;
  ASSERT_TRUE(f.open(d + "/a.ddpd", err));
  ddp::StagingAllocator alloc{[](size_t n) { return std::malloc(n); }, [](void* p) { std::free(p); }};
  for (int round = 0; round < 30; ++round) {
    ddp::LoaderOptions o;
    o.workers = 2;
    o.prefetch = 1;
    o.batch_size = 10;
    o.slow_disk_read_ms = 1;
    ddp::Loader loader(f, o, alloc);
    std::vector<std::vector<int64_t>> batches(100, std::vector<int64_t>(10, 1));
    loader.start_epoch(0, 0, batches);
    ddp::StagedBatch* b = loader.next();
    ASSERT_NE(b, nullptr);
    loader.release(b);
  }  // ~Loader joins the workers; ctest's timeout turns a hang into a failure
}

INSTANTIATE_TEST_SUITE_P(Workers, LoaderTest, ::testing::Values(0, 1, 2, 3));
}  // namespace
