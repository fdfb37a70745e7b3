#pragma once
#include <string>

#include "runtime/job_config.h"

namespace ddp {
// runs/<YYYYmmdd-HHMMSS> under the current directory.
std::string default_run_dir();
// <parent of the run folder>/data-cache/synthetic-n<N>-f<F>-seed<S>.ddpd: shared by runs, written once.
std::string default_data_path(const std::string& run_dir, const JobConfig& job);
// Creates DIR, DIR/progress and DIR/logs. Returns false with `error` set.
bool prepare_run_dir(const std::string& dir, std::string& error);
std::string absolute_path(const std::string& p);
// Makes sure the dataset file exists (generating the synthetic one if missing) and is readable.
bool ensure_dataset(const JobConfig& job, std::string& error, bool verbose);
}  // namespace ddp
