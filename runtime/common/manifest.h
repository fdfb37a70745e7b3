#pragma once
// manifest.json: what a reader needs to trust or reproduce a run (versions, device, backend, world size, per-rank
// batch shapes and dtypes, seeds, launch method, the full config, host, start time, clock calibration). Rank 0 writes
// it at start (so a crashed run still has one) and again, complete, at the end. Never holds training data. This file
// builds it and owns the list of fields the env.manifest check requires.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/common/job_config.h"

namespace ddp {

// What rank 0 knows when the ranks have met, before training.
struct ManifestStart {
  nlohmann::json versions;
  std::string device_type, device_name, device_plan;
  bool shared_gpu = false;
  std::string amp_dtype, amp_reason;
  bool loss_scaler = false;
  std::string backend;
  int world_size = 0;
  std::string launch_method, master_addr;
  std::string rendezvous_from;  // how the rendezvous was found (LaunchEnv::rendezvous_from)
  JobConfig job;
  std::vector<int64_t> sample_shape;  // one sample, as the dataset stores it ([F], or [C,H,W] for images)
  nlohmann::json rank_hosts;          // [{host, pid, cpus}] per rank
  std::string clock_source;
};
nlohmann::json manifest_at_start(const ManifestStart& s);

// One rank's entry in "ranks", added at the end of the run. `batch` is the first batch as the model saw it.
nlohmann::json batch_json(const std::vector<int64_t>& x_shape, int64_t y_len);
// Adds the ranks' entries (rank order) and the run's totals, and marks the manifest completed.
void complete_manifest(nlohmann::json& m, const std::vector<nlohmann::json>& ranks,
                       const std::vector<uint64_t>& gradient_buckets);

// Fields env.manifest requires: JSON pointers into the manifest, and into every entry of "ranks".
const std::vector<std::string>& manifest_required_fields();
const std::vector<std::string>& manifest_rank_required_fields();

}  // namespace ddp
