// Writes a small TorchScript MLP (128 -> 32 -> 2) to the given path, the way a user exports a model from Python with
// torch.jit.script(model).save(path). Used by the integration tests of --model PATH.pt.
#include <iostream>

#include "tests/support/script_mlp.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_script_model OUT.pt\n";
    return 2;
  }
  torch::manual_seed(1);
  ddp::testing::script_mlp(32, 0.08).save(argv[1]);
  return 0;
}
