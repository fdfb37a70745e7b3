#include "runtime/data/dataset_cache.h"

#include <filesystem>
#include <iostream>

#include "runtime/data/dataset_file.h"
#include "runtime/data/image_dataset.h"

namespace ddp {
namespace fs = std::filesystem;

std::string default_data_path(const std::string& run_dir, const JobConfig& job) {
  if (job.dataset.rfind("images:", 0) == 0) return job.dataset.substr(7);
  fs::path parent = fs::absolute(run_dir).lexically_normal().parent_path();
  if (job.dataset == "images")
    return (parent / "data-cache" /
            ("images-n" + std::to_string(job.dataset_size) + "-seed" + std::to_string(job.seed)))
        .string();
  return (parent / "data-cache" /
          ("synthetic-n" + std::to_string(job.dataset_size) + "-f" + std::to_string(job.features) + "-seed" +
           std::to_string(job.seed) + ".ddpd"))
      .string();
}

DatasetPath dataset_path_source(const JobConfig& job) {
  const bool named = !job.data_path.empty() || job.dataset.rfind("images:", 0) == 0;
  return named ? DatasetPath::user_given : DatasetPath::default_cache;
}

bool ensure_dataset(const JobConfig& job, DatasetPath where, std::string& error, bool verbose) {
  std::error_code ec;
  if (where == DatasetPath::user_given && !fs::exists(job.data_path, ec)) {
    error = "dataset " + job.data_path + " does not exist";
    return false;
  }
  if (is_image_dataset(job)) {
    if (!fs::exists(fs::path(job.data_path) / "index.txt", ec)) {
      if (verbose)
        std::cout << "generating " << job.dataset_size << " synthetic images -> " << job.data_path << std::endl;
      if (!write_synthetic_images(job.data_path, job.dataset_size, job.seed, error)) return false;
    }
    return open_dataset(job, error) != nullptr;
  }
  if (!fs::exists(job.data_path, ec)) {
    if (job.dataset != "synthetic") {
      error = "dataset file " + job.data_path + " does not exist";
      return false;
    }
    fs::create_directories(fs::path(job.data_path).parent_path(), ec);
    if (verbose)
      std::cout << "generating synthetic dataset " << job.dataset_size << " x " << job.features << " -> "
                << job.data_path << std::endl;
    if (!write_synthetic_dataset(job.data_path, job.dataset_size, job.features, job.seed, error)) return false;
  }
  DatasetFile f;
  if (!f.open(job.data_path, error)) return false;
  // The default cache file is named by --features; a user's file says its own shape (fit_job_to_dataset).
  if (where == DatasetPath::default_cache && f.features() != job.features) {
    error = job.data_path + " has " + std::to_string(f.features()) + " features, the job expects " +
            std::to_string(job.features) + " (--features)";
    return false;
  }
  return true;
}

}  // namespace ddp
