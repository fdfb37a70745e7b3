#pragma once
// What the Kineto import tests share: loading the committed traces, reading JSON back, counting stages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "tests/traces/kineto/kineto_test_files.h"
#include "traces/analysis/analysis.h"
#include "traces/analysis/summary.h"
#include "traces/base/read_progress.h"
#include "traces/chrome/chrome_export.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/kineto/kineto_align.h"
#include "traces/kineto/kineto_file.h"
#include "traces/kineto/kineto_import.h"
#include "traces/kineto/kineto_merge.h"
#include "traces/timeline/timeline.h"
#include "traces/timeline/timeline_kineto.h"

namespace fs = std::filesystem;
using namespace ddp;

namespace kineto_import_test {
inline const std::string kData = ddptest::kKinetoData;
inline const std::string kCpu = ddptest::kKinetoCpu;

inline std::string temp_dir(const std::string& name) { return ddptest::kineto_temp_dir(name); }
inline std::string rank_file(const std::string& scenario, int rank) {
  return ddptest::kineto_rank_file(scenario, rank);
}

inline nlohmann::json read_json_file(const std::string& path) {
  std::string text;
  EXPECT_TRUE(read_chrome_bytes(path, text).ok()) << path;
  return nlohmann::json::parse(text);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline RunTrace load(const std::vector<std::string>& inputs, const std::vector<std::string>& maps = {}) {
  KinetoStageMap map;
  std::string err;
  for (const auto& m : maps) EXPECT_TRUE(map.add_user_rule(m, err)) << err;
  RunTrace run;
  EXPECT_TRUE(load_kineto_run(inputs, map, run, err)) << err;
  return run;
}

inline std::string load_error(const std::vector<std::string>& inputs) {
  RunTrace run;
  std::string err;
  EXPECT_FALSE(load_kineto_run(inputs, KinetoStageMap{}, run, err));
  return err;
}

inline size_t count(const RankTrace& r, Stage s) {
  size_t n = 0;
  for (const Event& e : r.events) n += e.is_span() && e.stage_id() == s;
  return n;
}

inline std::optional<Stage> stage_of(const char* name, const char* cat, const char* coll = "") {
  KinetoStageMap map;
  auto m = map.classify(name, cat, coll);
  return m ? std::optional<Stage>(m->stage) : std::nullopt;
}

// A real pair with rank 1's clock moved by a known amount (every ts of a temp copy shifted; the two ranks ran on one
// host, so their true offset is 0 and the known offset is the shift). The estimate moves by exactly the shift, the
// shift lies inside the causality bounds, and the analysis verdict does not change. Where no rank is CPU-starved (the
// balanced pair) the estimate is also within its stated spread; in the planted runs a starved rank records the end
// of each collective late by a steady amount (up to 1.5 ms here) that the spread cannot show and the bounds do.
inline std::string shifted_copy(const std::string& scenario, double shift_ms) {
  std::string d = temp_dir("shift_" + scenario);
  fs::copy_file(rank_file(scenario, 0), d + "/rank0.pt.trace.json.gz");
  nlohmann::json j = read_json_file(rank_file(scenario, 1));
  for (auto& e : j["traceEvents"])
    if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + shift_ms * 1000;
  write_text(d + "/rank1.pt.trace.json", j.dump());
  return d;
}

}  // namespace kineto_import_test
