#pragma once
// Where a job's dataset lives when the user names none, and making sure it is there before ranks open it.
#include <string>

#include "runtime/common/job_config.h"

namespace ddp {
// <parent of the run folder>/data-cache/synthetic-n<N>-f<F>-seed<S>.ddpd: shared by runs, written once.
std::string default_data_path(const std::string& run_folder, const JobConfig& job);
// Whether a missing dataset may be generated: only at the default cache path. A path the user typed must exist (a
// typo must not silently train on random data).
enum class DatasetPath { user_given, default_cache };
// Before the default is filled in: --data PATH and --dataset images:PATH are the user's.
DatasetPath dataset_path_source(const JobConfig& job);
// Makes sure the dataset exists (generating the synthetic one at the default cache path if missing) and is readable.
bool ensure_dataset(const JobConfig& job, DatasetPath where, std::string& error, bool verbose);
}  // namespace ddp
