#pragma once
// A complete manifest of our own job, as runtime/common/manifest.cpp writes one (rank 0 at the end of a run), for
// tests that make run folders by hand: every required field of records.def's manifest and job_config, so the strict
// reader (traces/model/manifest.h) reads it. Tests change what they test on the JSON (a config value, the backend).
#include <string>

#include <nlohmann/json.hpp>

namespace ddp::testing {

// Our job's settings at JobConfig's defaults (runtime/common/job_config.h).
inline nlohmann::json default_job_config_json() {
  return {{"dataset", "synthetic"},
          {"data_path", "data.ddpd"},
          {"dataset_size", 10000},
          {"features", 128},
          {"workers", 2},
          {"prefetch", 2},
          {"pinned", true},
          {"shuffle", true},
          {"drop_last", true},
          {"model", "mlp"},
          {"hidden", 512},
          {"classes", 2},
          {"loss_reduction", "mean"},
          {"lr", 0.001},
          {"optimizer", "AdamW"},
          {"batch_size", 64},
          {"epochs", 2},
          {"max_steps", 0},
          {"accum_steps", 1},
          {"sync_every_step", false},
          {"bucket_mb", 25.0},
          {"amp", "auto"},
          {"seed", 0},
          {"nproc", 2},
          {"pin_cpus", true},
          {"batch_sched", true},
          {"comm_poll_us", 500},
          {"device", "auto"},
          {"backend", "auto"},
          {"record", true},
          {"cuda_trace", "api"},
          {"slow", nlohmann::json::array()},
          {"hang_timeout_s", 0.0},
          {"checkpoint_steps", nlohmann::json::array()},
          {"resume_from", ""},
          {"verify_steps", 0},
          {"plant", nlohmann::json::array()}};
}

// A completed run of `world` ranks on one CPU host.
inline nlohmann::json our_job_manifest_json(int world = 2) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < world; ++r)
    ranks.push_back(
        {{"rank", r},
         {"host", "vm"},
         {"pid", 1000 + r},
         {"device", "cpu"},
         {"batch",
          {{"x", {{"shape", {64, 128}}, {"dtype", "float32"}}}, {"y", {{"shape", {64}}, {"dtype", "int64"}}}}}});
  nlohmann::json config = default_job_config_json();
  config["nproc"] = world;
  return {{"tool", "ddp_profile"},
          {"versions", {{"libtorch", "1.13.0"}, {"compiler", "g++ 12.2.0"}, {"ddp_profile", "0.1.0"}}},
          {"device", {{"type", "cpu"}, {"name", "Some CPU"}}},
          {"backend", "gloo"},
          {"world_size", world},
          {"launch", {{"method", "supervisor"}, {"master_addr", "127.0.0.1"}}},
          {"seeds", {{"data", 0}, {"weights", 0}, {"sampler", 0}}},
          {"config", config},
          {"host", "vm"},
          {"start_time", "2026-01-01T00:00:00Z"},
          {"end_time", "2026-01-01T00:01:00Z"},
          {"status", "completed"},
          {"ranks", ranks}};
}

}  // namespace ddp::testing
