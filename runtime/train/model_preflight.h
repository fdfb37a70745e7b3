#pragma once
// Before any rank starts: the job's model run once, on one batch of zeros shaped as its data's samples, so that a
// model that cannot take the data (its forward rejects the shape) or answers with the wrong number of classes is one
// line and exit 2 from the supervisor, not the same failure on every rank (and every rung of a --check ladder).
#include <string>

#include "runtime/common/job_config.h"

namespace ddp {

// True when the model takes the data's samples and returns [batch, classes]; else false with `error` saying which
// model, which data and what went wrong. A dataset that does not exist yet (generated on the first run) is not
// checked here: it is ours, and so is its shape.
bool preflight_model(const JobConfig& job, std::string& error);

}  // namespace ddp
