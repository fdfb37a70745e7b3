#pragma once
// Our own job's manifest.json (traces/model/manifest.h: the record, its reader and writer): filled from what rank 0
// knows when the ranks have met (so a crashed run still has one), completed with every rank's entry at the end.
// Never holds training data. This file also owns the list of fields the env.manifest check requires.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/job_config.h"
#include "traces/model/manifest.h"

namespace ddp {

// What rank 0 knows when the ranks have met, before training.
struct ManifestStart {
  records::manifest_versions versions;
  records::device_info device;
  records::amp_info amp;
  std::string backend;
  int world_size = 0;
  records::launch_info launch;
  JobConfig job;
  std::vector<int64_t> sample_shape;           // one sample, as the dataset stores it ([F], or [C,H,W] for images)
  std::vector<records::rank_host> rank_hosts;  // per rank, in rank order
  std::string clock_source;
};
Manifest manifest_at_start(const ManifestStart& s);

// Our job's settings as the manifest's config record.
records::job_config job_config_record(const JobConfig& c);
// A batch of inputs of `x_shape` and `y_len` class labels, as our model sees it.
records::batch_spec batch_spec(const std::vector<int64_t>& x_shape, int64_t y_len);
// Adds the ranks' entries (rank order) and the run's totals, and marks the manifest completed.
void complete_manifest(Manifest& m, std::vector<records::manifest_rank> ranks,
                       const std::vector<uint64_t>& gradient_buckets);

// Fields env.manifest requires: JSON pointers into the manifest, and into every entry of "ranks".
const std::vector<std::string>& manifest_required_fields();
const std::vector<std::string>& manifest_rank_required_fields();

}  // namespace ddp
