#pragma once
// The --check ladder's stable ids, in ladder order: the one list the CLI validates, the ladder runs and checks.json
// reports. Header-only so the CLI (launch/) can name them without linking the checks.
#include <string>
#include <vector>

namespace ddp {

struct CheckInfo {
  const char* id;
  bool judged_on_main_run;  // judged on the ladder's one verification run (the others start runs of their own)
};

inline constexpr CheckInfo kChecks[] = {
    {"env.manifest", true},         {"data.shard_rule", true},    {"numerics.reference", true},
    {"numerics.rank_sync", true},   {"comm.no_sync", true},       {"checkpoint.complete", true},
    {"checkpoint.resume", false},   {"faults.exit", false},
};

inline std::vector<std::string> check_ids() {
  std::vector<std::string> ids;
  for (const CheckInfo& c : kChecks) ids.push_back(c.id);
  return ids;
}

}  // namespace ddp
