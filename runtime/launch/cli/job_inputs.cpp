#include "runtime/launch/cli/job_inputs.h"

#include <unistd.h>

#include <filesystem>

#include "runtime/common/checkpoint_files.h"

namespace ddp {

bool validate_job_inputs(const JobConfig& job, std::string& error) {
  namespace fs = std::filesystem;
  const bool model_file = job.model.size() > 3 && job.model.compare(job.model.size() - 3, 3, ".pt") == 0;
  std::error_code ec;
  if (model_file && (!fs::is_regular_file(job.model, ec) || ::access(job.model.c_str(), R_OK) != 0)) {
    error = "--model " + job.model + ": no such readable TorchScript file";
    return false;
  }
  if (!job.resume_from.empty() && !verify_checkpoint_files(job.resume_from, job.nproc, error)) {
    error = "--resume-from: " + error;
    return false;
  }
  return true;
}

}  // namespace ddp
