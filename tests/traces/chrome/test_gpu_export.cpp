// Chrome export of CUDA activity: kernel/API names from the trace's name table, Kineto categories, and flow events
// from each API call to the GPU work it launched. The output is parsed back (nlohmann and our own Chrome reader).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "traces/chrome/chrome_export.h"
#include "traces/model/run_folder.h"
#include "traces/native/load_run.h"
#include "traces/native/trace_writer.h"
#include "traces/timeline/timeline.h"

namespace {
namespace fs = std::filesystem;
using namespace ddp;

std::string temp_dir(const char* tag) {
  auto d = fs::temp_directory_path() / ("ddp_gpu_export_" + std::to_string(::getpid()) + "_" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

Event span(Stage s, int64_t t0, int64_t t1, uint8_t lane, uint32_t item = 0, uint16_t bucket = kNoBucket,
           uint64_t value = 0) {
  Event e = make_span(s, lane, t0, t1);
  e.item = item;
  e.bucket = bucket;
  e.value = value;
  e.step = 4;
  return e;
}

// rank 0: main (forward), cuda_api/0 (two launches, a copy and a sync), gpu0/stream7 (kernels), gpu0/stream13 (copy)
void write_rank(const std::string& path, uint32_t rank) {
  TraceWriter w;
  std::string err;
  ASSERT_TRUE(w.open(path, rank, 2, err)) << err;
  w.write_lane(0, "main");
  w.write_lane(1, "cuda_api/0");
  w.write_lane(2, "gpu0/stream7");
  w.write_lane(3, "gpu0/stream13");
  w.write_meta("host", "test");
  w.write_meta("gpu_name/0", "cudaLaunchKernel");
  w.write_meta("gpu_name/1", "void gemm<float, \"quoted\">(float const*)");
  w.write_meta("gpu_name/2", "memcpy HtoD pinned->device");
  w.write_meta("gpu_name/3", "cudaStreamSynchronize");
  w.write_meta("gpu_name/4", "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  w.write_meta("gpu_name/5", "cudaMemcpyAsync");
  std::vector<Event> main = {span(Stage::forward, 1'000, 50'000, 0)};
  std::vector<Event> api = {span(Stage::cuda_api, 2'000, 3'000, 1, 11, 0),
                            span(Stage::cuda_api, 4'000, 5'000, 1, 12, 0),
                            span(Stage::cuda_api, 6'000, 7'000, 1, 13, 5),
                            span(Stage::cuda_api, 8'000, 40'000, 1, 14, 3), span(Stage::sync, 8'100, 39'900, 1, 14, 3)};
  std::vector<Event> gpu = {span(Stage::kernel, 10'000, 20'000, 2, 11, 1), span(Stage::nccl, 20'000, 30'000, 2, 12, 4),
                            span(Stage::kernel, 30'000, 31'000, 2, 99, 1)};  // no API call recorded: no arrow
  std::vector<Event> copy = {span(Stage::memcpy_h2d, 9'000, 9'500, 3, 13, 2, 1 << 20)};
  ASSERT_TRUE(w.write_events(0, main.data(), main.size()));
  ASSERT_TRUE(w.write_events(1, api.data(), api.size()));
  ASSERT_TRUE(w.write_events(2, gpu.data(), gpu.size()));
  ASSERT_TRUE(w.write_events(3, copy.data(), copy.size()));
  w.write_end(10, 0);
  w.close();
}

TEST(ChromeExportGpu, NamesCategoriesAndLaunchFlows) {
  std::string d = temp_dir("flows");
  write_rank(d + "/" + rank_trace_file(0), 0);
  write_rank(d + "/" + rank_trace_file(1), 1);
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load_run(d, run, err)) << err;
  ExportStats stats;
  ASSERT_TRUE(export_chrome(run, d + "/trace.json", stats, err)) << err;
  EXPECT_EQ(stats.events, 2u * 10u);
  EXPECT_EQ(stats.flows, 2u * 3u);  // per rank: kernel 11, nccl 12, copy 13

  std::ifstream in(d + "/trace.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "trace.json is not valid JSON";
  std::map<std::string, int> tid_of;  // rank 0 lane names
  std::map<uint64_t, nlohmann::json> starts, finishes;
  std::vector<nlohmann::json> kernels, apis, copies, syncs;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name" && e["pid"] == 0) tid_of[e["args"]["name"]] = e["tid"];
    if (ph == "s" || ph == "f") {
      ASSERT_TRUE(e["id"].is_number_unsigned());
      ASSERT_TRUE(e["ts"].is_number());
      EXPECT_EQ(e["cat"], "ac2g");
      (ph == "s" ? starts : finishes)[e["id"].get<uint64_t>()] = e;
      if (ph == "f") {
        EXPECT_EQ(e["bp"], "e");
      }
    }
    if (ph != "X" || e["pid"] != 0) continue;
    const std::string cat = e["cat"];
    if (cat == "kernel") kernels.push_back(e);
    if (cat == "cuda_runtime") apis.push_back(e);
    if (cat == "gpu_memcpy") copies.push_back(e);
    if (cat == "cuda_sync") syncs.push_back(e);
  }
  ASSERT_EQ(kernels.size(), 3u);
  ASSERT_EQ(apis.size(), 4u);
  ASSERT_EQ(copies.size(), 1u);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(kernels[0]["name"], "void gemm<float, \"quoted\">(float const*)");
  EXPECT_EQ(kernels[0]["args"]["correlation"], 11);
  EXPECT_EQ(kernels[0]["args"]["stage"], "kernel");
  EXPECT_EQ(kernels[1]["name"], "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(kernels[1]["args"]["stage"], "nccl");
  EXPECT_FALSE(kernels[0]["args"].contains("bucket")) << "bucket holds the name id for CUDA events";
  EXPECT_EQ(apis[0]["name"], "cudaLaunchKernel");
  EXPECT_EQ(copies[0]["name"], "memcpy HtoD pinned->device");
  EXPECT_EQ(copies[0]["args"]["bytes"], 1 << 20);
  EXPECT_EQ(syncs[0]["name"], "cudaStreamSynchronize");
  EXPECT_EQ(kernels[0]["tid"], tid_of.at("gpu0/stream7"));

  // Every start has its finish; ids are unique across ranks; the arrow runs from the API lane to the GPU lane.
  ASSERT_EQ(starts.size(), 6u);
  ASSERT_EQ(finishes.size(), 6u);
  const uint64_t id = 11;  // rank 0, correlation 11
  ASSERT_TRUE(starts.count(id) && finishes.count(id));
  EXPECT_EQ(starts[id]["tid"], tid_of.at("cuda_api/0"));
  EXPECT_EQ(finishes[id]["tid"], tid_of.at("gpu0/stream7"));
  EXPECT_DOUBLE_EQ(finishes[id]["ts"].get<double>() - starts[id]["ts"].get<double>(), 8.0);  // 10'000 - 2'000 ns
  EXPECT_TRUE(starts.count((uint64_t{1} << 32) | 11));
  EXPECT_FALSE(starts.count(99)) << "no arrow without a recorded API call";

  // The viewer's reader takes the file, flows and all, and sees kernels as kernels.
  Timeline tl;
  ASSERT_TRUE(timeline_from_chrome_file(d + "/trace.json", tl, err)) << err;
  uint64_t k = 0, n = 0, h2d = 0;
  for (const auto& p : tl.processes) {
    k += p.stages[static_cast<size_t>(Stage::kernel)].count;
    n += p.stages[static_cast<size_t>(Stage::nccl)].count;
    h2d += p.stages[static_cast<size_t>(Stage::memcpy_h2d)].count;
  }
  EXPECT_EQ(k, 4u);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(h2d, 2u);
}

TEST(ChromeExportGpu, UnnamedCudaEventsFallBackToTheStageName) {
  std::string d = temp_dir("unnamed");
  {
    TraceWriter w;
    std::string err;
    ASSERT_TRUE(w.open(d + "/" + rank_trace_file(0), 0, 1, err)) << err;
    w.write_lane(0, "gpu0/stream7");
    std::vector<Event> ev = {span(Stage::kernel, 0, 10, 0, 1, 7), span(Stage::memset, 20, 30, 0, 2, kNoBucket, 64)};
    ASSERT_TRUE(w.write_events(0, ev.data(), ev.size()));
    w.write_end(2, 0);
  }
  RunTrace run;
  std::string err;
  ASSERT_TRUE(load_run(d, run, err)) << err;
  ExportStats stats;
  ASSERT_TRUE(export_chrome(run, d + "/trace.json", stats, err)) << err;
  EXPECT_EQ(stats.flows, 0u);
  std::ifstream in(d + "/trace.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  std::vector<std::string> names;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") names.push_back(e["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"kernel", "memset"}));
}

}  // namespace
