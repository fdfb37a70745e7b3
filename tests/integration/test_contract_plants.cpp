// No read error dropped: in a copy of a recorded check (tests/data/golden/user_check, replayed into the ladder by
// replay_run.sh), one field of one record renamed — in each record a check reads — fails every check that reads it,
// naming the file and the field: never a pass on what was left, an empty comparison, or another reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "integration_support.h"

namespace {
namespace fs = std::filesystem;

const std::string kRecorded = std::string(DDP_SOURCE_DIR) + "/tests/data/golden/user_check";
const std::string kReplay = std::string(DDP_SOURCE_DIR) + "/tests/data/golden/replay_run.sh";

struct Plant {
  std::string name;
  std::string file;  // under the recording: LEG/verify/...
  std::string from, to;
  std::vector<std::string> checks;  // the checks that read it
  std::string says;                 // what the reader says of the renamed field
};

std::ostream& operator<<(std::ostream& o, const Plant& p) { return o << p.name; }

// `file` with key `from` renamed `to` in its first record (a JSON-lines file's first line, or the whole file).
void rename_field(const std::string& file, const std::string& from, const std::string& to) {
  std::ifstream in(file);
  std::stringstream all;
  all << in.rdbuf();
  std::string text = all.str();
  const bool lines = file.size() > 6 && file.compare(file.size() - 6, 6, ".jsonl") == 0;
  const size_t end = lines ? text.find('\n') : text.size();
  nlohmann::json j = nlohmann::json::parse(text.substr(0, end));
  ASSERT_TRUE(j.contains(from)) << file << " has no field " << from;
  j[to] = j[from];
  j.erase(from);
  std::ofstream(file) << j.dump() << text.substr(end);
}

class ContractPlant : public ::testing::TestWithParam<Plant> {};

TEST_P(ContractPlant, TheCheckThatReadsItFailsNamingTheFileAndTheField) {
  const Plant& p = GetParam();
  const std::string copy = ddptest::fresh_dir("plant_" + p.name);
  fs::copy(kRecorded, copy, fs::copy_options::recursive);
  rename_field(copy + "/" + p.file, p.from, p.to);
  std::string ids;
  for (const auto& c : p.checks) ids += (ids.empty() ? "" : ",") + c;
  const std::string out = ddptest::fresh_dir("plant_" + p.name + "_check");
  std::vector<std::string> args = {DDP_PROFILE_EXE, "--check", "--checks", ids, "--out", out};
  if (ids == "checkpoint.resume") args.insert(args.end(), {"--resume-arg", "{ckpt}"});
  args.insert(args.end(), {"--", "/bin/bash", kReplay, copy});
  const ddptest::Result r = ddptest::run(args, out + ".log", 120);
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string file = p.file.substr(p.file.find('/') + 1);  // verify/..., as the run folder names it
  const nlohmann::json checks = ddptest::read_json(out + "/checks.json");
  ASSERT_TRUE(checks.is_object()) << r.output;
  for (const std::string& id : p.checks) {
    nlohmann::json found;
    for (const auto& c : checks["checks"])
      if (c["id"] == id) found = c;
    ASSERT_TRUE(found.is_object()) << id << " not judged: " << checks.dump();
    const std::string summary = found["summary"];
    EXPECT_EQ(found["status"], "fail") << id << ": " << summary;
    EXPECT_NE(summary.find(file), std::string::npos) << id << " does not name " << file << ": " << summary;
    EXPECT_NE(summary.find(p.says), std::string::npos) << id << " does not say " << p.says << ": " << summary;
  }
}

const std::vector<std::string> kTrainingChecks = {"train.learns",   "numerics.finite", "train.mode",
                                                  "train.schedule", "train.iteration", "memory.steady"};

INSTANTIATE_TEST_SUITE_P(EveryRecordAChecksReads, ContractPlant,
                         ::testing::Values(Plant{"samples",
                                                 "main/verify/rank0.samples.jsonl",
                                                 "indices",
                                                 "idx",
                                                 {"data.shard_rule"},
                                                 "field 'indices': missing"},
                                           Plant{"replicas",
                                                 "main/verify/rank1.replicas.jsonl",
                                                 "param_hash",
                                                 "hash",
                                                 {"numerics.rank_sync"},
                                                 "field 'param_hash': missing"},
                                           Plant{"collectives",
                                                 "main/verify/rank1.collectives.jsonl",
                                                 "sync_flag",
                                                 "sync",
                                                 {"comm.no_sync"},
                                                 "unknown field 'sync'"},
                                           Plant{"checkpoints",
                                                 "main/verify/rank0.checkpoints.jsonl",
                                                 "found",
                                                 "items_found",
                                                 {"checkpoint.complete"},
                                                 "field 'found': missing"},
                                           Plant{"training", "main/verify/rank1.training.jsonl", "rss", "resident",
                                                 kTrainingChecks, "field 'rss': missing"},
                                           Plant{"reference_meta",
                                                 "main/verify/reference_step1.json",
                                                 "kinds",
                                                 "layer_kinds",
                                                 {"numerics.reference"},
                                                 "field 'kinds': missing"},
                                           Plant{"final_state",
                                                 "resume_straight/verify/rank1.final.jsonl",
                                                 "hash",
                                                 "digest",
                                                 {"checkpoint.resume"},
                                                 "field 'hash': missing"},
                                           Plant{"resume_points",
                                                 "resume_resumed/verify/rank0.resume_points.jsonl",
                                                 "items",
                                                 "state",
                                                 {"checkpoint.resume"},
                                                 "field 'items': missing"},
                                           Plant{"resume_replicas",
                                                 "resume_straight/verify/rank0.replicas.jsonl",
                                                 "step",
                                                 "steps",
                                                 {"checkpoint.resume"},
                                                 "field 'step': missing"},
                                           Plant{"resume_samples",
                                                 "resume_resumed/verify/rank0.samples.jsonl",
                                                 "batch",
                                                 "batches",
                                                 {"checkpoint.resume"},
                                                 "field 'batch': missing"},
                                           Plant{"killed_save",
                                                 "resume_killed/verify/rank0.checkpoints.jsonl",
                                                 "copy",
                                                 "copied",
                                                 {"checkpoint.resume"},
                                                 "field 'copy': missing"}),
                         [](const ::testing::TestParamInfo<Plant>& i) { return i.param.name; });

// The companion's meta is what the ladder learns the job from (world, sampler, steps): one that breaks the contract
// stops the ladder before any verdict, naming the file and the field.
TEST(ContractPlantMeta, AMetaAgainstTheTableStopsTheLadderNamingItsField) {
  const std::string copy = ddptest::fresh_dir("plant_meta");
  fs::copy(kRecorded, copy, fs::copy_options::recursive);
  rename_field(copy + "/main/verify/rank1.meta.json", "optimizer_steps", "steps");
  const std::string out = ddptest::fresh_dir("plant_meta_check");
  const ddptest::Result r = ddptest::run(
      {DDP_PROFILE_EXE, "--check", "--checks", "data.shard_rule", "--out", out, "--", "/bin/bash", kReplay, copy},
      out + ".log", 120);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("verify/rank1.meta.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("field 'optimizer_steps': missing"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/checks.json")) << "no verdict on a job the ladder could not read";
}

}  // namespace
