// Per-rank PyTorch profiler (Kineto) traces exported as one merged trace, damaged and mutated inputs, message sizes,
// profiling cycles, and the viewer's timeline built in the import's own reading (tests/data/kineto/).
#include "tests/traces/kineto/kineto_import_support.h"

using namespace kineto_import_test;
TEST(KinetoExport, MergedTraceHasARankPerProcessOnOneClockWithOffsets) {
  RunTrace run = load({kCpu + "/balanced"});
  std::string d = temp_dir("export");
  ExportStats st;
  std::string err;
  ASSERT_TRUE(export_chrome(run, d + "/merged.json", st, err)) << err;
  ChromeTrace t = read_chrome_file(d + "/merged.json");
  ASSERT_TRUE(t.ok()) << t.status.message;
  std::set<std::string> processes;
  int64_t min_ts = INT64_MAX;
  for (const ChromeEvent& e : t.events) {
    if (e.ph == 'M' && e.name == "process_name") processes.insert(*e.arg("name"));
    if (e.ph == 'X') min_ts = std::min(min_ts, e.ts_ns);
  }
  EXPECT_EQ(processes, (std::set<std::string>{"rank 0 (rank0)", "rank 1 (rank1)"}));
  EXPECT_EQ(min_ts, 0) << "one clock, starting at the run's first event";
  const nlohmann::json align = t.info.top["otherData"]["manifest"]["kineto"]["clock_alignment"];
  ASSERT_EQ(align.size(), 2u);
  EXPECT_TRUE(align[1].contains("offset_ms"));
  fs::remove_all(d);
}

// The merged export keeps every original event of every rank, on the measured clock, beside the stage spans.
TEST(KinetoExport, MergedTraceKeepsEveryOriginalEventOnOneClock) {
  RunTrace run = load({kCpu + "/slow-data-rank1"});
  std::string d = temp_dir("merged_all");
  ExportStats st;
  std::string err;
  ASSERT_TRUE(export_kineto_merged(run, d + "/merged.json", st, err)) << err;
  ChromeTrace t = read_chrome_file(d + "/merged.json");
  ASSERT_TRUE(t.ok()) << t.status.message;

  // Everything each file holds, counted the same way.
  size_t file_x = 0, file_flows = 0;
  const nlohmann::json report = kineto_report_json(run);
  for (const auto& f : report["files"]) {
    ChromeTrace ft = read_chrome_file(f["file"].get<std::string>());
    for (const ChromeEvent& e : ft.events) file_x += e.ph == 'X', file_flows += e.ph == 's';
  }
  size_t stage_x = 0;
  for (const RankTrace& r : run.ranks)
    for (const Event& e : r.events) stage_x += e.is_span();
  size_t x = 0;
  std::map<std::string, std::string> pid_name;
  std::set<std::string> threads;
  std::map<std::string, int> flow_ends;    // id -> +1 per "s", -1 per "f"
  std::map<std::string, int64_t> step_ts;  // "<pid>/<step>" -> ts of the step span (ours) or ProfilerStep#N (theirs)
  for (const ChromeEvent& e : t.events) {
    x += e.ph == 'X';
    if (e.ph == 'M' && e.name == "process_name") pid_name[e.pid] = *e.arg("name");
    if (e.ph == 'M' && e.name == "thread_name") threads.insert(*e.arg("name"));
    if (e.ph == 's') ++flow_ends[e.id];
    if (e.ph == 'f') --flow_ends[e.id];
    if (e.ph == 'X' && e.name == "step" && e.arg("step")) step_ts[e.pid + "/" + *e.arg("step")] = e.ts_ns;
    if (e.ph == 'X' && e.name.rfind("ProfilerStep#", 0) == 0) step_ts[e.pid + "/" + e.name.substr(13)] = e.ts_ns;
  }
  EXPECT_EQ(x, file_x + stage_x);
  EXPECT_GT(file_flows, 0u);
  EXPECT_EQ(flow_ends.size(), file_flows) << "flow ids stay distinct across ranks";
  for (const auto& [id, n] : flow_ends) EXPECT_EQ(n, 0) << "flow " << id << " lost an end";
  EXPECT_TRUE(threads.count("thread 29746 (pt_gloo_runloop)") || threads.size() > 6) << "thread names kept";
  // Each rank: its stage process and its file's python3 process, named for the rank.
  std::map<int, std::string> file_pid;
  for (const auto& [pid, name] : pid_name)
    for (int r = 0; r < 2; ++r)
      if (name == "rank " + std::to_string(r) + " · python3") file_pid[r] = pid;
  ASSERT_EQ(file_pid.size(), 2u) << "process names: " << pid_name.size();
  // One clock: rank R's ProfilerStep#N starts where our step N of rank R does.
  for (int r = 0; r < 2; ++r)
    for (const char* step : {"4", "20"}) {
      auto ours = step_ts.find(std::to_string(r) + "/" + step), theirs = step_ts.find(file_pid[r] + "/" + step);
      ASSERT_TRUE(ours != step_ts.end() && theirs != step_ts.end()) << "rank " << r << " step " << step;
      EXPECT_EQ(ours->second, theirs->second) << "rank " << r << " step " << step;
    }
  EXPECT_TRUE(t.info.top["otherData"]["manifest"]["kineto"]["clock_alignment"].is_array());
  fs::remove_all(d);
}

// A trace that changes between the import and the export is an error naming it, and nothing is written.
TEST(KinetoExport, MergedExportOfATraceDamagedSinceLoadingWritesNothing) {
  std::string d = temp_dir("merged_damaged");
  fs::copy_file(rank_file("balanced", 0), d + "/rank0.pt.trace.json.gz");
  fs::copy_file(rank_file("balanced", 1), d + "/rank1.pt.trace.json.gz");
  RunTrace run = load({d});
  write_text(d + "/rank1.pt.trace.json.gz", "{\"traceEvents\": [");
  ExportStats st;
  std::string err;
  EXPECT_FALSE(export_kineto_merged(run, d + "/merged.json", st, err));
  EXPECT_NE(err.find("rank1.pt.trace.json.gz"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(d + "/merged.json"));
  for (const auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  fs::remove_all(d);
}

// Damaged bytes never crash the import: cuts and flipped bytes of a real trace either load or give an error.
TEST(KinetoImport, MutatedTracesLoadOrFailCleanly) {
  std::string text;
  ASSERT_TRUE(read_chrome_bytes(rank_file("slow-forward-rank0", 1), text).ok());
  const std::string d = temp_dir("mutate");
  std::mt19937 rng(7);
  for (int i = 0; i < 60; ++i) {
    std::string m = text;
    if (i % 3 == 0) m.resize(rng() % m.size());
    const int flips = 1 + static_cast<int>(rng() % 20);
    const std::string bytes = "0123456789e-+.\"{}[],: ";
    for (int k = 0; k < flips && !m.empty(); ++k) m[rng() % m.size()] = bytes[rng() % bytes.size()];
    write_text(d + "/rank1.json", m);
    RunTrace run;
    std::string err;
    if (load_kineto_run({d + "/rank1.json"}, KinetoStageMap{}, run, err)) {
      analyze(run);
      summarize(run);
    } else {
      EXPECT_FALSE(err.empty());
    }
  }
  fs::remove_all(d);
}

namespace {
// PyTorch's profiler records a collective's message size only with record_shapes=True; the committed traces were
// recorded without it. Their sizes and bandwidths are unknown — null in JSON, said in text — never 0.
TEST(KinetoAnalysis, MessageSizesNotInTheTraceAreUnknownNotZero) {
  Analysis a = analyze(load({kCpu + "/balanced"}));
  ASSERT_FALSE(a.ranks.empty());
  for (const auto& r : a.ranks) {
    ASSERT_GT(r.allreduce.count_per_step, 0);
    EXPECT_FALSE(r.allreduce.sizes_known) << r.rank;
  }
  const nlohmann::json j = analysis_json(a);
  for (const auto& r : j["ranks"]) {
    EXPECT_TRUE(r["allreduce"]["bytes_per_step"].is_null()) << r.dump();
    EXPECT_TRUE(r["allreduce"]["busbw_gbps"].is_null()) << r.dump();
    EXPECT_EQ(r["allreduce"]["sizes_known"], false);
  }
  const std::string text = analysis_text(a);
  EXPECT_EQ(text.find("0.00 MB/step"), std::string::npos) << text;
  EXPECT_EQ(text.find("busbw 0.00"), std::string::npos) << text;
  EXPECT_NE(text.find("record_shapes=True"), std::string::npos) << text;
  // The two allreduce figures per rank are named apart: the buckets' busy time and the stage's sum of spans.
  EXPECT_NE(text.find("busy "), std::string::npos) << text;
  EXPECT_NE(text.find("ms/step (sum of each stage's spans)"), std::string::npos) << text;
}
}  // namespace

namespace {
// One file per profiling cycle and rank (schedule(repeat=...) with tensorboard_trace_handler): a rank's files are its
// cycles, paired across ranks by time; files of another job, or two files of one rank at the same time, are errors.
void write_shifted(const std::string& from, const std::string& to, int64_t shift_ns) {
  nlohmann::json j = read_json_file(from);
  j["baseTimeNanoseconds"] = j["baseTimeNanoseconds"].get<int64_t>() + shift_ns;
  write_text(to, j.dump());
}

TEST(KinetoCycles, EveryCycleOfEveryRankIsOneRunAndOneCycleCanBePicked) {
  const std::string d = temp_dir("cycles");
  for (int r = 0; r < 2; ++r) {
    write_shifted(rank_file("balanced", r), d + "/rank" + std::to_string(r) + ".1.pt.trace.json", 0);
    write_shifted(rank_file("balanced", r), d + "/rank" + std::to_string(r) + ".2.pt.trace.json", 30'000'000'000);
  }
  RunTrace all = load({d});
  ASSERT_EQ(all.ranks.size(), 2u);
  const RunTrace one = load({rank_file("balanced", 0), rank_file("balanced", 1)});
  // Both cycles' events on rank 0 (a few derived per file, e.g. around its first and last step, are not doubled).
  EXPECT_GT(all.ranks[0].events.size(), 19 * one.ranks[0].events.size() / 10) << one.ranks[0].events.size();
  EXPECT_LE(all.ranks[0].events.size(), 2 * one.ranks[0].events.size());
  const nlohmann::json rep = kineto_report_json(all);
  ASSERT_TRUE(rep.contains("cycles")) << rep.dump();
  EXPECT_EQ(rep["cycles"].size(), 2u);
  EXPECT_EQ(rep["files"].size(), 4u) << "every file listed, for the viewer and the merged export";
  EXPECT_NE(rep["notes"][0].get<std::string>().find("4 files: 2 cycles x 2 ranks"), std::string::npos) << rep.dump();
  RunTrace second;
  std::string err;
  ASSERT_TRUE(load_kineto_run({d}, KinetoStageMap{}, second, err, 2)) << err;
  EXPECT_EQ(second.ranks[0].events.size(), one.ranks[0].events.size());
  EXPECT_FALSE(load_kineto_run({d}, KinetoStageMap{}, second, err, 3));
  EXPECT_NE(err.find("2 profiling cycle(s)"), std::string::npos) << err;

  // Rank 1's second file from another job, minutes later: named, not paired.
  write_shifted(rank_file("balanced", 1), d + "/rank1.2.pt.trace.json", 600'000'000'000);
  err = load_error({d});
  EXPECT_NE(err.find("rank1.2.pt.trace.json does not pair"), std::string::npos) << err;
  fs::remove_all(d);
}

// Each file numbers its own process groups ("Process Group Name" of NCCL collectives): a rank's cycles merged keep
// every span's group (the merge once left them pointing past the merged table, and reading it crashed).
TEST(KinetoCycles, CyclesOfTracesWithProcessGroupsKeepTheirGroups) {
  const std::string d = temp_dir("cycles_pg");
  std::string one;
  for (const auto& e : fs::directory_iterator(kData + "/pytorch-2.11-gpu/nccl1-h200")) one = e.path().string();
  write_shifted(one, d + "/rank0.1.pt.trace.json", 0);
  write_shifted(one, d + "/rank0.2.pt.trace.json", 30'000'000'000);
  const RunTrace single = load({one}), both = load({d});
  ASSERT_EQ(both.ranks.size(), 1u);
  auto sized_collectives = [](const RunTrace& r) {
    size_t n = 0;
    for (const Event& e : r.ranks[0].events) n += e.stage_id() == Stage::allreduce && e.value > 0;
    return n;
  };
  ASSERT_GT(sized_collectives(single), 0u);
  EXPECT_EQ(sized_collectives(both), 2 * sized_collectives(single));
  fs::remove_all(d);
}
}  // namespace

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Everything the viewer shows of a timeline, as text: processes in order with their rank, lanes, rows of spans
// (times, names, steps, stages, args) and counters, the time range and the problems.
std::string timeline_text(const Timeline& tl) {
  std::ostringstream o;
  o << tl.t_begin << " " << tl.t_end << " " << tl.origin_ns << " " << tl.span_count << " " << tl.counter_samples
    << "\n";
  for (const Process& p : tl.processes) {
    o << "P " << p.name << " r" << p.rank << " " << p.span_count << " steps " << p.steps.size() << "\n";
    for (const Lane& l : p.lanes) {
      o << " L " << l.name << " " << l.span_count << "\n";
      for (size_t d = 0; d < l.rows.size(); ++d)
        for (const Span& s : l.rows[d].spans)
          o << "  " << d << " " << s.t0 << " " << s.t1() << " " << tl.name(s) << " " << s.step << " " << int(s.stage)
            << " " << tl.bytes(s) << " " << tl.extra(s) << "\n";
    }
    for (const CounterSeries& c : p.counters) {
      o << " C " << c.name;
      for (size_t i = 0; i < c.t.size(); ++i) o << " " << c.t[i] << "=" << c.v[i];
      o << "\n";
    }
  }
  for (const std::string& line : tl.problems) o << "! " << line << "\n";
  return o.str();
}

// The first line where two long texts differ (gtest's own diff of megabytes of text would not end).
void expect_same_text(const std::string& a, const std::string& b, const std::string& what) {
  std::istringstream ia(a), ib(b);
  std::string la, lb;
  for (size_t line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(ia, la)), more_b = static_cast<bool>(std::getline(ib, lb));
    if (!more_a && !more_b) return;
    if (more_a != more_b || la != lb) {
      ADD_FAILURE() << what << ": line " << line << " differs:\n  " << (more_a ? la : "(end)") << "\n  "
                    << (more_b ? lb : "(end)");
      return;
    }
  }
}

// The viewer's way: the timeline built in the import's own reading of each file. `bytes_read` is what the readers
// went through for it.
Timeline timeline_in_one_reading(const std::vector<std::string>& inputs, int cycle, uint64_t& bytes_read) {
  KinetoTimelineParts parts;
  const KinetoFileEvents each_file = parts.reader();
  RunTrace run;
  Timeline tl;
  std::string err;
  const uint64_t before = trace_read_progress().done();
  EXPECT_TRUE(load_kineto_run(inputs, KinetoStageMap{}, run, err, cycle, &each_file)) << err;
  EXPECT_TRUE(timeline_from_kineto_run(run, parts, tl, err)) << err;
  bytes_read = trace_read_progress().done() - before;
  return tl;
}
}  // namespace

// The viewer reads each file once, building the timeline as the import reads: the same timeline, span for span, as
// reading every file again after the import — for every file set the import takes (clock shifts, cycles and one
// cycle picked, a trace cut off by a killed job) — from half the bytes.
TEST(KinetoTimeline, BuiltInTheImportsReadingEqualsReadingTheFilesAgain) {
  const std::string cycles = temp_dir("one_reading_cycles");
  for (int r = 0; r < 2; ++r) {
    write_shifted(rank_file("balanced", r), cycles + "/rank" + std::to_string(r) + ".1.pt.trace.json", 0);
    write_shifted(rank_file("balanced", r), cycles + "/rank" + std::to_string(r) + ".2.pt.trace.json", 30'000'000'000);
  }
  const std::string cut = temp_dir("one_reading_cut");
  write_text(cut + "/rank0.pt.trace.json", read_text(rank_file("slow-data-rank1", 0)));
  const std::string whole = read_text(rank_file("slow-data-rank1", 1));
  write_text(cut + "/rank1.pt.trace.json", whole.substr(0, whole.size() * 2 / 3));
  const struct {
    std::vector<std::string> inputs;
    int cycle;
  } cases[] = {{{kCpu + "/balanced"}, 0},
               {{kCpu + "/slow-data-rank1"}, 0},
               {{shifted_copy("balanced", 7.31)}, 0},
               {{cycles}, 0},
               {{cycles}, 2},
               {{cut}, 0}};
  for (const auto& c : cases) {
    const std::string what = c.inputs.front() + " cycle " + std::to_string(c.cycle);
    uint64_t once = 0;
    const Timeline one = timeline_in_one_reading(c.inputs, c.cycle, once);
    RunTrace run;
    std::string err;
    const uint64_t before = trace_read_progress().done();
    ASSERT_TRUE(load_kineto_run(c.inputs, KinetoStageMap{}, run, err, c.cycle)) << err;
    Timeline again;
    ASSERT_TRUE(timeline_from_kineto_run(run, again, err)) << err;
    const uint64_t twice = trace_read_progress().done() - before;
    EXPECT_GT(one.span_count, 1000u) << what;
    expect_same_text(timeline_text(one), timeline_text(again), what);
    // Every file read once (with one cycle picked the other's files are read too, as the import must to pair them).
    EXPECT_LT(once, twice) << what;
    if (c.cycle == 0) {
      EXPECT_EQ(2 * once, twice) << what;
    }
  }
  fs::remove_all(cycles);
  fs::remove_all(cut);
}
