// diff_runs(): runs the steps of the run diff (traces/diff/run_diff_steps.h) and words the distributed-variable
// warning.
#include "traces/diff/run_diff.h"

#include <set>

#include "traces/diff/run_diff_steps.h"

namespace ddp {
namespace {

// The changed distributed variables, in the order distributed_variables() lists them.
std::vector<std::string> changed_in_order(const std::set<std::string>& changed) {
  std::vector<std::string> out;
  for (const auto& v : distributed_variables())
    if (changed.count(v.name)) out.push_back(v.name);
  return out;
}

// Job options that changed but are not distributed variables (e.g. config.lr).
std::vector<std::string> other_changed_options(const std::vector<ConfigDifference>& config) {
  std::vector<std::string> out;
  for (const auto& c : config)
    if (c.variable.empty() && c.key.rfind("config.", 0) == 0) out.push_back(c.key);
  return out;
}

// Set when more than one variable changed, the seed's rule being one at a time: two distributed variables, or a
// distributed one and another job option (lr, ...). Then no difference can be put down to one cause.
std::string ambiguity_warning(const std::vector<std::string>& changed, const std::vector<std::string>& others) {
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  };
  if (changed.size() > 1)
    return std::to_string(changed.size()) + " distributed variables changed (" + join(changed) + ")" +
           (others.empty() ? "" : " and " + join(others)) +
           ": diff one variable at a time, or a difference cannot be put down to one cause";
  if (changed.size() == 1 && !others.empty())
    return "the distributed variable " + changed[0] + " changed together with " + join(others) +
           ": diff one variable at a time, or a difference cannot be put down to one cause";
  return {};
}

}  // namespace

RunDiff diff_runs(const DiffRun& a, const DiffRun& b, const DiffOptions& opt) {
  RunDiff d;
  d.dir_a = a.dir;
  d.dir_b = b.dir;
  d.problems_a = a.problems;
  d.problems_b = b.problems;
  std::set<std::string> changed;
  d.config = run_diff_detail::diff_config(a.compared, b.compared, changed);
  d.distributed_changed = changed_in_order(changed);
  d.warning = ambiguity_warning(d.distributed_changed, other_changed_options(d.config));
  d.timing = run_diff_detail::diff_timing(a, b);
  d.tensors = run_diff_detail::diff_tensors(a, b, opt.rtol);
  d.replicas = run_diff_detail::diff_replicas(a, b);
  return d;
}

}  // namespace ddp
