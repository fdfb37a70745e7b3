#pragma once
// A checkpoint's files, without LibTorch: where rank R's file and its sidecar (byte count, CRC-32, items) lie, whether
// a checkpoint folder is whole and undamaged, and a run's latest complete checkpoint. The supervisor and --check use
// them to refuse a damaged --resume-from before any rank starts; a restarted torchrun worker group uses them to find
// where to resume. Reading the tensors is runtime/train/checkpoint.h's job.
#include <cstdint>
#include <string>
#include <vector>

namespace ddp {

std::string checkpoint_dir(const std::string& run_dir, int64_t step);  // RUN/checkpoints/step<k>
std::string checkpoint_file(const std::string& ckpt_dir, int rank);    // CKPT/rank<R>.pt
std::string checkpoint_sidecar(const std::string& rank_file);          // CKPT/rank<R>.pt.json

// Every rank's file in [0, world) is there, its sidecar reads (records.def's checkpoint_sidecar), and size and CRC-32
// match. False with `error` naming the first file that does not.
bool verify_checkpoint_files(const std::string& ckpt_dir, int world, std::string& error);
// The same for one file's bytes, read already: false with `error` naming the file, and the sidecar's field.
bool verify_checkpoint_bytes(const std::string& file, const std::vector<char>& bytes, std::string& error);

// The highest step<k> under RUN/checkpoints whose files for all `world` ranks are present with their sidecars (a
// sidecar is written after its file, so its presence means the file is whole). "" when there is none.
std::string latest_complete_checkpoint(const std::string& run_dir, int world);

}  // namespace ddp
