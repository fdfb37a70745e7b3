// Your own model on your own shaped data, as a new user brings them: numpy images [N, 3, 8, 8] with 5 classes
// through scripts/to_ddpd.py, a TorchScript CNN scripted by PyTorch (Debian's 1.13, the LibTorch we link), then
// --check. The model gets the samples' shape; a model that cannot run on the data is one line and exit 2 before any
// rank starts.
#include <gtest/gtest.h>

#include <cstdlib>

#include "integration_support.h"

namespace {
using ddptest::kExe;

const std::string kPython = "/usr/bin/python3";  // Debian's, with python3-torch (the LibTorch version we link)

bool have_debian_torch() { return std::system((kPython + " -c 'import torch, numpy' 2>/dev/null").c_str()) == 0; }

// Writes d/images.ddpd (3000 samples [3, 8, 8], 5 classes) and three scripted models: good.pt (a CNN taking
// [B, 3, 8, 8]), flat.pt (a Linear that wants [B, 192]) and three.pt (a CNN answering 3 classes).
void write_data_and_models(const std::string& d) {
  std::ofstream(d + "/make.py") << R"(
import sys, numpy as np, torch, torch.nn as nn
d = sys.argv[1]
rng = np.random.default_rng(0)
y = rng.integers(0, 5, 3000)
x = rng.normal(size=(3000, 3, 8, 8)).astype(np.float32) + y[:, None, None, None] * 0.3
np.save(d + "/x.npy", x); np.save(d + "/y.npy", y)
def cnn(classes):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, classes))
torch.manual_seed(0)
torch.jit.script(cnn(5)).save(d + "/good.pt")
torch.jit.script(nn.Sequential(nn.Linear(192, 5))).save(d + "/flat.pt")
torch.jit.script(cnn(3)).save(d + "/three.pt")
)";
  ASSERT_EQ(std::system((kPython + " " + d + "/make.py " + d).c_str()), 0);
  auto r = ddptest::run(
      {kPython, std::string(DDP_SOURCE_DIR) + "/scripts/to_ddpd.py", d + "/x.npy", d + "/y.npy", d + "/images.ddpd"},
      d + "/to_ddpd.log", 120);
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_NE(r.output.find("3000 samples of shape [3, 8, 8], 5 classes"), std::string::npos) << r.output;
}

TEST(OwnModel, ATorchScriptCnnOnImageShapedDataPassesTheLadder) {
  if (!have_debian_torch())
    GTEST_SKIP() << "SKIPPED LOUDLY: Debian's python3-torch and python3-numpy are not installed";
  const std::string d = ddptest::fresh_dir("own_model");
  std::filesystem::create_directories(d);
  write_data_and_models(d);
  auto r = ddptest::run({kExe, "--check", "--out", d + "/check", "--model", d + "/good.pt", "--data",
                         d + "/images.ddpd", "--max-steps", "5"},
                        d + "/check.log", 600);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("cannot take image samples"), std::string::npos) << r.output;
  auto checks = ddptest::read_json(d + "/check/checks.json");
  ASSERT_FALSE(checks.is_discarded()) << r.output;
}

// What cannot run is found once, before any rank: one line, exit 2, no ladder judged.
TEST(OwnModel, AModelThatCannotRunOnTheDataIsOneLineBeforeAnyRank) {
  if (!have_debian_torch())
    GTEST_SKIP() << "SKIPPED LOUDLY: Debian's python3-torch and python3-numpy are not installed";
  const std::string d = ddptest::fresh_dir("own_model_bad");
  std::filesystem::create_directories(d);
  write_data_and_models(d);
  struct Case {
    const char* model;
    const char* says;
  };
  for (const Case& c :
       {Case{"flat.pt", "its forward fails on a batch [2, 3, 8, 8]"}, Case{"three.pt", "gives [2, 3], not [2, 5]"}})
    for (const char* mode : {"--check", "--record"}) {
      const std::string out = d + "/" + c.model + mode;
      auto r = ddptest::run(
          {kExe, mode, "--out", out, "--model", d + "/" + c.model, "--data", d + "/images.ddpd", "--max-steps", "5"},
          out + ".log", 120);
      EXPECT_EQ(r.code, 2) << r.output;
      EXPECT_NE(r.output.find(c.says), std::string::npos) << r.output;
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line\n" << r.output;
      EXPECT_FALSE(std::filesystem::exists(out + "/rank0.ddpt")) << "no rank started";
    }
}

}  // namespace
