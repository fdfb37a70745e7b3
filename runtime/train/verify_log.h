#pragma once
// What a rank records so its run can be verified afterwards (the --check ladder, --diff): the dataset indices of
// every micro-batch it consumed, a hash of its parameters after every optimizer step, and for the first few steps
// the tensors themselves (pre-step parameters, per-layer activations, synced gradients) plus per-layer summaries
// (count, mean, std, min, max, L2 norm, hash). Never the training data itself. Enabled with --verify-steps N.
#include <ATen/ATen.h>

#include <cstdio>
#include <string>
#include <vector>

#include "traces/model/records.h"

namespace ddp {

std::string tensors_hash(const std::vector<at::Tensor>& ts);
records::tensor_stats tensor_summary(const at::Tensor& t);

class VerifyLog {
 public:
  ~VerifyLog();
  void open(const std::string& run_dir, int rank, int64_t dump_steps);
  bool enabled() const { return samples_ != nullptr; }
  bool dumping(int64_t step) const { return enabled() && step < dump_steps_; }

  void batch(int epoch, int64_t step, int micro, int64_t batch, const std::vector<int64_t>& indices);
  void replica(int64_t step, const std::string& param_hash);  // step -1: after the initial broadcast
  // After optimizer step `step`: the memory the rank holds (memory.steady): resident, and on CUDA allocated.
  void memory(int64_t step, const at::Device& device);
  // One dumped step: named pre-step parameters, per micro-step the named layer outputs, named synced gradients.
  void dump_step(int64_t step, const std::vector<std::pair<std::string, at::Tensor>>& params,
                 const std::vector<std::vector<std::pair<std::string, at::Tensor>>>& acts,
                 const std::vector<std::pair<std::string, at::Tensor>>& grads);

 private:
  std::string dir_;
  int rank_ = 0;
  int64_t dump_steps_ = 0;
  FILE* samples_ = nullptr;
  FILE* replicas_ = nullptr;
  FILE* summaries_ = nullptr;
  FILE* training_ = nullptr;
};

}  // namespace ddp
