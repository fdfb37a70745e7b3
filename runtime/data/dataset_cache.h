#pragma once
// Where a job's dataset lives when the user names none, and making sure it is there before ranks open it.
#include <string>

#include "runtime/common/job_config.h"

namespace ddp {
// <parent of the run folder>/data-cache/synthetic-n<N>-f<F>-seed<S>.ddpd: shared by runs, written once.
std::string default_data_path(const std::string& run_folder, const JobConfig& job);
// Makes sure the dataset file exists (generating the synthetic one if missing) and is readable.
bool ensure_dataset(const JobConfig& job, std::string& error, bool verbose);
}  // namespace ddp
