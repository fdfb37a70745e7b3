#pragma once
// A small TorchScript MLP (128 -> hidden -> 2), built the way torch.jit.script(model) compiles one, for the tests of
// `--model PATH.pt`: one definition, so the unit tests and the integration tests' model file cannot drift apart.
#include <torch/script.h>

namespace ddp::testing {

inline torch::jit::Module script_mlp(int64_t hidden, double w1_scale) {
  torch::jit::Module m("UserMlp");
  m.register_parameter("w1", torch::randn({128, hidden}) * w1_scale, false);
  m.register_parameter("b1", torch::zeros({hidden}), false);
  m.register_parameter("w2", torch::randn({hidden, 2}) * 0.1, false);
  m.register_parameter("b2", torch::zeros({2}), false);
  m.define(R"(
def forward(self, x):
    h = torch.relu(torch.mm(x, self.w1) + self.b1)
    return torch.mm(h, self.w2) + self.b2
)");
  return m;
}

// The same MLP with an nn.Dropout(p) after the hidden layer, as torch.jit.script compiles one: a submodule of type
// Dropout with a `training` flag, whose forward calls torch.dropout.
inline torch::jit::Module script_mlp_with_dropout(int64_t hidden, double w1_scale, double p) {
  torch::jit::Module drop("Dropout");
  drop.register_attribute("training", c10::BoolType::get(), true);
  drop.register_attribute("p", c10::FloatType::get(), p);
  drop.define(R"(
def forward(self, x):
    return torch.dropout(x, self.p, self.training)
)");
  torch::jit::Module m("UserMlpDropout");
  m.register_attribute("training", c10::BoolType::get(), true);
  m.register_parameter("w1", torch::randn({128, hidden}) * w1_scale, false);
  m.register_parameter("b1", torch::zeros({hidden}), false);
  m.register_parameter("w2", torch::randn({hidden, 2}) * 0.1, false);
  m.register_parameter("b2", torch::zeros({2}), false);
  m.register_module("drop", drop);
  m.define(R"(
def forward(self, x):
    h = self.drop.forward(torch.relu(torch.mm(x, self.w1) + self.b1))
    return torch.mm(h, self.w2) + self.b2
)");
  return m;
}

}  // namespace ddp::testing
