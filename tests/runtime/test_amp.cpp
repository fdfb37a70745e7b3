#include <gtest/gtest.h>

#include "runtime/train/amp.h"

namespace {
using namespace ddp;

AmpChoice pick(const std::string& amp, bool cuda, bool bf16, bool ok = true) {
  AmpChoice c;
  std::string err;
  EXPECT_EQ(choose_amp({amp, cuda, bf16}, c, err), ok) << amp << " cuda=" << cuda << " bf16=" << bf16 << ": " << err;
  if (!ok) {
    EXPECT_FALSE(err.empty());
  }
  return c;
}

TEST(Amp, DtypeAndScalerForEveryModeAndDevice) {
  struct Row {
    const char* amp;
    bool cuda, bf16, ok;
    AmpDtype dtype;
    bool scaler;
  };
  const Row rows[] = {
      {"auto", false, false, true, AmpDtype::off, false},  {"auto", false, true, true, AmpDtype::off, false},
      {"auto", true, false, true, AmpDtype::fp16, true},   {"auto", true, true, true, AmpDtype::fp16, true},
      {"fp16", true, false, true, AmpDtype::fp16, true},   {"fp16", true, true, true, AmpDtype::fp16, true},
      {"fp16", false, false, false, AmpDtype::off, false}, {"bf16", true, true, true, AmpDtype::bf16, false},
      {"bf16", true, false, false, AmpDtype::off, false},  {"bf16", false, false, true, AmpDtype::bf16, false},
      {"off", true, true, true, AmpDtype::off, false},     {"off", false, false, true, AmpDtype::off, false},
      {"fp8", true, true, false, AmpDtype::off, false},
  };
  for (const Row& r : rows) {
    AmpChoice c = pick(r.amp, r.cuda, r.bf16, r.ok);
    if (!r.ok) continue;
    EXPECT_EQ(c.dtype, r.dtype) << r.amp << " cuda=" << r.cuda;
    EXPECT_EQ(c.scaler, r.scaler) << r.amp << " cuda=" << r.cuda;
    EXPECT_FALSE(c.reason.empty());
  }
}

TEST(Amp, OnlyFp16NeedsTheScaler) {
  EXPECT_TRUE(pick("fp16", true, true).scaler);
  EXPECT_FALSE(pick("bf16", true, true).scaler);
  EXPECT_STREQ(amp_dtype_name(AmpDtype::bf16), "bf16");
  EXPECT_STREQ(amp_dtype_name(AmpDtype::fp16), "fp16");
  EXPECT_STREQ(amp_dtype_name(AmpDtype::off), "off");
}

}  // namespace
