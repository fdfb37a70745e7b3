#include "runtime/launch/user_job/user_manifest.h"

#include <filesystem>

#include "runtime/common/json_file.h"
#include "traces/model/run_folder.h"

namespace ddp {

bool read_user_metas(const std::string& run_dir, std::vector<records::companion_meta>& out, std::string& error) {
  out.clear();
  for (int r = 0; r < static_cast<int>(kMaxWorldSize); ++r) {
    const std::string path = in_run(run_dir, companion_meta_file(r));
    if (!std::filesystem::exists(path)) break;
    records::companion_meta m;
    if (!read_record_file(path, m, error)) return false;
    out.push_back(std::move(m));
  }
  return true;
}

nlohmann::json config_from_argv(const std::vector<std::string>& argv) {
  nlohmann::json args = nlohmann::json::object();
  std::string joined;
  for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
  int positional = 0;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      const size_t eq = a.find('=');
      if (eq != std::string::npos)
        args[a.substr(0, eq)] = a.substr(eq + 1);
      else if (i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0)
        args[a] = argv[++i];
      else
        args[a] = true;
    } else {
      args["positional." + std::to_string(positional++)] = a;
    }
  }
  return {{"script", argv.empty() ? "" : argv[0]}, {"args", args}, {"argv", joined}};
}

namespace {
nlohmann::json json_of(const records::sampler_info& s) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"class", opt(s.class_name)},
          {"is_distributed", s.is_distributed},
          {"dataset_size", opt(s.dataset_size)},
          {"shuffle", opt(s.shuffle)},
          {"seed", opt(s.seed)},
          {"drop_last", opt(s.drop_last)},
          {"num_replicas", opt(s.num_replicas)},
          {"rank", opt(s.rank)}};
}
}  // namespace

nlohmann::json user_manifest(const std::vector<records::companion_meta>& metas,
                             const std::vector<std::string>& launch) {
  const records::companion_meta& m0 = metas.front();
  // The fields our own manifest names: the framework's version stands where LibTorch's does, the interpreter where
  // the compiler does.
  const records::version_info& v = m0.versions;
  nlohmann::json versions = {{"torch", v.torch},
                             {"python", v.python},
                             {"companion", v.companion},
                             {"libtorch", v.torch},
                             {"compiler", "python " + v.python},
                             {"cuda", v.cuda ? nlohmann::json(*v.cuda) : nlohmann::json()}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& m : metas)
    ranks.push_back({{"rank", m.rank},
                     {"host", m.host},
                     {"pid", m.pid},
                     {"device", m.device},
                     {"batch", m.batch ? *m.batch : nlohmann::json()}});
  nlohmann::json launch_j = m0.launch.is_object() ? m0.launch : nlohmann::json::object();
  launch_j["command"] = launch;
  return {{"source", "companion"},
          {"versions", versions},
          {"device", m0.device},
          {"backend", m0.backend},
          {"world_size", m0.world_size},
          {"launch", launch_j},
          {"seeds", m0.seeds},
          {"config", config_from_argv(m0.config)},
          {"host", m0.host},
          {"start_time", m0.start_time},
          {"sampler", json_of(m0.sampler)},
          {"loader", m0.loader},
          {"model", m0.model},
          {"optimizer", m0.optimizer},
          {"scheduler", m0.scheduler ? nlohmann::json(*m0.scheduler) : nlohmann::json()},
          {"scaler", m0.scaler},
          {"optimizer_steps", m0.optimizer_steps},
          {"ranks", ranks}};
}

bool write_user_manifest(const std::string& run_dir, const std::vector<std::string>& launch, std::string& error) {
  std::vector<records::companion_meta> metas;
  if (!read_user_metas(run_dir, metas, error)) return false;
  if (metas.empty()) {
    error = "no rank called ddp_profile.attach";
    return false;
  }
  return write_json_atomic(in_run(run_dir, kManifestFile), user_manifest(metas, launch), error);
}

}  // namespace ddp
