// The one contract between the C++ side and the Python companion: every run-folder name the companion writes, the
// DDP_PROFILE_* switches, the heartbeat record's size, offsets, magic and format version, and the stage ids it
// reports. python/ddp_profile/layout.py is loaded by file (it imports nothing of the package, so no torch is needed)
// and its contract() compared with the C++ owners, name by name: a difference on either side fails here.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/launch/progress.h"
#include "runtime/launch/user_job.h"
#include "traces/model/run_folder.h"
#include "traces/model/stages.h"

namespace {

nlohmann::json python_contract() {
  const std::string layout = std::string(DDP_SOURCE_DIR) + "/python/ddp_profile/layout.py";
  const std::string cmd =
      "python3 -c 'import importlib.util, json, sys; s = importlib.util.spec_from_file_location(\"layout\", sys.argv[1]); "
      "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); print(json.dumps(m.contract()))' '" +
      layout + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return nullptr;
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int rc = ::pclose(p);
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (rc != 0 || j.is_discarded()) {
    ADD_FAILURE() << "python3 could not give layout.py's contract: " << out;
    return nullptr;
  }
  return j;
}

TEST(CompanionContract, TheRunFolderNamesAreTheCppOwners) {
  const nlohmann::json c = python_contract();
  ASSERT_TRUE(c.is_object());
  const nlohmann::json& f = c["files"];
  EXPECT_EQ(f["progress"], ddp::rank_progress_file(3));
  const std::map<std::string, const char*> kinds = {
      {"samples", ddp::kVerifySamples},         {"replicas", ddp::kVerifyReplicas},
      {"summaries", ddp::kVerifySummaries},     {"collectives", ddp::kVerifyCollectives},
      {"checkpoints", ddp::kVerifyCheckpoints}, {"final", ddp::kVerifyFinal},
      {"training", ddp::kVerifyTraining},       {"resume_points", ddp::kVerifyResumePoints}};
  ASSERT_EQ(f["verify_logs"].size(), kinds.size()) << f["verify_logs"].dump();
  for (const auto& [python_kind, kind] : kinds)
    EXPECT_EQ(f["verify_logs"][python_kind], ddp::verify_log_file(3, kind)) << python_kind;
  EXPECT_EQ(f["verify_step"], ddp::verify_step_file(3, 7));
  EXPECT_EQ(f["meta"], ddp::companion_meta_file(3));
  EXPECT_EQ(f["reference_step"], ddp::reference_step_file(7));
  EXPECT_EQ(f["reference_meta"], ddp::reference_meta_file(7));
  EXPECT_EQ(f["save_copy"], ddp::companion_save_copy_file(2, 3));
  EXPECT_EQ(f["kineto_trace"], ddp::kineto_rank_trace_file(3));
  EXPECT_EQ(f["flight_recorder_request"], ddp::kFlightRecorderRequest);
  EXPECT_EQ(f["flight_recorder_dump"], ddp::flight_recorder_dump_file(3));
}

TEST(CompanionContract, TheSwitchesAreUserJobsOnes) {
  const nlohmann::json c = python_contract();
  ASSERT_TRUE(c.is_object());
  const nlohmann::json& e = c["env"];
  EXPECT_EQ(e["run"], ddp::kEnvRun);
  EXPECT_EQ(e["mode"], ddp::kEnvMode);
  EXPECT_EQ(e["verify_steps"], ddp::kEnvVerifySteps);
  EXPECT_EQ(e["fault"], ddp::kEnvFault);
  EXPECT_EQ(e["hold_after_save"], ddp::kEnvHoldAfterSave);
  EXPECT_EQ(e["schedule"], ddp::kEnvSchedule);
  EXPECT_EQ(e["format"], ddp::kEnvFormat);
  EXPECT_EQ(e.size(), 7u) << "a switch only one side knows: " << e.dump();
}

TEST(CompanionContract, TheHeartbeatRecordIsProgressRecord) {
  const nlohmann::json c = python_contract();
  ASSERT_TRUE(c.is_object());
  const nlohmann::json& h = c["heartbeat"];
  using ddp::ProgressRecord;
  EXPECT_EQ(h["size"], sizeof(ProgressRecord));
  EXPECT_EQ(h["magic"], ddp::kProgressMagic);
  EXPECT_EQ(h["format_version"], ddp::kProgressFormatVersion);
  const std::map<std::string, size_t> offsets = {
      {"magic", offsetof(ProgressRecord, magic)},       {"rank", offsetof(ProgressRecord, rank)},
      {"pid", offsetof(ProgressRecord, pid)},           {"state", offsetof(ProgressRecord, state)},
      {"step", offsetof(ProgressRecord, step)},         {"epoch", offsetof(ProgressRecord, epoch)},
      {"stage", offsetof(ProgressRecord, stage)},       {"last_ns", offsetof(ProgressRecord, last_ns)},
      {"bucket", offsetof(ProgressRecord, bucket)},     {"format_version", offsetof(ProgressRecord, format_version)},
      {"median_step_ns", offsetof(ProgressRecord, median_step_ns)}, {"reason", offsetof(ProgressRecord, reason)}};
  ASSERT_EQ(h["fields"].size(), offsets.size()) << h["fields"].dump();
  for (const auto& [name, off] : offsets) EXPECT_EQ(h["fields"][name], off) << name;
  EXPECT_EQ(h["reason_bytes"], sizeof(ProgressRecord{}.reason));
  EXPECT_EQ(h["states"]["starting"], static_cast<int>(ddp::RankState::starting));
  EXPECT_EQ(h["states"]["running"], static_cast<int>(ddp::RankState::running));
  EXPECT_EQ(h["states"]["done"], static_cast<int>(ddp::RankState::done));
  EXPECT_EQ(h["states"]["failed"], static_cast<int>(ddp::RankState::failed));
  EXPECT_EQ(h["states"]["terminated"], static_cast<int>(ddp::RankState::terminated));
}

TEST(CompanionContract, TheStageIdsAreTheStageTables) {
  const nlohmann::json c = python_contract();
  ASSERT_TRUE(c.is_object());
  for (const auto& [name, id] : c["stages"].items()) {
    auto s = ddp::stage_from_name(name);
    ASSERT_TRUE(s.has_value()) << name;
    EXPECT_EQ(static_cast<int>(*s), id.get<int>()) << name;
  }
}

}  // namespace
