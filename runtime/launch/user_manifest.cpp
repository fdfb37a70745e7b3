#include "runtime/launch/user_manifest.h"

#include <fstream>

#include "runtime/common/json_file.h"
#include "traces/model/run_folder.h"

namespace ddp {

std::vector<nlohmann::json> read_user_metas(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  for (int r = 0; r < static_cast<int>(kMaxWorldSize); ++r) {
    std::ifstream in(in_run(run_dir, companion_meta_file(r)));
    if (!in) break;
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) break;
    out.push_back(std::move(j));
  }
  return out;
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

nlohmann::json user_manifest(const std::vector<nlohmann::json>& metas, const std::vector<std::string>& launch) {
  const nlohmann::json& m0 = metas.front();
  auto get = [&](const char* k) { return m0.contains(k) ? m0[k] : nlohmann::json(); };
  nlohmann::json versions = get("versions");
  if (!versions.is_object()) versions = nlohmann::json::object();
  // The fields our own manifest names: the framework's version stands where LibTorch's does, the interpreter where
  // the compiler does.
  versions["libtorch"] = versions.value("torch", "unknown");
  versions["compiler"] = "python " + versions.value("python", std::string("unknown"));
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& m : metas)
    ranks.push_back({{"rank", m.value("rank", -1)},
                     {"host", m.value("host", "")},
                     {"pid", m.value("pid", 0)},
                     {"device", m.contains("device") ? m["device"] : nlohmann::json()},
                     {"batch", m.contains("batch") ? m["batch"] : nlohmann::json()}});
  nlohmann::json launch_j = get("launch");
  if (!launch_j.is_object()) launch_j = nlohmann::json::object();
  launch_j["command"] = launch;
  nlohmann::json config = config_from_argv(m0.value("config", std::vector<std::string>{}));
  return {{"source", "companion"},
          {"versions", versions},
          {"device", get("device")},
          {"backend", get("backend")},
          {"world_size", m0.value("world_size", static_cast<int>(metas.size()))},
          {"launch", launch_j},
          {"seeds", get("seeds")},
          {"config", config},
          {"host", m0.value("host", "")},
          {"start_time", get("start_time")},
          {"sampler", get("sampler")},
          {"loader", get("loader")},
          {"model", get("model")},
          {"optimizer", get("optimizer")},
          {"scheduler", get("scheduler")},
          {"scaler", get("scaler")},
          {"optimizer_steps", get("optimizer_steps")},
          {"ranks", ranks}};
}

bool write_user_manifest(const std::string& run_dir, const std::vector<std::string>& launch, std::string& error) {
  std::vector<nlohmann::json> metas = read_user_metas(run_dir);
  if (metas.empty()) {
    error = "no rank called ddp_profile.attach";
    return false;
  }
  return write_json_atomic(in_run(run_dir, kManifestFile), user_manifest(metas, launch), error);
}

}  // namespace ddp
