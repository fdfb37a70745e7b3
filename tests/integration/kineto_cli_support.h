#pragma once
// The binary on per-rank PyTorch profiler traces: run a command, read what --analyze --json prints, and the two
// verdicts the Kineto tests assert (a planted rank+stage named first; a balanced run blaming no rank's stage).
// Shared by the tests on the committed traces (test_kineto_cli.cpp) and on traces written live (test_kineto_live.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integration_support.h"

namespace ddptest {

inline Result run_cli(const std::string& name, std::vector<std::string> args) {
  const std::string d = fresh_dir(name);
  args.insert(args.begin(), kExe);
  return run(args, d + ".log", 120);
}

inline nlohmann::json analyze_json(const std::string& name, std::vector<std::string> inputs,
                                   const std::vector<std::string>& extra = {}) {
  inputs.insert(inputs.begin(), "--analyze");
  inputs.push_back("--json");
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  auto r = run_cli(name, inputs);
  EXPECT_EQ(r.code, 0) << r.output;
  auto j = printed_json(r.output);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

// The analysis names `rank`'s `stage` first.
inline void expect_top_cause(const nlohmann::json& analysis, int rank, const std::string& stage,
                             const std::string& what) {
  ASSERT_FALSE(analysis["causes"].empty()) << what << " " << analysis.dump(2);
  EXPECT_EQ(analysis["causes"][0]["rank"], rank) << what << " " << analysis["causes"].dump(2);
  EXPECT_EQ(analysis["causes"][0]["stage"], stage) << what << " " << analysis["causes"].dump(2);
}

// No rank's own stage is blamed: every cause that names a rank costs less than `max_share` of the step time.
inline void expect_no_rank_blamed(const nlohmann::json& analysis, double max_share, const std::string& what) {
  for (const auto& c : analysis["causes"])
    if (c["rank"].get<int>() >= 0) {
      EXPECT_LT(c["share"].get<double>(), max_share) << what << " " << c.dump();
    }
}

// The verdict names no rank's stage: the first cause, if any, is not one rank's.
inline void expect_no_rank_named_first(const nlohmann::json& analysis, const std::string& what) {
  if (analysis["causes"].empty()) return;
  EXPECT_LT(analysis["causes"][0]["rank"].get<int>(), 0) << what << " " << analysis["causes"].dump(2);
  EXPECT_EQ(analysis["verdict"].get<std::string>().find("rank "), std::string::npos)
      << what << " " << analysis["verdict"];
}

}  // namespace ddptest
