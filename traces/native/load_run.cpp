#include "traces/native/load_run.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "traces/base/read_progress.h"
#include "traces/model/manifest.h"
#include "traces/native/trace_reader.h"

namespace ddp {
namespace fs = std::filesystem;

bool load_run(const std::string& dir, RunTrace& run, std::string& error) {
  run = RunTrace{};
  run.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    error = dir + " is not a directory";
    return false;
  }
  Manifest m;
  std::string why;
  if (read_manifest(dir, m, why))
    run.manifest = std::move(m);
  else
    run.problems.push_back(why);
  return load_rank_traces(dir, run, error);
}

bool load_rank_traces(const std::string& dir, RunTrace& run, std::string& error) {
  run.dir = dir;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!is_rank_trace_file(name)) continue;
    trace_read_progress().reading(entry.path().string());
    TraceReadResult r = read_trace_file(entry.path().string());
    trace_read_progress().advance(entry.file_size(ec));
    if (!r.ok()) {
      run.problems.push_back(r.message);
      continue;
    }
    if (!r.trace.damage.empty()) run.problems.push_back(name + ": " + r.trace.damage);
    run.ranks.push_back(std::move(r.trace));
  }
  std::sort(run.ranks.begin(), run.ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  if (run.ranks.empty()) {
    error = ec ? "cannot list " + dir + ": " + ec.message() : "no readable rank traces (rank<R>.ddpt) in " + dir;
    return false;
  }
  uint32_t world = run.ranks.front().world;
  if (run.ranks.size() < world)
    run.problems.push_back("only " + std::to_string(run.ranks.size()) + " of " + std::to_string(world) +
                           " rank traces are present");
  return true;
}

}  // namespace ddp
