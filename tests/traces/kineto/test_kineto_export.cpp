// One of our runs written as per-rank PyTorch profiler (Kineto) traces (traces/kineto/kineto_export.h) and read back by
// our own Kineto importer: the same ranks, world, steps and stage totals, the collectives matched for the clock, and
// the details other Kineto readers depend on (HTA's rank regex, baseTimeNanoseconds, categories, pid/tid, flows).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/test_manifest.h"
#include "traces/kineto/kineto_export.h"
#include "traces/kineto/kineto_import.h"
#include "traces/native/load_run.h"
#include "traces/native/trace_writer.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;

constexpr int64_t kMs = 1'000'000;
constexpr int kSteps = 5;
constexpr uint64_t kBucketBytes = 268'296;

std::string temp_dir(const std::string& tag) {
  auto d = fs::temp_directory_path() / ("ddp_kineto_export_" + std::to_string(::getpid()) + "_" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Event span(Stage s, uint8_t lane, int64_t t0, int64_t t1, uint32_t step, uint64_t value = 0) {
  Event e = make_span(s, lane, t0, t1);
  e.step = step;
  e.value = value;
  return e;
}

// A rank's clock runs `rank` x 3 ms behind rank 0's; its start measurement says so, and the export must undo it.
int64_t clock_offset(uint32_t rank) { return 3 * kMs * rank; }

// A two-rank CPU step loop: main (step, wait_data, h2d, forward, backward, wait_comm, optimizer), comm (the bucket's
// allreduce, ending at one instant on both ranks as a collective does), loader/0 (disk_read), memory (a counter).
// Rank 1 is slower in forward, so the ranks' stage totals differ.
void write_cpu_rank(const std::string& dir, uint32_t rank) {
  enum : uint8_t { kMain, kComm, kLoader, kMemory };
  TraceWriter w;
  std::string err;
  ASSERT_TRUE(w.open(dir + "/" + rank_trace_file(static_cast<int>(rank)), rank, 2, err)) << err;
  w.write_lane(kMain, "main");
  w.write_lane(kComm, "comm");
  w.write_lane(kLoader, "loader/0");
  w.write_lane(kMemory, "memory");
  w.write_meta("host", "node" + std::to_string(rank));
  format::ClockPayload clock{};
  clock.offset_ns = clock_offset(rank);
  w.write_clock(clock);
  std::vector<Event> main, comm, loader, memory;
  for (uint32_t k = 0; k < kSteps; ++k) {
    const int64_t t = 10'000 * kMs + k * 10 * kMs - clock_offset(rank);  // the step's start, local clock
    const int64_t fwd_end = t + (rank ? 3 : 2) * kMs, bwd_end = fwd_end + 2 * kMs, comm_end = t + 7 * kMs;
    main.push_back(span(Stage::step, kMain, t, t + 9 * kMs, k));
    main.push_back(span(Stage::wait_data, kMain, t, t + kMs / 2, k));
    main.push_back(span(Stage::h2d, kMain, t + kMs / 2, t + kMs, k, 33'280));
    main.push_back(span(Stage::forward, kMain, t + kMs, fwd_end, k));
    main.push_back(span(Stage::backward, kMain, fwd_end, bwd_end, k));
    main.push_back(span(Stage::wait_comm, kMain, bwd_end, comm_end, k));
    main.push_back(span(Stage::optimizer, kMain, comm_end, t + 9 * kMs, k));
    comm.push_back(span(Stage::allreduce, kComm, bwd_end - kMs, comm_end, k, kBucketBytes));
    loader.push_back(span(Stage::disk_read, kLoader, t + kMs / 10, t + kMs / 5, k, 33'024));
    Event rss;
    rss.kind = static_cast<uint8_t>(EventKind::counter);
    rss.stage = static_cast<uint8_t>(Counter::host_rss_bytes);
    rss.lane = kMemory;
    rss.t0 = rss.t1 = t;
    rss.value = 100 << 20;
    memory.push_back(rss);
  }
  ASSERT_TRUE(w.write_events(kMain, main.data(), main.size()));
  ASSERT_TRUE(w.write_events(kComm, comm.data(), comm.size()));
  ASSERT_TRUE(w.write_events(kLoader, loader.data(), loader.size()));
  ASSERT_TRUE(w.write_events(kMemory, memory.data(), memory.size()));
  w.write_end(main.size() + comm.size() + loader.size() + memory.size(), 0);
  w.close();
}

// Our job's manifest with the ranks' pids 4242 and 4343 and `extra` merged in (RFC 7386).
void write_manifest(const std::string& dir, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json m = ddp::testing::our_job_manifest_json(2);
  m["ranks"][0]["pid"] = 4242;
  m["ranks"][1]["pid"] = 4343;
  m.merge_patch(extra);
  std::ofstream(dir + "/" + kManifestFile) << m.dump(2);
}

RunTrace load_our_run(const std::string& dir) {
  RunTrace run;
  std::string err;
  EXPECT_TRUE(load_run(dir, run, err)) << err;
  return run;
}

KinetoExportStats export_to(const RunTrace& run, const std::string& out) {
  KinetoExportStats stats;
  std::string err;
  EXPECT_TRUE(export_kineto(run, out, stats, err)) << err;
  return stats;
}

// Our CPU stages without a PyTorch name come back with the --map rules docs/kineto.md gives.
RunTrace load_as_kineto(const std::string& dir) {
  KinetoStageMap map;
  std::string err;
  for (const char* rule : {"^ddp_profile::h2d$=h2d", "^ddp_profile::disk_read$=disk_read"})
    EXPECT_TRUE(map.add_user_rule(rule, err)) << err;
  RunTrace run;
  EXPECT_TRUE(load_kineto_run({dir}, map, run, err)) << err;
  return run;
}

struct StageTotal {
  size_t count = 0;
  int64_t ns = 0;
  uint64_t bytes = 0;
  bool operator==(const StageTotal& o) const { return count == o.count && ns == o.ns && bytes == o.bytes; }
};
std::map<Stage, StageTotal> stage_totals(const RankTrace& r) {
  std::map<Stage, StageTotal> out;
  for (const Event& e : r.events) {
    if (!e.is_span()) continue;
    StageTotal& t = out[e.stage_id()];
    ++t.count;
    t.ns += e.duration();
    t.bytes += e.value;
  }
  return out;
}
std::set<uint32_t> steps_of(const RankTrace& r) {
  std::set<uint32_t> s;
  for (const Event& e : r.events)
    if (e.is_span() && e.stage_id() == Stage::step) s.insert(e.step);
  return s;
}

nlohmann::json parse_file(const std::string& path) {
  auto j = nlohmann::json::parse(read_text(path), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path << " is not valid JSON";
  return j;
}

// The rank HTA reads: the first line matching "rank":\s+(\d+) (hta/common/trace_file.py).
int hta_rank(const std::string& path) {
  static const std::regex kRank(R"re("rank":\s+(\d+))re");
  std::ifstream in(path);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, kRank)) return std::stoi(m[1].str());
  return -1;
}

std::string cpu_run(const std::string& tag) {
  const std::string d = temp_dir(tag);
  write_cpu_rank(d, 0);
  write_cpu_rank(d, 1);
  write_manifest(d);
  return d;
}

}  // namespace

TEST(RunAsKineto, ReadBackByOurImporterGivesTheSameRanksStepsAndStageTotals) {
  const std::string d = cpu_run("roundtrip");
  const RunTrace ours = load_our_run(d);
  const std::string out = d + "/kineto";
  const KinetoExportStats stats = export_to(ours, out);
  ASSERT_EQ(stats.files, (std::vector<std::string>{out + "/rank0.pt.trace.json", out + "/rank1.pt.trace.json"}));

  const RunTrace back = load_as_kineto(out);
  ASSERT_TRUE(is_kineto_run(back));
  ASSERT_EQ(back.ranks.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const RankTrace &a = ours.ranks[i], &b = back.ranks[i];
    EXPECT_EQ(b.rank, a.rank);
    EXPECT_EQ(b.world, 2u);
    EXPECT_EQ(steps_of(b), steps_of(a));
    const auto ta = stage_totals(a), tb = stage_totals(b);
    // wait_comm is derived by the importer (backward's end to the collective's end), as for any Kineto trace: the
    // synthetic run records exactly that span, so it too must come back unchanged.
    for (Stage s : {Stage::step, Stage::wait_data, Stage::h2d, Stage::forward, Stage::backward, Stage::allreduce,
                    Stage::wait_comm, Stage::optimizer, Stage::disk_read}) {
      ASSERT_TRUE(tb.count(s)) << "rank " << a.rank << " " << stage_name(s) << " did not come back";
      EXPECT_EQ(tb.at(s).count, ta.at(s).count) << stage_name(s);
      EXPECT_NEAR(static_cast<double>(tb.at(s).ns), static_cast<double>(ta.at(s).ns), 1.0 * ta.at(s).count)
          << "rank " << a.rank << " " << stage_name(s);
    }
    // Kineto carries a size only for collectives (record_param_comms) and copies; ours stay in the ddp_bytes args.
    EXPECT_EQ(tb.at(Stage::allreduce).bytes, ta.at(Stage::allreduce).bytes);
  }
  // Both files are on rank 0's clock (rank 1's measured offset applied): the importer matches every allreduce and
  // finds no offset left. Without the offset applied it would find 3 ms.
  const nlohmann::json align = kineto_report_json(back)["clock_alignment"];
  ASSERT_EQ(align.size(), 2u);
  EXPECT_EQ(align[1]["collectives"], kSteps);
  EXPECT_NEAR(align[1]["offset_ms"].get<double>(), 0.0, 1e-3) << align.dump();
}

TEST(RunAsKineto, HeaderIsWhatKinetoAndHtaWrite) {
  const std::string d = cpu_run("header");
  const RunTrace ours = load_our_run(d);
  const std::string out = d + "/kineto";
  export_to(ours, out);
  for (int rank : {0, 1}) {
    const std::string path = out + "/" + kineto_rank_trace_file(rank);
    EXPECT_EQ(hta_rank(path), rank) << "HTA's regex needs \"rank\": R with a space";
    const nlohmann::json j = parse_file(path);
    EXPECT_EQ(j["schemaVersion"], 1);
    EXPECT_EQ(j["distributedInfo"]["backend"], "gloo");
    EXPECT_EQ(j["distributedInfo"]["rank"], rank);
    EXPECT_EQ(j["distributedInfo"]["world_size"], 2);
    EXPECT_FALSE(j.contains("deviceProperties")) << "a CPU run has no devices to describe";
    // Kineto's clock: baseTimeNanoseconds + ts (microseconds) is the wall clock. The run's first event is dated by
    // rank 0's trace file creation, and the base is that instant rounded down to the second.
    const int64_t base = j["baseTimeNanoseconds"];
    EXPECT_EQ(base % 1'000'000'000, 0);
    double first_ts = 1e300;
    for (const auto& e : j["traceEvents"])
      if (e["ph"] == "X") first_ts = std::min(first_ts, e["ts"].get<double>());
    const int64_t first_ns = base + static_cast<int64_t>(first_ts * 1000 + 0.5);
    EXPECT_NEAR(static_cast<double>(first_ns), static_cast<double>(ours.ranks[0].created_unix_ns), 1000.0);
  }
}

TEST(RunAsKineto, StagesHaveKinetoNamesCategoriesAndThreads) {
  const std::string d = cpu_run("names");
  export_to(load_our_run(d), d + "/kineto");
  const nlohmann::json j = parse_file(d + "/kineto/rank1.pt.trace.json");
  std::map<std::string, std::string> cat_of;
  std::map<int64_t, std::string> thread_names;
  nlohmann::json comms;
  size_t counters = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "C") ++counters;
    if (e["ph"] != "X") continue;
    EXPECT_EQ(e["pid"], 4343) << "host threads live under the rank's process id from the manifest";
    cat_of[e["name"]] = e["cat"];
    if (e["name"] == "record_param_comms") comms = e;
  }
  EXPECT_EQ(cat_of["ProfilerStep#3"], "user_annotation");
  EXPECT_EQ(cat_of["DistributedDataParallel.forward"], "user_annotation");
  EXPECT_EQ(cat_of["Optimizer.step#AdamW.step"], "user_annotation");
  EXPECT_EQ(cat_of["gloo:all_reduce"], "user_annotation");
  EXPECT_EQ(cat_of["record_param_comms"], "cpu_op");
  EXPECT_EQ(cat_of["ddp_profile::h2d"], "cpu_op");
  EXPECT_EQ(cat_of["ddp_profile::wait_comm"], "cpu_op");
  EXPECT_EQ(comms["args"]["Collective name"], "allreduce");
  EXPECT_EQ(comms["args"]["In msg nelems"], kBucketBytes / 4);
  EXPECT_EQ(comms["args"]["dtype"], "Float");
  EXPECT_EQ(comms["args"]["Process Group Name"], "0");
  EXPECT_EQ(comms["args"]["Process Group Ranks"], "[0, 1]");
  EXPECT_EQ(thread_names[4343], "thread 4343 (main)") << "the main thread's tid is the process id, as on Linux";
  EXPECT_EQ(thread_names[4344], "thread 4344 (comm)");
  EXPECT_EQ(counters, static_cast<size_t>(kSteps));
}

namespace {
// A GPU rank: main (forward), cuda_api/0 (launches), gpu0/stream7 (kernels), gpu0/stream13 (the NCCL allreduce and
// a copy). Correlations link each launch to its GPU work.
void write_gpu_rank(const std::string& dir, uint32_t rank) {
  enum : uint8_t { kMain, kApi, kCompute, kNccl };
  TraceWriter w;
  std::string err;
  ASSERT_TRUE(w.open(dir + "/" + rank_trace_file(static_cast<int>(rank)), rank, 2, err)) << err;
  w.write_lane(kMain, "main");
  w.write_lane(kApi, "cuda_api/0");
  w.write_lane(kCompute, "gpu0/stream7");
  w.write_lane(kNccl, "gpu0/stream13");
  w.write_meta("gpu_name/0", "cudaLaunchKernel");
  w.write_meta("gpu_name/1", "void gemm<float>(float const*)");
  w.write_meta("gpu_name/2", "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  w.write_meta("gpu_name/3", "Memcpy HtoD (Pinned -> Device)");
  auto cuda = [](Stage s, uint8_t lane, int64_t t0, int64_t t1, uint32_t corr, uint16_t name, uint64_t bytes = 0) {
    Event e = span(s, lane, t0, t1, 0, bytes);
    e.item = corr;
    e.bucket = name;
    return e;
  };
  std::vector<Event> main = {span(Stage::step, kMain, 0, 90'000, 0), span(Stage::forward, kMain, 1'000, 50'000, 0)};
  std::vector<Event> api = {cuda(Stage::cuda_api, kApi, 2'000, 3'000, 11, 0),
                            cuda(Stage::cuda_api, kApi, 4'000, 5'000, 12, 0),
                            cuda(Stage::cuda_api, kApi, 6'000, 7'000, 13, 0)};
  std::vector<Event> compute = {cuda(Stage::kernel, kCompute, 10'000, 20'000, 11, 1)};
  std::vector<Event> nccl = {cuda(Stage::nccl, kNccl, 20'000, 30'000, 12, 2, kBucketBytes),
                             cuda(Stage::memcpy_h2d, kNccl, 31'000, 32'000, 13, 3, 1 << 20)};
  ASSERT_TRUE(w.write_events(kMain, main.data(), main.size()));
  ASSERT_TRUE(w.write_events(kApi, api.data(), api.size()));
  ASSERT_TRUE(w.write_events(kCompute, compute.data(), compute.size()));
  ASSERT_TRUE(w.write_events(kNccl, nccl.data(), nccl.size()));
  w.write_end(8, 0);
  w.close();
}
}  // namespace

TEST(RunAsKineto, GpuWorkUnderTheDeviceWithLaunchFlowsAndDeviceProperties) {
  const std::string d = temp_dir("gpu");
  write_gpu_rank(d, 0);
  write_gpu_rank(d, 1);
  write_manifest(
      d,
      {{"backend", "nccl"},
       {"versions",
        {{"cuda",
          {{"device", "NVIDIA H200"}, {"compute_capability", "9.0"}, {"device_memory_bytes", 150'000'000'000ull}}}}}});
  const RunTrace ours = load_our_run(d);
  const KinetoExportStats stats = export_to(ours, d + "/kineto");
  EXPECT_EQ(stats.flows, 2u * 3u);

  const nlohmann::json j = parse_file(d + "/kineto/rank0.pt.trace.json");
  ASSERT_EQ(j["deviceProperties"].size(), 1u);
  EXPECT_EQ(j["deviceProperties"][0]["id"], 0);
  EXPECT_EQ(j["deviceProperties"][0]["name"], "NVIDIA H200");
  EXPECT_EQ(j["deviceProperties"][0]["computeMajor"], 9);
  EXPECT_EQ(j["deviceProperties"][0]["totalGlobalMem"], 150'000'000'000ull);
  EXPECT_EQ(j["distributedInfo"]["backend"], "nccl");
  std::map<std::string, nlohmann::json> by_name;
  std::map<uint64_t, nlohmann::json> starts, finishes;
  std::string gpu_label;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_labels" && e["pid"] == 0) gpu_label = e["args"]["labels"];
    if (e["ph"] == "s") starts[e["id"]] = e;
    if (e["ph"] == "f") finishes[e["id"]] = e;
    if (e["ph"] == "X") by_name[e["name"]] = e;
  }
  EXPECT_EQ(gpu_label, "GPU 0");
  const auto& kernel = by_name["void gemm<float>(float const*)"];
  EXPECT_EQ(kernel["cat"], "kernel");
  EXPECT_EQ(kernel["pid"], 0) << "GPU work lives under the device";
  EXPECT_EQ(kernel["tid"], 7) << "one thread per stream";
  EXPECT_EQ(kernel["args"]["stream"], 7);
  EXPECT_EQ(kernel["args"]["correlation"], 11);
  const auto& nccl = by_name["ncclDevKernel_AllReduce_Sum_f32_RING_LL"];
  EXPECT_EQ(nccl["tid"], 13);
  EXPECT_EQ(nccl["args"]["Collective name"], "allreduce");
  EXPECT_EQ(nccl["args"]["In msg nelems"], kBucketBytes / 4);
  EXPECT_EQ(by_name["Memcpy HtoD (Pinned -> Device)"]["cat"], "gpu_memcpy");
  EXPECT_EQ(by_name["Memcpy HtoD (Pinned -> Device)"]["args"]["bytes"], 1 << 20);
  EXPECT_EQ(by_name["cudaLaunchKernel"]["cat"], "cuda_runtime");
  EXPECT_EQ(by_name["cudaLaunchKernel"]["pid"], 4242);
  ASSERT_TRUE(starts.count(11) && finishes.count(11));
  EXPECT_EQ(starts[11]["tid"], by_name["cudaLaunchKernel"]["tid"]);
  EXPECT_EQ(finishes[11]["tid"], 7);
  EXPECT_EQ(finishes[11]["bp"], "e");
  EXPECT_EQ(starts[11]["cat"], "ac2g");
  // A host op never shares its External id with a CUDA record (readers tie those two together).
  std::set<uint64_t> host_ids, cuda_ids;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e.contains("args") && e["args"].contains("External id"))
      (e["args"].contains("correlation") ? cuda_ids : host_ids).insert(e["args"]["External id"].get<uint64_t>());
  ASSERT_FALSE(host_ids.empty());
  for (uint64_t id : host_ids) EXPECT_FALSE(cuda_ids.count(id)) << "External id " << id << " is a kernel's too";

  // Our importer classifies the GPU work as it was recorded.
  const RunTrace back = load_as_kineto(d + "/kineto");
  ASSERT_EQ(back.ranks.size(), 2u);
  const auto ta = stage_totals(ours.ranks[0]), tb = stage_totals(back.ranks[0]);
  for (Stage s : {Stage::kernel, Stage::nccl, Stage::memcpy_h2d, Stage::cuda_api, Stage::forward})
    EXPECT_TRUE(tb.count(s) && tb.at(s) == ta.at(s)) << stage_name(s);
}

// A manifest claiming billions of ranks is damage: the export lists the ranks it has, and does not hang.
TEST(RunAsKineto, AnAbsurdWorldSizeInTheManifestIsNotBelieved) {
  const std::string d = temp_dir("world");
  write_cpu_rank(d, 0);
  write_cpu_rank(d, 1);
  write_manifest(d, {{"world_size", 4'000'000'000u}});
  export_to(load_our_run(d), d + "/kineto");
  const nlohmann::json j = parse_file(d + "/kineto/rank0.pt.trace.json");
  EXPECT_EQ(j["distributedInfo"]["world_size"], 2);
}

TEST(RunAsKineto, OtherTracesInTheFolderAreNamedOursAreNot) {
  const std::string d = cpu_run("foreign");
  const RunTrace run = load_our_run(d);
  const std::string out = d + "/kineto";
  EXPECT_TRUE(foreign_trace_files(run, out).empty()) << "a folder that does not exist holds nothing";
  export_to(run, out);
  EXPECT_TRUE(foreign_trace_files(run, out).empty()) << "an earlier export of the same ranks is replaced";
  std::ofstream(out + "/notes.txt") << "not a trace";
  std::ofstream(out + "/rank5.pt.trace.json") << "{}";  // a rank of a bigger run exported here before
  std::ofstream(out + "/worker.123.pt.trace.json.gz") << "";
  EXPECT_EQ(foreign_trace_files(run, out),
            (std::vector<std::string>{out + "/rank5.pt.trace.json", out + "/worker.123.pt.trace.json.gz"}));
}

TEST(RunAsKineto, AFailedWriteNamesTheFileAndLeavesNoPartialFile) {
  const std::string d = cpu_run("failed_write");
  const RunTrace run = load_our_run(d);
  KinetoExportStats stats;
  std::string err;
  const std::string blocked = d + "/blocked";
  std::ofstream(blocked) << "a file where the folder should be";
  EXPECT_FALSE(export_kineto(run, blocked, stats, err));
  EXPECT_NE(err.find(blocked), std::string::npos) << err;

  // rank 1's file name is taken by a folder: rank 0 is written whole, rank 1 fails by name, no temp file stays.
  const std::string out = d + "/kineto";
  fs::create_directories(out + "/" + kineto_rank_trace_file(1) + "/x");
  err.clear();
  EXPECT_FALSE(export_kineto(run, out, stats, err));
  EXPECT_NE(err.find(kineto_rank_trace_file(1)), std::string::npos) << err;
  EXPECT_FALSE(parse_file(out + "/" + kineto_rank_trace_file(0)).is_discarded());
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}
