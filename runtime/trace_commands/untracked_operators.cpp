#include "runtime/trace_commands/untracked_operators.h"

#include <filesystem>
#include <set>

#include "traces/analysis/analysis.h"
#include "traces/kineto/kineto_digest.h"
#include "traces/kineto/kineto_operators.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace {

namespace fs = std::filesystem;

// The operators in the rank's untracked time, and the name of the trace they are from: from the first file the
// importer read for it (a trace, or the digest made where the trace lies, which kept them), else from the run
// folder's rank<R>.pt.trace.json. False when there is none, it does not read, or a digest did not keep them.
bool operators_of(const RunTrace& run, int rank, const KinetoStageMap& map, KinetoUntrackedOperators& out,
                  std::string& trace_name) {
  std::string err;
  if (run.kineto) {
    for (const KinetoFileRead& f : run.kineto->files) {
      if (f.rank != rank) continue;
      trace_name = fs::path(f.file).filename().string();
      if (f.digest.empty()) return kineto_untracked_operators(f.file, map, out, err);
      kineto_detail::KFile d = read_digest(f.digest);
      if (!d.status.ok() || !d.untracked_operators) return false;
      out = *d.untracked_operators;
      return true;
    }
    return false;
  }
  std::error_code ec;
  const std::string p = in_run(run.dir, kineto_rank_trace_file(rank));
  trace_name = kineto_rank_trace_file(rank);
  return fs::is_regular_file(p, ec) && kineto_untracked_operators(p, map, out, err);
}

}  // namespace

void name_untracked_time(const RunTrace& run, const std::vector<std::string>& maps, Analysis& a) {
  std::set<int> ranks;
  for (const StallCause& c : a.causes)
    if (c.rank >= 0 && c.stage == kUntrackedCauseName) ranks.insert(c.rank);
  if (ranks.empty()) return;
  KinetoStageMap map;
  std::string err;
  for (const std::string& m : maps) map.add_user_rule(m, err);  // checked when the command line was parsed
  for (int rank : ranks) {
    KinetoUntrackedOperators found;
    std::string trace;
    if (!operators_of(run, rank, map, found, trace) || found.steps == 0) continue;
    std::vector<UntrackedOperator> ops;
    for (const KinetoOperatorTime& o : found.operators)
      ops.push_back({o.name, o.untracked_ns / 1e6 / found.steps, static_cast<double>(o.calls) / found.steps});
    name_untracked_operators(a, rank, ops, found.steps, trace);
  }
}

}  // namespace ddp
