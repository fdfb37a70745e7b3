#pragma once
// The files a job names, checked before any rank starts: a --model TorchScript file that is not there, or a
// --resume-from checkpoint that is incomplete or damaged (its sidecar's size and CRC-32), is the user's input and
// ends --record and --check with exit 2 and one line, instead of ranks that fail one by one after training began.
// (The dataset is checked by runtime/data/dataset_cache.h's ensure_dataset.)
#include <string>

#include "runtime/common/job_config.h"

namespace ddp {
bool validate_job_inputs(const JobConfig& job, std::string& error);
}  // namespace ddp
