// Writes a small TorchScript MLP (128 -> 32 -> 2) to the given path, the way a user exports a model from Python with
// torch.jit.script(model).save(path). Used by the integration tests of --model PATH.pt.
#include <torch/script.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_script_model OUT.pt\n";
    return 2;
  }
  torch::manual_seed(1);
  torch::jit::Module m("UserMlp");
  m.register_parameter("w1", torch::randn({128, 32}) * 0.08, false);
  m.register_parameter("b1", torch::zeros({32}), false);
  m.register_parameter("w2", torch::randn({32, 2}) * 0.1, false);
  m.register_parameter("b2", torch::zeros({2}), false);
  m.define(R"(
def forward(self, x):
    h = torch.relu(torch.mm(x, self.w1) + self.b1)
    return torch.mm(h, self.w2) + self.b2
)");
  m.save(argv[1]);
  return 0;
}
