// Writes a small TorchScript MLP (128 -> 32 -> 2) to the given path, the way a user exports a model from Python with
// torch.jit.script(model).save(path). Used by the integration tests of --model PATH.pt.
#include <iostream>
#include <string>

#include "tests/support/script_mlp.h"

int main(int argc, char** argv) {
  const bool dropout = argc == 3 && std::string(argv[2]) == "--dropout";
  if (argc != 2 && !dropout) {
    std::cerr << "usage: make_script_model OUT.pt [--dropout]\n";
    return 2;
  }
  torch::manual_seed(1);
  (dropout ? ddp::testing::script_mlp_with_dropout(32, 0.08, 0.1) : ddp::testing::script_mlp(32, 0.08)).save(argv[1]);
  return 0;
}
