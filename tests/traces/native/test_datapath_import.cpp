// The companion's data-path records (datapath/, written by python/ddp_profile/events.py) made into a rank's trace:
// lanes merged by name across processes, only the training loader's workers, every loader span given the step that
// consumed its batch, the handshake as the clock, and damaged input named, not misread.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "traces/model/run_folder.h"
#include "traces/native/datapath_import.h"
#include "traces/native/load_run.h"
#include "traces/native/trace_writer.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;

std::string temp_run() {
  auto d = fs::temp_directory_path() / ("ddp_dp_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(d);
  fs::create_directories(d / kDatapathDir);
  return d.string();
}

Event span(Stage s, uint8_t lane, int64_t t0, int64_t t1, uint32_t step, uint32_t item, uint16_t pass) {
  Event e = make_span(s, lane, t0, t1);
  e.step = step;
  e.item = item;
  e.epoch = pass;
  return e;
}

// One process's pair of files, as the companion writes them.
void write_process(const std::string& run, int rank, int pid, nlohmann::json header, const std::vector<Event>& ev) {
  header["rank"] = rank;
  header["pid"] = pid;
  std::ofstream(in_run(run, datapath_header_file(rank, pid))) << header.dump();
  std::ofstream out(in_run(run, datapath_events_file(rank, pid)), std::ios::binary);
  out.write(reinterpret_cast<const char*>(ev.data()), static_cast<std::streamsize>(ev.size() * sizeof(Event)));
}

// Rank 0: a training process (main, comm) that waited for batches 0 and 1 of pass 0 in steps 0 and 1, two workers of
// the training loader (loader 0) and one of a validation loader (loader 1).
void write_rank0(const std::string& run) {
  write_process(run, 0, 100,
                {{"role", "main"},
                 {"lanes", {"main", "comm"}},
                 {"train_loader", 0},
                 {"clock_offset_ns", 0},
                 {"clock_uncertainty_ns", 5000},
                 {"clock_rounds", 9}},
                {span(Stage::wait_data, 0, 100, 200, 0, 0, 0), span(Stage::step, 0, 100, 900, 0, 0, 0),
                 span(Stage::wait_data, 0, 1000, 1100, 1, 1, 0), span(Stage::step, 0, 900, 1900, 1, 0, 0)});
  write_process(run, 0, 101, {{"role", "worker"}, {"lanes", {"loader/0"}}, {"loader", 0}, {"worker", 0}},
                {span(Stage::worker_start, 0, 0, 50, 0, 0, 0), span(Stage::disk_read, 0, 50, 80, 0, 0, 0),
                 span(Stage::transform, 0, 80, 95, 0, 0, 0), span(Stage::disk_read, 0, 1950, 1990, 0, 2, 0)});
  write_process(run, 0, 102, {{"role", "worker"}, {"lanes", {"loader/1"}}, {"loader", 0}, {"worker", 1}},
                {span(Stage::transform, 0, 60, 900, 0, 1, 0)});
  write_process(run, 0, 103, {{"role", "worker"}, {"lanes", {"loader/0"}}, {"loader", 1}, {"worker", 0}},
                {span(Stage::transform, 0, 60, 70, 0, 0, 0)});
}

TEST(DatapathImport, TheProcessesOfARankBecomeOneTraceWithItsLoaderSpansInTheirSteps) {
  const std::string run = temp_run();
  write_rank0(run);
  DatapathRun dp;
  std::string err;
  ASSERT_TRUE(import_datapath(run, dp, err)) << err;
  ASSERT_EQ(dp.ranks.size(), 1u);
  const RankTrace& t = dp.ranks[0];
  EXPECT_EQ(t.lanes, (std::vector<std::string>{"main", "comm", "loader/0", "loader/1"}));
  std::map<std::pair<std::string, int64_t>, uint32_t> step_of;  // (stage, t0) -> step
  for (const Event& e : t.events) step_of[{std::string(stage_name(e.stage_id())), e.t0}] = e.step;
  EXPECT_EQ(step_of.size(), 9u) << "the validation loader's worker is left out";
  EXPECT_EQ((step_of[{"transform", 60}]), 1u) << "batch 1 was consumed in step 1";
  EXPECT_EQ((step_of[{"disk_read", 50}]), 0u);
  EXPECT_EQ((step_of[{"worker_start", 0}]), 0u);
  EXPECT_EQ((step_of[{"disk_read", 1950}]), 1u) << "a batch never consumed takes the step running at its start";
  for (size_t i = 1; i < t.events.size(); ++i) EXPECT_LE(t.events[i - 1].t0, t.events[i].t0);
  ASSERT_EQ(t.clocks.size(), 1u);
  EXPECT_EQ(t.clocks[0].uncertainty_ns, 5000);
  EXPECT_EQ(t.clocks[0].rounds, 9u);
  ASSERT_EQ(dp.notes.size(), 1u);
  EXPECT_NE(dp.notes[0].find("loaders other than the training loader"), std::string::npos) << dp.notes[0];

  // Written as our native traces, the run folder reads back as one of our runs.
  ASSERT_TRUE(write_native_traces(run, dp.ranks, 2, err)) << err;
  RunTrace back;
  ASSERT_TRUE(load_run(run, back, err)) << err;
  ASSERT_EQ(back.ranks.size(), 1u);
  EXPECT_EQ(back.ranks[0].events.size(), t.events.size());
  EXPECT_EQ(back.ranks[0].lanes, t.lanes);
}

TEST(DatapathImport, ACutOffFileAndDamagedEventsAreDroppedWithANote) {
  const std::string run = temp_run();
  Event bad_lane = span(Stage::forward, 7, 10, 20, 0, 0, 0);
  Event bad_stage = span(Stage::forward, 0, 10, 20, 0, 0, 0);
  bad_stage.stage = 200;
  write_process(run, 0, 100, {{"role", "main"}, {"lanes", {"main"}}},
                {span(Stage::forward, 0, 10, 20, 0, 0, 0), bad_lane, bad_stage});
  std::ofstream(in_run(run, datapath_events_file(0, 100)), std::ios::binary | std::ios::app) << "abc";
  DatapathRun dp;
  std::string err;
  ASSERT_TRUE(import_datapath(run, dp, err)) << err;
  ASSERT_EQ(dp.ranks.size(), 1u);
  EXPECT_EQ(dp.ranks[0].events.size(), 1u);
  ASSERT_EQ(dp.notes.size(), 2u);
  EXPECT_NE(dp.notes[0].find("ends inside an event"), std::string::npos) << dp.notes[0];
  EXPECT_NE(dp.notes[1].find("2 damaged event(s)"), std::string::npos) << dp.notes[1];
}

TEST(DatapathImport, AHeaderThatBreaksItsRecordIsAnErrorNamingTheFileAndField) {
  const std::string run = temp_run();
  std::ofstream(in_run(run, datapath_header_file(0, 100))) << R"({"rank":0,"pid":100,"role":"main"})";
  DatapathRun dp;
  std::string err;
  EXPECT_FALSE(import_datapath(run, dp, err));
  EXPECT_NE(err.find(datapath_header_file(0, 100)), std::string::npos) << err;
  EXPECT_NE(err.find("field 'lanes': missing"), std::string::npos) << err;

  const std::string other = run + "_pid";
  fs::create_directories(fs::path(other) / kDatapathDir);
  std::ofstream(in_run(other, datapath_header_file(0, 100))) << R"({"rank":0,"pid":99,"role":"main","lanes":[]})";
  EXPECT_FALSE(import_datapath(other, dp, err));
  EXPECT_NE(err.find("are not its name's"), std::string::npos) << err;
}

TEST(DatapathImport, WorkersWithoutATrainingProcessAreNoRun) {
  const std::string run = temp_run();
  write_process(run, 0, 101, {{"role", "worker"}, {"lanes", {"loader/0"}}, {"loader", 0}, {"worker", 0}},
                {span(Stage::disk_read, 0, 50, 80, 0, 0, 0)});
  DatapathRun dp;
  std::string err;
  EXPECT_FALSE(import_datapath(run, dp, err));
  EXPECT_NE(err.find("no rank's training process"), std::string::npos) << err;
  EXPECT_TRUE(has_datapath(run));
  EXPECT_FALSE(has_datapath(run + "_none"));
}

}  // namespace
