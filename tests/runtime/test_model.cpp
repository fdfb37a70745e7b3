// The model interface over the built-in MLPs and a user's TorchScript module (built here with the TorchScript
// compiler and saved, as torch.jit.script(model).save() would).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/train/model.h"
#include "tests/support/script_mlp.h"

namespace {
namespace fs = std::filesystem;

std::string save_script_mlp(const std::string& name) {
  torch::jit::Module m = ddp::testing::script_mlp(16, 0.1);
  fs::path p = fs::temp_directory_path() / ("ddp_model_" + std::to_string(::getpid()) + "_" + name + ".pt");
  m.save(p.string());
  return p.string();
}

TEST(Model, DropoutIsDetectedAndSwitchedOffAlone) {
  auto d = std::filesystem::temp_directory_path() / ("ddp_model_dropout_" + std::to_string(::getpid()) + ".pt");
  torch::manual_seed(3);
  ddp::testing::script_mlp_with_dropout(16, 0.1, 0.5).save(d.string());
  ddp::JobConfig job;
  job.model = d.string();
  ddp::Model m(job, {128});
  at::Tensor x = torch::randn({8, 128});
  EXPECT_TRUE(m.forward_is_stochastic(x));
  EXPECT_EQ(m.set_dropout(false), 1);
  EXPECT_FALSE(m.forward_is_stochastic(x));
  EXPECT_EQ(m.set_dropout(true), 1);
  EXPECT_TRUE(m.forward_is_stochastic(x));
  ddp::JobConfig mlp;
  ddp::Model plain(mlp, {128});
  EXPECT_FALSE(plain.forward_is_stochastic(x));
  EXPECT_EQ(plain.set_dropout(false), 0);
  std::filesystem::remove(d);
}

TEST(Model, BuiltInMlpHasTheSeedShape) {
  ddp::JobConfig job;
  ddp::Model m(job, {128});
  auto p = m.named_parameters();
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].first, "fc1.weight");
  EXPECT_EQ(p[0].second.sizes(), (std::vector<int64_t>{512, 128}));
  ddp::NamedTensors acts;
  auto y = m.forward(torch::randn({8, 128}), &acts);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{8, 2}));
  ASSERT_EQ(acts.size(), 3u);
  EXPECT_EQ(acts[1].first, "relu");
  job.model = "mlp-bn";
  ddp::Model bn(job, {128});
  EXPECT_NE(bn.layer_kinds()[1].find("BatchNorm"), std::string::npos);
  EXPECT_EQ(bn.named_buffers().size(), 3u);
}

TEST(Model, TorchScriptFileTrainsThroughTheSameInterface) {
  ddp::JobConfig job;
  job.model = save_script_mlp("ok");
  ddp::Model m(job, {128});
  auto params = m.named_parameters();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].first, "w1");
  auto x = torch::randn({4, 128});
  auto loss = m.forward(x).sum();
  loss.backward();
  for (auto& [k, t] : params) EXPECT_TRUE(t.grad().defined()) << k;
  ddp::NamedTensors acts;
  m.forward(x, &acts);
  ASSERT_EQ(acts.size(), 1u);
  EXPECT_EQ(acts[0].first, "output");
}

TEST(Model, BadModelArgumentsAreClearErrors) {
  ddp::JobConfig job;
  job.model = "/nonexistent/model.pt";
  EXPECT_THROW(ddp::Model(job, {128}), std::invalid_argument);
  fs::path junk = fs::temp_directory_path() / ("ddp_model_junk_" + std::to_string(::getpid()) + ".pt");
  std::ofstream(junk) << "not a zip archive";
  job.model = junk.string();
  try {
    ddp::Model m(job, {128});
    FAIL() << "a junk file must not load";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load TorchScript"), std::string::npos) << e.what();
  }
}
}  // namespace
