// The safetensors reader (traces/base/safetensors.h): the companion's files as torch 2.11 and 1.13 wrote them, every
// dtype's values back, the file's order kept, and each kind of damage refused with what and where.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "traces/base/safetensors.h"

namespace {

const std::string kData = std::string(DDP_SOURCE_DIR) + "/tests/data/safetensors/";

std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string out;
  for (float f : v) out.append(reinterpret_cast<const char*>(&f), sizeof f);
  return out;
}

}  // namespace

TEST(Safetensors, TheCompanionsFilesFromTorch211And113ReadBackEveryDtype) {
  for (const char* name : {"torch-2.11.safetensors", "torch-1.13.safetensors"}) {
    ddp::PlainTensors ts;
    std::string err;
    ASSERT_TRUE(ddp::read_safetensors(kData + name, ts, err)) << err;
    std::vector<std::string> order;
    for (const auto& t : ts) order.push_back(t.name);
    EXPECT_EQ(order, (std::vector<std::string>{"acts/0/layer1", "grads/w", "half", "bf16", "long", "flags", "scalar",
                                               "empty", "strided"}))
        << "the order the companion wrote them in (a module's forward order)";
    auto at = [&](const char* n) { return ddp::find_tensor(ts, n); };
    ASSERT_NE(at("acts/0/layer1"), nullptr);
    EXPECT_EQ(at("acts/0/layer1")->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(at("acts/0/layer1")->values, (std::vector<double>{1.5, -2.25, 3.0, 0.0, double(1e-3f), -7.0}));
    EXPECT_EQ(at("grads/w")->dtype, "F64");
    EXPECT_EQ(at("grads/w")->values, (std::vector<double>{1.0 / 3, -2.0, 1e300}));
    EXPECT_EQ(at("half")->values, (std::vector<double>{0.5, -65504.0, 6.103515625e-05}));
    EXPECT_EQ(at("bf16")->values, (std::vector<double>{1.0, -3.140625}));
    EXPECT_EQ(at("long")->values, (std::vector<double>{-1099511627776.0, 7.0}));
    EXPECT_EQ(at("flags")->values, (std::vector<double>{1, 0, 1}));
    EXPECT_TRUE(at("scalar")->shape.empty());
    EXPECT_EQ(at("scalar")->values, (std::vector<double>{2.5}));
    EXPECT_EQ(at("empty")->shape, (std::vector<int64_t>{0, 4}));
    EXPECT_TRUE(at("empty")->values.empty());
    EXPECT_EQ(at("strided")->shape, (std::vector<int64_t>{4, 3}));
    EXPECT_EQ(at("strided")->values, (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}))
        << "a transposed tensor is written as its values in row-major order";
    EXPECT_EQ(at("missing"), nullptr);
  }
}

TEST(Safetensors, MetadataIsSkippedAndTheOrderIsTheBytesOrder) {
  const std::string header = R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  ddp::PlainTensors ts;
  std::string err;
  ASSERT_TRUE(ddp::parse_safetensors(file_of(header, f32_bytes({1.0f, 2.0f})), ts, err)) << err;
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[0].name, "a");
  EXPECT_EQ(ts[0].values, (std::vector<double>{1.0}));
  EXPECT_EQ(ts[1].name, "b");
}

TEST(Safetensors, DamageIsRefusedWithWhatAndWhere) {
  const std::string two = f32_bytes({1.0f, 2.0f});
  const struct {
    std::string bytes, says;
  } cases[] = {
      {"abc", "shorter than the 8-byte header length"},
      {file_of(std::string(20, ' '), "").substr(0, 12), "a header of 20 bytes"},
      {file_of("[1,2]", ""), "not a JSON object"},
      {file_of("{not json", ""), "not a JSON object"},
      {file_of(R"({"x":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", two), "dtype C64"},
      {file_of(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", two), "holds 8 bytes for 3 x 4"},
      {file_of(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,12]}})", two), "outside the file's data"},
      {file_of(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", two), "not a non-negative integer"},
      {file_of(R"({"x":{"dtype":"F32","shape":[1]}})", two), "needs dtype, shape and data_offsets"},
      {file_of(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", two),
       "larger than the file"},
  };
  for (const auto& c : cases) {
    ddp::PlainTensors ts;
    std::string err;
    EXPECT_FALSE(ddp::parse_safetensors(c.bytes, ts, err)) << c.says;
    EXPECT_NE(err.find(c.says), std::string::npos) << "said: " << err << "\nwanted: " << c.says;
  }
  ddp::PlainTensors ts;
  std::string err;
  EXPECT_FALSE(ddp::read_safetensors(kData + "no_such.safetensors", ts, err));
  EXPECT_NE(err.find("no_such.safetensors"), std::string::npos) << err;
}
