#include "runtime/common/manifest.h"

#include "runtime/common/host_info.h"

namespace ddp {

nlohmann::json batch_json(const std::vector<int64_t>& x_shape, int64_t y_len) {
  return {{"x", {{"shape", x_shape}, {"dtype", "float32"}}}, {"y", {{"shape", {y_len}}, {"dtype", "int64"}}}};
}

nlohmann::json manifest_at_start(const ManifestStart& s) {
  std::vector<int64_t> x_shape = {s.job.batch_size};
  x_shape.insert(x_shape.end(), s.sample_shape.begin(), s.sample_shape.end());
  nlohmann::json m = {
      {"tool", "ddp_profile"},
      {"versions", s.versions},
      {"device",
       {{"type", s.device_type}, {"name", s.device_name}, {"plan", s.device_plan}, {"shared_gpu", s.shared_gpu}}},
      {"amp", {{"dtype", s.amp_dtype}, {"loss_scaler", s.loss_scaler}, {"reason", s.amp_reason}}},
      {"backend", s.backend},
      {"world_size", s.world_size},
      {"launch", {{"method", s.launch_method}, {"master_addr", s.master_addr}, {"rendezvous_from", s.rendezvous_from}}},
      {"seeds", {{"data", s.job.seed}, {"weights", s.job.seed}, {"sampler", s.job.seed}}},
      {"config", to_json(s.job)},
      {"expected_batch", batch_json(x_shape, s.job.batch_size)},
      {"host", host_name()},
      {"start_time", iso_time_now()},
      {"status", "running"},
      {"clock", {{"source", s.clock_source}, {"sync", "ping-pong over the process group, min round trip"}}}};
  m["config"]["data_path"] = s.job.data_path;
  m["rank_hosts"] = s.rank_hosts;
  return m;
}

void complete_manifest(nlohmann::json& m, const std::vector<nlohmann::json>& ranks,
                       const std::vector<uint64_t>& gradient_buckets) {
  m["ranks"] = ranks;
  m["gradient_buckets"] = gradient_buckets;
  m["param_bytes"] = ranks.empty() ? nlohmann::json(nullptr) : ranks[0]["param_bytes"];
  m["end_time"] = iso_time_now();
  m["status"] = "completed";
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
