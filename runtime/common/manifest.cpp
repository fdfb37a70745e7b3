#include "runtime/common/manifest.h"

#include "runtime/common/host_info.h"

namespace ddp {

records::batch_spec batch_spec(const std::vector<int64_t>& x_shape, int64_t y_len) {
  records::batch_spec b;
  b.x = records::tensor_spec{x_shape, "float32"};
  b.y = records::tensor_spec{{y_len}, "int64"};
  return b;
}

records::job_config job_config_record(const JobConfig& c) {
  records::job_config r;
  r.dataset = c.dataset;
  r.data_path = c.data_path;
  r.dataset_size = c.dataset_size;
  r.features = c.features;
  r.workers = c.workers;
  r.prefetch = c.prefetch;
  r.pinned = c.pinned;
  r.shuffle = c.shuffle;
  r.drop_last = c.drop_last;
  r.model = c.model;
  r.hidden = c.hidden;
  r.classes = c.classes;
  r.loss_reduction = c.loss_reduction;
  r.lr = c.lr;
  r.optimizer = "AdamW";
  r.batch_size = c.batch_size;
  r.epochs = c.epochs;
  r.max_steps = c.max_steps;
  r.accum_steps = c.accum_steps;
  r.sync_every_step = c.sync_every_step;
  r.bucket_mb = c.bucket_mb;
  r.amp = c.amp;
  r.seed = c.seed;
  r.nproc = c.nproc;
  r.pin_cpus = c.pin_cpus;
  r.batch_sched = c.batch_sched;
  r.comm_poll_us = c.comm_poll_us;
  r.device = c.device;
  r.backend = c.backend;
  r.record = c.record;
  r.cuda_trace = c.cuda_trace;
  for (const SlowSpec& s : c.slow) r.slow.push_back(records::slow_spec{s.rank, std::string(stage_name(s.stage)), s.ms});
  r.hang_timeout_s = c.hang_timeout_s;
  r.checkpoint_steps = c.checkpoint_steps;
  r.resume_from = c.resume_from;
  r.verify_steps = c.verify_steps;
  r.plant = c.plant;
  if (c.fault.rank >= 0) r.inject_fault = records::fault_spec{c.fault.rank, c.fault.step, c.fault.kind};
  return r;
}

Manifest manifest_at_start(const ManifestStart& s) {
  std::vector<int64_t> x_shape = {s.job.batch_size};
  x_shape.insert(x_shape.end(), s.sample_shape.begin(), s.sample_shape.end());
  Manifest m;
  records::manifest& f = m.fields;
  f.tool = "ddp_profile";
  f.versions = s.versions;
  f.device = s.device;
  f.amp = s.amp;
  f.backend = s.backend;
  f.world_size = s.world_size;
  f.launch = s.launch;
  f.seeds = nlohmann::json{{"data", s.job.seed}, {"weights", s.job.seed}, {"sampler", s.job.seed}};
  f.expected_batch = batch_spec(x_shape, s.job.batch_size);
  f.host = host_name();
  f.start_time = iso_time_now();
  f.status = "running";
  f.clock = records::manifest_clock{s.clock_source, "ping-pong over the process group, min round trip", {}};
  f.rank_hosts = s.rank_hosts;
  m.job = job_config_record(s.job);
  return m;
}

void complete_manifest(Manifest& m, std::vector<records::manifest_rank> ranks,
                       const std::vector<uint64_t>& gradient_buckets) {
  records::manifest& f = m.fields;
  if (!ranks.empty()) f.param_bytes = ranks.front().param_bytes;
  f.ranks = std::move(ranks);
  f.gradient_buckets = std::vector<int64_t>(gradient_buckets.begin(), gradient_buckets.end());
  f.end_time = iso_time_now();
  f.status = "completed";
}

const std::vector<std::string>& manifest_required_fields() {
  static const std::vector<std::string> f = {"/versions/libtorch",
                                             "/versions/compiler",
                                             "/device/type",
                                             "/device/name",
                                             "/backend",
                                             "/world_size",
                                             "/launch/method",
                                             "/seeds/data",
                                             "/seeds/weights",
                                             "/seeds/sampler",
                                             "/config",
                                             "/host",
                                             "/start_time",
                                             "/ranks"};
  return f;
}

const std::vector<std::string>& manifest_rank_required_fields() {
  static const std::vector<std::string> f = {"/batch/x/shape", "/batch/x/dtype", "/batch/y/shape",
                                             "/batch/y/dtype", "/host",          "/device"};
  return f;
}

}  // namespace ddp
