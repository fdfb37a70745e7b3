#pragma once
// Checkpoints hold everything a rank needs to resume exactly: model parameters and buffers, AdamW state (moments and
// step counts), loss-scaler state, epoch / optimizer step / batches consumed in the epoch (the sampler's position),
// and the RNG state of every generator the rank uses. One file per rank, a pickled dict of tensors and numbers that
// Python reads with torch.load(path, weights_only=True). Written to a temp file then renamed; a sidecar JSON lists
// the items and the file's CRC-32, verified on load.
#include <torch/optim/adamw.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/checkpoint_files.h"  // the names of its files, its sidecar
#include "runtime/train/loss_scaler.h"
#include "runtime/train/model.h"

namespace ddp {

struct TrainPosition {
  int64_t epoch = 0;
  int64_t global_step = 0;       // optimizer steps completed
  int64_t batches_in_epoch = 0;  // micro-batches of `epoch` already consumed
};

// Writes rank `rank`'s checkpoint into ckpt_dir. `omit` names top-level items to leave out (planted faults).
void save_checkpoint(const std::string& ckpt_dir, int rank, int world, uint64_t seed, Model& model,
                     torch::optim::AdamW& opt, const LossScalerState& scaler, const TrainPosition& pos,
                     const std::vector<std::string>& omit = {});

// Restores into model/opt; returns the position to continue from. Throws with a clear message when the file is
// missing, damaged (checksum), from another world size, or lacks an item.
TrainPosition load_checkpoint(const std::string& ckpt_dir, int rank, int world, Model& model, torch::optim::AdamW& opt,
                              LossScalerState& scaler);

// The items a complete checkpoint holds, as "path" strings (e.g. "optimizer.state.fc1.weight.step"); and what one
// file actually holds. Used by the checkpoint.complete check.
std::vector<std::string> expected_checkpoint_items(Model& model);
std::vector<std::string> checkpoint_items(const std::string& file);

}  // namespace ddp
