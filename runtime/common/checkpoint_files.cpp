#include "runtime/common/checkpoint_files.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/base/crc32.h"
#include "traces/base/parse_int.h"
#include "traces/model/records.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;

std::string checkpoint_dir(const std::string& run_dir, int64_t step) {
  return in_run(run_dir, checkpoint_folder(step));
}
std::string checkpoint_file(const std::string& ckpt_dir, int rank) {
  return in_run(ckpt_dir, checkpoint_rank_file(rank));
}
std::string checkpoint_sidecar(const std::string& rank_file) { return rank_file + ".json"; }

bool verify_checkpoint_files(const std::string& ckpt_dir, int world, std::string& error) {
  std::error_code ec;
  if (!fs::is_directory(ckpt_dir, ec)) {
    error = "checkpoint folder " + ckpt_dir + " does not exist";
    return false;
  }
  for (int r = 0; r < world; ++r) {
    const std::string file = checkpoint_file(ckpt_dir, r);
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      error = "checkpoint " + file + " is missing (the run has " + std::to_string(world) + " ranks)";
      return false;
    }
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!verify_checkpoint_bytes(file, bytes, error)) return false;
  }
  return true;
}

bool verify_checkpoint_bytes(const std::string& file, const std::vector<char>& bytes, std::string& error) {
  records::checkpoint_sidecar side;
  std::string why;
  if (!read_record_file(checkpoint_sidecar(file), side, why))
    return error = "checkpoint " + file + " has no valid sidecar: " + why, false;
  if (side.bytes != bytes.size() || side.crc32 != crc32(bytes.data(), bytes.size()))
    return error = "checkpoint " + file + " is damaged (checksum mismatch)", false;
  return true;
}

std::string latest_complete_checkpoint(const std::string& run_dir, int world) {
  const fs::path root = fs::path(checkpoint_dir(run_dir, 0)).parent_path();
  std::error_code ec;
  int64_t best = -1;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int64_t step = -1;
    if (name.rfind("step", 0) != 0 || !parse_decimal(std::string_view(name).substr(4), step) || step < 0) continue;
    if (fs::path(checkpoint_folder(step)).filename() != name) continue;  // e.g. "step007": not a name we write
    bool whole = true;
    for (int r = 0; r < world && whole; ++r)
      whole = fs::exists(checkpoint_sidecar(checkpoint_file(it->path().string(), r)), ec);
    if (whole && step > best) best = step;
  }
  return best < 0 ? std::string() : checkpoint_dir(run_dir, best);
}

}  // namespace ddp
