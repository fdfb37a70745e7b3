#include "runtime/common/job_config.h"

namespace ddp {
nlohmann::json to_json(const JobConfig& c) {
  nlohmann::json slow = nlohmann::json::array();
  for (const auto& s : c.slow) slow.push_back({{"rank", s.rank}, {"stage", stage_name(s.stage)}, {"ms", s.ms}});
  nlohmann::json j = {{"dataset", c.dataset},
                      {"data_path", c.data_path},
                      {"dataset_size", c.dataset_size},
                      {"features", c.features},
                      {"workers", c.workers},
                      {"prefetch", c.prefetch},
                      {"pinned", c.pinned},
                      {"shuffle", c.shuffle},
                      {"drop_last", c.drop_last},
                      {"model", c.model},
                      {"hidden", c.hidden},
                      {"classes", c.classes},
                      {"loss_reduction", c.loss_reduction},
                      {"lr", c.lr},
                      {"optimizer", "AdamW"},
                      {"batch_size", c.batch_size},
                      {"epochs", c.epochs},
                      {"max_steps", c.max_steps},
                      {"accum_steps", c.accum_steps},
                      {"sync_every_step", c.sync_every_step},
                      {"bucket_mb", c.bucket_mb},
                      {"amp", c.amp},
                      {"seed", c.seed},
                      {"nproc", c.nproc},
                      {"pin_cpus", c.pin_cpus},
                      {"batch_sched", c.batch_sched},
                      {"comm_poll_us", c.comm_poll_us},
                      {"device", c.device},
                      {"backend", c.backend},
                      {"record", c.record},
                      {"cuda_trace", c.cuda_trace},
                      {"slow", slow},
                      {"hang_timeout_s", c.hang_timeout_s},
                      {"checkpoint_steps", c.checkpoint_steps},
                      {"resume_from", c.resume_from},
                      {"verify_steps", c.verify_steps},
                      {"plant", c.plant}};
  if (c.fault.rank >= 0) j["inject_fault"] = {{"rank", c.fault.rank}, {"step", c.fault.step}, {"kind", c.fault.kind}};
  return j;
}
}  // namespace ddp
