#pragma once
// `ddp_profile --check`: the one closed-loop ladder, for either subject (subject.h). Runs the main verification run
// when a wanted check is judged on it, then every wanted check of check_table.h in table order, prints the table and
// writes DIR/checks.json. Returns the exit code: 0 every check passed (or warned/skipped), 1 one failed or the
// run folder could not be written, 2 a usage error stopped the ladder before its checks.
#include <string>
#include <vector>

#include "runtime/check/subject.h"

namespace ddp {

int run_ladder(CheckSubject& subject, const std::vector<std::string>& wanted_ids, const std::string& out_dir);

}  // namespace ddp
