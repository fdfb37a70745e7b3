#include "traces/run_folder.h"

#include "traces/parse_int.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>

namespace ddp {
namespace fs = std::filesystem;

namespace {
std::string rank_name(int rank) { return "rank" + std::to_string(rank); }
}  // namespace

std::string rank_trace_file(int rank) { return rank_name(rank) + ".ddpt"; }
bool is_rank_trace_file(const std::string& name, int* rank) {
  static const std::regex kRankFile(R"(rank(\d+)\.ddpt)");
  std::smatch m;
  if (!std::regex_match(name, m, kRankFile)) return false;
  return !rank || parse_int(m[1].str().c_str(), *rank);
}
std::string rank_log_file(int rank) { return std::string(kLogsDir) + "/" + rank_name(rank) + ".log"; }
std::string rank_progress_file(int rank) { return std::string(kProgressDir) + "/" + rank_name(rank) + ".bin"; }
std::string verify_log_file(int rank, const char* kind) {
  return std::string(kVerifyDir) + "/" + rank_name(rank) + "." + kind + ".jsonl";
}
bool is_verify_log_file(const std::string& name, const char* kind, int* rank) {
  const std::regex re("rank(\\d+)\\." + std::string(kind) + "\\.jsonl");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return false;
  return !rank || parse_int(m[1].str().c_str(), *rank);
}
std::string verify_step_file(int rank, int64_t step) {
  return std::string(kVerifyDir) + "/" + rank_name(rank) + "_step" + std::to_string(step) + ".pt";
}
bool is_verify_step_file(const std::string& name, int* rank, int64_t* step) {
  static const std::regex kStepFile(R"(rank(\d+)_step(\d+)\.pt)");
  std::smatch m;
  if (!std::regex_match(name, m, kStepFile)) return false;
  int64_t s = 0;
  if ((rank && !parse_int(m[1].str().c_str(), *rank)) || !parse_decimal(m[2].str(), s)) return false;
  if (step) *step = s;
  return true;
}
std::string kineto_rank_trace_file(int rank) { return rank_name(rank) + ".pt.trace.json"; }
namespace {
bool ends_with(const std::string& name, const char* tail) {
  const size_t n = std::char_traits<char>::length(tail);
  return name.size() > n && name.compare(name.size() - n, n, tail) == 0;
}
}  // namespace
bool is_trace_file_name(const std::string& name) { return ends_with(name, ".json") || ends_with(name, ".json.gz"); }
bool is_hta_input_name(const std::string& name) { return ends_with(name, ".json") || ends_with(name, ".gz"); }
std::string checkpoint_folder(int64_t step) { return "checkpoints/step" + std::to_string(step); }
std::string checkpoint_rank_file(int rank) { return rank_name(rank) + ".pt"; }

int64_t RunTrace::origin_ns() const {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& r : ranks) {
    int64_t off = r.clock_offset_ns();
    for (const auto& e : r.events) origin = std::min(origin, e.t0 + off);
  }
  return origin == std::numeric_limits<int64_t>::max() ? 0 : origin;
}

bool load_run(const std::string& dir, RunTrace& run, std::string& error) {
  run = RunTrace{};
  run.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    error = dir + " is not a directory";
    return false;
  }
  fs::path manifest = fs::path(dir) / kManifestFile;
  if (fs::exists(manifest, ec)) {
    std::ifstream in(manifest);
    run.manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (run.manifest.is_discarded()) {
      run.problems.push_back(std::string(kManifestFile) + " is not valid JSON");
      run.manifest = nullptr;
    }
  } else {
    run.problems.push_back(std::string(kManifestFile) + " is missing");
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!is_rank_trace_file(name)) continue;
    TraceReadResult r = read_trace_file(entry.path().string());
    if (!r.ok()) {
      run.problems.push_back(r.message);
      continue;
    }
    if (!r.trace.damage.empty()) run.problems.push_back(name + ": " + r.trace.damage);
    run.ranks.push_back(std::move(r.trace));
  }
  std::sort(run.ranks.begin(), run.ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  if (run.ranks.empty()) {
    error = "no readable rank traces (rank<R>.ddpt) in " + dir;
    return false;
  }
  uint32_t world = run.ranks.front().world;
  if (run.ranks.size() < world)
    run.problems.push_back("only " + std::to_string(run.ranks.size()) + " of " + std::to_string(world) +
                           " rank traces are present");
  return true;
}

}  // namespace ddp
