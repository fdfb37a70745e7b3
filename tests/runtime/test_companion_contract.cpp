// The one contract between the C++ side and the Python companion: every run-folder name the companion writes, the
// records inside those files field by field (traces/model/records.def), the DDP_PROFILE_* switches, the heartbeat
// record's size, offsets, magic and format version, and the stage ids it reports. python/ddp_profile/layout.py is
// loaded by file (it imports nothing of the package, so no torch is needed) and its contract() compared with the C++
// owners, name by name: a difference on either side fails here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/launch/heartbeat/progress.h"
#include "runtime/launch/user_job/user_job.h"
#include "tests/support/remove_tree.h"
#include "traces/model/records.h"
#include "traces/model/run_folder.h"
#include "traces/model/stages.h"

namespace {

// layout.py's contract() as JSON, loaded from `package` (the companion's folder) as ddp_profile.layout without running
// the package's __init__ (which imports torch): layout imports only its neighbour records_table.
nlohmann::json python_contract(const std::string& package = std::string(DDP_SOURCE_DIR) + "/python/ddp_profile") {
  const std::string cmd =
      "python3 -c 'import importlib, json, sys, types; p = types.ModuleType(\"ddp_profile\"); "
      "p.__path__ = [sys.argv[1]]; sys.modules[\"ddp_profile\"] = p; "
      "print(json.dumps(importlib.import_module(\"ddp_profile.layout\").contract()))' '" +
      package + "' 2>&1";
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
  EXPECT_EQ(f["verify_step"], ddp::companion_verify_step_file(3, 7));
  EXPECT_EQ(f["meta"], ddp::companion_meta_file(3));
  EXPECT_EQ(f["reference_step"], ddp::reference_step_file(7));
  EXPECT_EQ(f["reference_meta"], ddp::reference_meta_file(7));
  EXPECT_EQ(f["save_copy"], ddp::companion_save_copy_file(2, 3, "epoch1.pt"));
  EXPECT_EQ(f["kineto_trace"], ddp::kineto_rank_trace_file(3));
  EXPECT_EQ(f["flight_recorder_request"], ddp::kFlightRecorderRequest);
  EXPECT_EQ(f["flight_recorder_dump"], ddp::flight_recorder_dump_file(3));
  EXPECT_EQ(f["datapath_events"], ddp::datapath_events_file(3, 42));
  EXPECT_EQ(f["datapath_header"], ddp::datapath_header_file(3, 42));
  EXPECT_EQ(c["datapath_record"], "datapath_process");
}

// The data path's events are Event (traces/model/event.h) byte for byte: the struct format's fields in the struct's
// order, at its offsets, and the kinds and the bucket sentinel its readers test.
TEST(CompanionContract, TheDataPathEventIsEventByteForByte) {
  const nlohmann::json c = python_contract();
  ASSERT_TRUE(c.is_object());
  const nlohmann::json& e = c["event"];
  EXPECT_EQ(e["size"], sizeof(ddp::Event));
  EXPECT_EQ(e["format"], "<qqQIIHHBBBB");
  const std::vector<std::pair<std::string, size_t>> fields = {
      {"t0", offsetof(ddp::Event, t0)},         {"t1", offsetof(ddp::Event, t1)},
      {"value", offsetof(ddp::Event, value)},   {"step", offsetof(ddp::Event, step)},
      {"item", offsetof(ddp::Event, item)},     {"epoch", offsetof(ddp::Event, epoch)},
      {"bucket", offsetof(ddp::Event, bucket)}, {"micro", offsetof(ddp::Event, micro)},
      {"stage", offsetof(ddp::Event, stage)},   {"kind", offsetof(ddp::Event, kind)},
      {"lane", offsetof(ddp::Event, lane)}};
  ASSERT_EQ(e["fields"].size(), fields.size()) << e.dump();
  // '<qqQIIHHBBBB' packs without padding: each field's offset is the sum of the sizes before it.
  const std::map<char, size_t> size_of = {{'q', 8}, {'Q', 8}, {'I', 4}, {'H', 2}, {'B', 1}};
  const std::string fmt = e["format"].get<std::string>().substr(1);
  size_t at = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    EXPECT_EQ(e["fields"][i], fields[i].first);
    EXPECT_EQ(at, fields[i].second) << fields[i].first;
    at += size_of.at(fmt[i]);
  }
  EXPECT_EQ(e["span"], static_cast<int>(ddp::EventKind::span));
  EXPECT_EQ(e["counter"], static_cast<int>(ddp::EventKind::counter));
  EXPECT_EQ(e["cpu"], static_cast<int>(ddp::EventKind::cpu));
  EXPECT_EQ(e["wait_unknown"], ddp::kWaitUnknown);
  EXPECT_EQ(e["no_bucket"], ddp::kNoBucket);
  for (const auto& [name, id] : c["counters"].items()) {
    auto k = ddp::counter_from_name(name);
    ASSERT_TRUE(k.has_value()) << name;
    EXPECT_EQ(static_cast<int>(*k), id.get<int>()) << name;
  }
}

// Every difference between records.def (C++) and layout.RECORDS (Python), field by field: "record.key: ...".
std::vector<std::string> record_differences(const std::vector<ddp::records::RecordSchema>& cpp,
                                            const nlohmann::json& python) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& rec : cpp) {
    seen.insert(rec.name);
    if (!python.contains(rec.name)) {
      out.push_back(rec.name + ": not in layout.RECORDS");
      continue;
    }
    const nlohmann::json& py = python[rec.name];
    std::set<std::string> keys;
    for (const auto& f : rec.fields) {
      keys.insert(f.key);
      const std::string at = rec.name + "." + f.key;
      if (!py.contains(f.key)) {
        out.push_back(at + ": only in records.def");
        continue;
      }
      const nlohmann::json& p = py[f.key];
      if (p["type"] != f.type || p["nested"] != f.nested || p["list"] != f.list)
        out.push_back(at + ": type " + p["type"].dump() + " vs " + f.type);
      if (p["unit"] != f.unit) out.push_back(at + ": unit " + p["unit"].dump() + " vs \"" + f.unit + "\"");
      if (p["required"] != f.required) out.push_back(at + ": required differs");
    }
    for (const auto& [k, v] : py.items())
      if (!keys.count(k)) out.push_back(rec.name + "." + k + ": only in layout.RECORDS");
  }
  for (const auto& [name, v] : python.items())
    if (!seen.count(name)) out.push_back(name + ": only in layout.RECORDS");
  return out;
}

TEST(CompanionContract, TheRecordsAreRecordsDefFieldByField) {
  const nlohmann::json c = python_contract();
  ASSERT_TRUE(c.is_object());
  const std::vector<std::string> diff = record_differences(ddp::records::schema(), c["records"]);
  EXPECT_TRUE(diff.empty()) << diff.front();
  // Which record each verification log and JSON file holds.
  const std::map<std::string, std::string> logs = {
      {ddp::kVerifySamples, "samples"},         {ddp::kVerifyReplicas, "replicas"},
      {ddp::kVerifySummaries, "summaries"},     {ddp::kVerifyCollectives, "micro_collectives"},
      {ddp::kVerifyCheckpoints, "checkpoints"}, {ddp::kVerifyFinal, "final_state"},
      {ddp::kVerifyTraining, "training"},       {ddp::kVerifyResumePoints, "resume_points"}};
  EXPECT_EQ(c["verify_records"], nlohmann::json(logs));
  EXPECT_EQ(c["meta_record"], "companion_meta");
  EXPECT_EQ(c["reference_meta_record"], "reference_meta");
}

// The comparison is not vacuous: a key renamed on either side is found, by name.
TEST(CompanionContract, ARenameOnEitherSideIsFound) {
  const std::string dir = std::filesystem::temp_directory_path() / ("ddp_contract_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string package = std::string(DDP_SOURCE_DIR) + "/python/ddp_profile";
  std::filesystem::copy_file(package + "/layout.py", dir + "/layout.py");
  std::ifstream in(package + "/records_table.py");
  std::stringstream text;
  text << in.rdbuf();
  std::string py = text.str();
  const std::string from = "\"output_finite\": (", to = "\"outputs_finite\": (";
  ASSERT_NE(py.find(from), std::string::npos);
  py.replace(py.find(from), from.size(), to);
  std::ofstream(dir + "/records_table.py") << py;
  const nlohmann::json renamed = python_contract(dir);
  ddp::testing::remove_tree(dir);
  ASSERT_TRUE(renamed.is_object());
  const auto python_side = record_differences(ddp::records::schema(), renamed["records"]);
  ASSERT_EQ(python_side.size(), 2u);
  EXPECT_EQ(python_side[0], "training.output_finite: only in records.def");
  EXPECT_EQ(python_side[1], "training.outputs_finite: only in layout.RECORDS");

  auto cpp = ddp::records::schema();
  cpp[0].fields[0].key = "epochs";
  const auto cpp_side = record_differences(cpp, python_contract()["records"]);
  ASSERT_EQ(cpp_side.size(), 2u);
  EXPECT_EQ(cpp_side[0], "samples.epochs: only in records.def");
}

// The C++ reader refuses what the companion might write after a rename: never read as absent or defaulted.
TEST(CompanionContract, TheReaderNamesTheFileTheLineAndTheField) {
  const std::string dir = std::filesystem::temp_directory_path() / ("ddp_records_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/rank0.samples.jsonl";
  std::vector<ddp::records::samples> lines;
  std::string err;
  std::ofstream(path) << R"({"epoch":0,"step":0,"micro":0,"batch":0,"indices":[1,2]})"
                         "\n"
                      << R"({"epoch":0,"step":1,"micro":0,"batch":1,"indices":[3],"sampler_epoch":null})"
                         "\n";
  ASSERT_TRUE(ddp::read_record_lines(path, lines, err)) << err;
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_FALSE(lines[1].sampler_epoch.has_value());
  EXPECT_EQ(lines[0].indices, (std::vector<int64_t>{1, 2}));
  const std::map<std::string, std::string> broken = {
      {R"({"epoch":0,"step":1,"micro":0,"batch":1,"index":[3]})", ":2: field 'indices': missing"},
      {R"({"epoch":0,"step":1,"micro":0,"batch":1,"indices":[3],"sampler_epochs":1})",
       ":2: unknown field 'sampler_epochs'"},
      {R"({"epoch":0,"step":"1","micro":0,"batch":1,"indices":[3]})", ":2: field 'step': not an integer"},
      {R"({"epoch":0,"step":1,"micro":0,"batch":1,"indices":[3,"4"]})", ":2: field 'indices': item 1: not an integer"}};
  for (const auto& [line, want] : broken) {
    std::ofstream(path) << R"({"epoch":0,"step":0,"micro":0,"batch":0,"indices":[1,2]})"
                           "\n"
                        << line << "\n";
    EXPECT_FALSE(ddp::read_record_lines(path, lines, err));
    EXPECT_EQ(err, path + want);
  }
  ddp::records::training t;
  EXPECT_FALSE(ddp::records::read(nlohmann::json::parse(R"({"step":0,"rss":1,"first_nonfinite_layer":{"layers":"x"}})"),
                                  t, err));
  EXPECT_EQ(err, "unknown field 'first_nonfinite_layer.layers'") << "a nested record's own key, as Python says it";
  EXPECT_FALSE(
      ddp::records::read(nlohmann::json::parse(R"({"step":0,"rss":1,"first_nonfinite_layer":{"layer":3}})"), t, err));
  EXPECT_EQ(err, "field 'first_nonfinite_layer.layer': not a string");
  ddp::testing::remove_tree(dir);
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
  const std::map<std::string, size_t> offsets = {{"magic", offsetof(ProgressRecord, magic)},
                                                 {"rank", offsetof(ProgressRecord, rank)},
                                                 {"pid", offsetof(ProgressRecord, pid)},
                                                 {"state", offsetof(ProgressRecord, state)},
                                                 {"step", offsetof(ProgressRecord, step)},
                                                 {"epoch", offsetof(ProgressRecord, epoch)},
                                                 {"stage", offsetof(ProgressRecord, stage)},
                                                 {"last_ns", offsetof(ProgressRecord, last_ns)},
                                                 {"bucket", offsetof(ProgressRecord, bucket)},
                                                 {"format_version", offsetof(ProgressRecord, format_version)},
                                                 {"median_step_ns", offsetof(ProgressRecord, median_step_ns)},
                                                 {"reason", offsetof(ProgressRecord, reason)}};
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
