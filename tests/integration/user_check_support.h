#pragma once
// The user's script under `ddp_profile --check -- LAUNCH...` with the venv's real torchrun (skipped without it):
// the launch command, one ladder run and its checks.json, shared by the user-check test files.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "integration_support.h"
#include "torch_venv.h"

namespace ddptest::user_check {

inline const std::string kExamples = std::string(DDP_SOURCE_DIR) + "/examples";
inline const std::string kScripts = std::string(DDP_SOURCE_DIR) + "/tests/python/user_scripts";

inline std::map<std::string, std::string> companion_env(const std::string& torchrun) {
  auto env = ddptest::venv_env(torchrun);
  env["PYTHONPATH"] = std::string(DDP_SOURCE_DIR) + "/python";  // the companion from this checkout, not installed
  return env;
}

// Whether the venv beside `torchrun` imports `module`.
inline bool venv_has(const std::string& torchrun, const std::string& module) {
  const std::string py = std::filesystem::path(torchrun).parent_path() / "python";
  const std::string log = ddptest::fresh_dir("import_" + module) + ".log";
  return ddptest::run({py, "-c", "import " + module}, log, 120, ddptest::venv_env(torchrun)).code == 0;
}

// torchrun with a port of its own; `own_port` false leaves the choice to ddp_profile (a free one per launch).
inline std::vector<std::string> torchrun_cmd(const std::string& torchrun, int nproc, const std::string& script,
                                             std::vector<std::string> args = {}, bool own_port = true) {
  std::vector<std::string> c = {torchrun, "--nproc-per-node", std::to_string(nproc)};
  if (own_port) c.insert(c.end(), {"--master-port", std::to_string(ddptest::free_port())});
  c.push_back(script);
  c.insert(c.end(), args.begin(), args.end());
  return c;
}

struct Checked {
  int code = 0;
  std::string output;
  nlohmann::json checks;
  std::string status(const std::string& id) const {
    for (const auto& c : checks.value("checks", nlohmann::json::array()))
      if (c["id"] == id) return c["status"];
    return "absent";
  }
  std::string summary(const std::string& id) const {
    for (const auto& c : checks.value("checks", nlohmann::json::array()))
      if (c["id"] == id) return c["summary"];
    return "";
  }
};

inline Checked check(const std::string& name, std::vector<std::string> ours, const std::vector<std::string>& launch,
                     const std::string& torchrun) {
  const std::string out = ddptest::fresh_dir(name);
  std::vector<std::string> args = {ddptest::kExe, "--check", "--out", out};
  args.insert(args.end(), ours.begin(), ours.end());
  args.push_back("--");
  args.insert(args.end(), launch.begin(), launch.end());
  auto r = ddptest::run(args, out + ".log", 600, companion_env(torchrun));
  return {r.code, r.output, ddptest::read_json(out + "/checks.json")};
}

class UserCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    torchrun_ = ddptest::venv_torchrun();
    if (torchrun_.empty()) GTEST_SKIP() << ddptest::kNoTorchrun;
  }
  std::string torchrun_;
};

}  // namespace ddptest::user_check
