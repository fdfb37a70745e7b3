#include "runtime/launch/user_job/user_manifest.h"

#include <filesystem>

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

records::script_config config_from_argv(const std::vector<std::string>& argv) {
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
  return {argv.empty() ? "" : argv[0], args, joined};
}

Manifest user_manifest(const std::vector<records::companion_meta>& metas, const std::vector<std::string>& launch) {
  const records::companion_meta& m0 = metas.front();
  Manifest m;
  records::manifest& f = m.fields;
  f.source = "companion";
  // The fields our own manifest names: the framework's version stands where LibTorch's does, the interpreter where
  // the compiler does.
  const records::version_info& v = m0.versions;
  records::manifest_versions versions;
  versions.torch = v.torch;
  versions.python = v.python;
  versions.companion = v.companion;
  versions.libtorch = v.torch;
  versions.compiler = "python " + v.python;
  if (v.cuda) versions.cuda = nlohmann::json(*v.cuda);
  f.versions = versions;
  f.device = m0.device;
  f.backend = m0.backend;
  f.world_size = m0.world_size;
  f.launch = m0.launch;
  f.launch->command = launch;
  f.seeds = m0.seeds;
  f.host = m0.host;
  f.start_time = m0.start_time;
  f.sampler = m0.sampler;
  f.loader = m0.loader;
  f.model = m0.model;
  f.optimizer = m0.optimizer;
  f.scheduler = m0.scheduler;
  f.scaler = m0.scaler;
  f.optimizer_steps = m0.optimizer_steps;
  f.ranks.emplace();
  for (const auto& r : metas) {
    records::manifest_rank e;
    e.rank = r.rank;
    e.host = r.host;
    e.pid = r.pid;
    e.device = records::to_json(r.device);
    e.batch = r.batch;
    e.cpu = r.cpu;
    f.ranks->push_back(std::move(e));
  }
  m.script = config_from_argv(m0.config);
  return m;
}

}  // namespace ddp
