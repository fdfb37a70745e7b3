// Reading a run folder for --diff: manifest, rank traces (summarized), verify/ tensor summaries and replica hashes.
#include <filesystem>
#include <fstream>

#include "traces/base/json_lines.h"
#include "traces/diff/run_diff.h"
#include "traces/model/records.h"
#include "traces/model/step_window.h"
#include "traces/native/load_run.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {

// The verification log's files of one kind, by rank; a folder that cannot be listed is a line in `problems`.
std::map<int, fs::path> verify_files(const fs::path& dir, const char* kind, std::vector<std::string>& problems) {
  std::map<int, fs::path> out;
  std::error_code ec;
  fs::path vdir = dir / kVerifyDir;
  if (!fs::is_directory(vdir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(vdir, ec)) {
    int rank = 0;
    if (is_verify_log_file(entry.path().filename().string(), kind, &rank)) out[rank] = entry.path();
  }
  if (ec) problems.push_back("cannot list " + vdir.string() + ": " + ec.message());
  return out;
}

// Every line of `path` that reads as a record R (traces/model/records.def), in order. --diff compares what it can:
// damaged lines and lines that break the record's contract are counted, the first one named, in `problems`.
template <class R>
std::vector<R> read_lenient(const fs::path& path, std::vector<std::string>& problems) {
  JsonLines lines;
  std::string err;
  std::vector<R> out;
  if (!read_json_lines(path.string(), lines, err)) {
    problems.push_back(err);
    return out;
  }
  size_t refused = 0;
  std::string first;
  for (size_t i = 0; i < lines.objects.size(); ++i) {
    R r;
    std::string why;
    if (records::read(lines.objects[i], r, why))
      out.push_back(std::move(r));
    else if (refused++ == 0)
      first = "line " + std::to_string(lines.line_numbers[i]) + ": " + why;
  }
  if (lines.bad_lines) problems.push_back(lines.problem(path.filename().string()));
  if (refused)
    problems.push_back(path.filename().string() + ": " + std::to_string(refused) + " line(s) not read, first at " +
                       first);
  return out;
}

nlohmann::json json_of(const records::tensor_stats& t) {
  nlohmann::json j = {{"count", t.count}, {"hash", t.hash}};
  for (const auto& [key, v] :
       {std::pair{"mean", t.mean}, {"std", t.stddev}, {"min", t.min}, {"max", t.max}, {"l2", t.l2}})
    j[key] = v ? nlohmann::json(*v) : nlohmann::json();  // a non-finite value is written as null
  return j;
}

bool has_rank_trace(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (is_rank_trace_file(entry.path().filename().string())) return true;
  return false;
}

}  // namespace

bool load_diff_run(const std::string& dir, DiffRun& run, std::string& error) {
  run = DiffRun{};
  run.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    error = dir + " is not a directory";
    return false;
  }
  fs::path root(dir);
  Manifest m;
  std::string why;
  if (read_manifest(dir, m, why)) {
    run.manifest = std::move(m);
    run.compared = to_json(*run.manifest);
  } else {
    run.problems.push_back(why);
  }
  if (has_rank_trace(root)) {
    RunTrace trace;
    std::string err;
    trace.manifest = run.manifest;
    if (load_rank_traces(dir, trace, err)) {
      run.has_traces = true;
      run.traces = summarize(trace);
      run.problems.insert(run.problems.end(), trace.problems.begin(), trace.problems.end());
    } else {
      run.problems.push_back(err);
    }
  }
  for (const auto& [rank, path] : verify_files(root, kVerifySummaries, run.problems)) {
    std::vector<TensorRecord> recs;
    for (const auto& l : read_lenient<records::summaries>(path, run.problems)) {
      TensorRecord r;
      r.step = l.step;
      r.kind = l.kind;
      r.name = l.name;
      if (l.micro) r.micro = static_cast<int>(*l.micro);
      r.stats = json_of(l.stats);
      recs.push_back(std::move(r));
    }
    if (!recs.empty()) run.summaries[rank] = std::move(recs);
  }
  for (const auto& [rank, path] : verify_files(root, kVerifyReplicas, run.problems)) {
    std::vector<ReplicaRecord> recs;
    for (const auto& l : read_lenient<records::replicas>(path, run.problems)) recs.push_back({l.step, l.param_hash});
    if (!recs.empty()) run.replicas[rank] = std::move(recs);
  }
  if (!run.manifest && !run.has_traces && run.summaries.empty() && run.replicas.empty()) {
    error = "nothing to compare in " + dir + " (no readable manifest.json, rank traces or verify/ summaries)";
    return false;
  }
  return true;
}

DiffRun diff_run_of_traces(const RunTrace& run, int cycle) {
  DiffRun d;
  d.dir = run.dir;
  d.has_traces = !run.ranks.empty();
  d.traces = summarize(run);
  d.problems = run.problems;
  // Not the import report: its files, offsets and notes differ between any two cycles of one job.
  d.manifest = run.manifest;
  d.compared = {{"source", run.manifest ? run.manifest->fields.source.value_or("") : ""},
                {"world_size", run.world_size()}};
  if (run.manifest && run.manifest->fields.backend) d.compared["backend"] = *run.manifest->fields.backend;
  uint32_t first = 0, last = 0;
  if (step_range(run, first, last)) d.compared["steps"] = std::to_string(first) + "-" + std::to_string(last);
  if (cycle > 0) d.compared["cycle"] = cycle;
  return d;
}

}  // namespace ddp
