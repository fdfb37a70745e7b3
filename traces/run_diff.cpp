// diff_runs(): runs the steps of the run diff (traces/run_diff_steps.h) and words the distributed-variable warning.
#include "traces/run_diff.h"

#include <set>

#include "traces/run_diff_steps.h"

namespace ddp {
namespace {

// The changed distributed variables, in the order distributed_variables() lists them.
std::vector<std::string> changed_in_order(const std::set<std::string>& changed) {
  std::vector<std::string> out;
  for (const auto& v : distributed_variables())
    if (changed.count(v.name)) out.push_back(v.name);
  return out;
}

// Set when more than one distributed variable changed: then no difference can be put down to one of them.
std::string ambiguity_warning(const std::vector<std::string>& changed) {
  if (changed.size() <= 1) return {};
  std::string names;
  for (size_t i = 0; i < changed.size(); ++i) names += (i ? ", " : "") + changed[i];
  return std::to_string(changed.size()) + " distributed variables changed (" + names +
         "): diff one variable at a time, or a difference cannot be put down to one cause";
}

}  // namespace

RunDiff diff_runs(const DiffRun& a, const DiffRun& b, const DiffOptions& opt) {
  RunDiff d;
  d.dir_a = a.dir;
  d.dir_b = b.dir;
  d.problems_a = a.problems;
  d.problems_b = b.problems;
  std::set<std::string> changed;
  d.config = run_diff_detail::diff_config(a.manifest, b.manifest, changed);
  d.distributed_changed = changed_in_order(changed);
  d.warning = ambiguity_warning(d.distributed_changed);
  d.timing = run_diff_detail::diff_timing(a, b);
  d.tensors = run_diff_detail::diff_tensors(a, b, opt.rtol);
  d.replicas = run_diff_detail::diff_replicas(a, b);
  return d;
}

}  // namespace ddp
