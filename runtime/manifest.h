#pragma once
// manifest.json: what a reader needs to trust or reproduce a run (versions, device, backend, world size, per-rank
// batch shapes and dtypes, seeds, launch method, the full config, host, start time, clock calibration). Rank 0 writes
// it at start (so a crashed run still has one) and again, complete, at the end. Never holds training data.
#include <string>

#include <nlohmann/json.hpp>

namespace ddp {
std::string host_name();
std::string cpu_model_name();
std::string compiler_version();
std::string iso_time_now();
// Writes JSON to path through a temp file and rename, so readers never see a half-written file.
bool write_json_atomic(const std::string& path, const nlohmann::json& j, std::string& error);
}  // namespace ddp
