// checkpoint.complete and checkpoint.resume: what a checkpoint holds, and whether a killed-and-resumed run ends
// where the straight run does.
#include <set>

#include "runtime/check/judges.h"

namespace ddp {

CheckResult check_checkpoint_items(const std::vector<std::string>& expected, const std::vector<std::string>& found,
                                   const std::string& file) {
  std::set<std::string> have(found.begin(), found.end());
  std::vector<std::string> missing;
  for (const auto& e : expected)
    if (!have.count(e)) missing.push_back(e);
  nlohmann::json d = {{"file", file}, {"expected", expected.size()}, {"found", found.size()}, {"missing", missing}};
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 4; ++i) list += (i ? ", " : "") + missing[i];
    return check_result("checkpoint.complete", CheckStatus::fail,
                std::to_string(missing.size()) + " item(s) the live run holds are not in " + file + ": " + list +
                    (missing.size() > 4 ? ", ..." : "") + " (a resume would not be exact)",
                d);
  }
  return check_result("checkpoint.complete", CheckStatus::pass,
              "all " + std::to_string(expected.size()) +
                  " items present (model, AdamW moments and step counts, loss scaler, epoch/step/sampler position, RNG "
                  "states); written atomically with a verified CRC-32",
              d);
}

CheckResult judge_checkpoint_complete(const CheckpointEvidence& e) {
  if (e.files.empty()) return check_result("checkpoint.complete", CheckStatus::fail, e.none);
  CheckResult first;
  for (size_t i = 0; i < e.files.size(); ++i) {
    const CheckpointContents& c = e.files[i];
    CheckResult r = check_checkpoint_items(c.expected, c.found, c.file);
    if (r.status == CheckStatus::fail) return r;
    if (i == 0) first = r;
  }
  return first;
}

namespace {
// Where to look first, from the kind of item that differs.
std::string resume_hint(const std::string& item) {
  if (item.rfind("optimizer", 0) == 0) return " (the resume does not restore the optimizer's state?)";
  if (item.rfind("param:", 0) == 0 || item.rfind("model", 0) == 0)
    return " (the weights diverged after resuming: is something not restored — optimizer, scheduler, sampler "
           "position, RNG?)";
  return " (state missing from the checkpoint, or not restored on resume)";
}
}  // namespace

CheckResult judge_resume(const ResumeEvidence& e) {
  nlohmann::json d = e.details;
  if (!e.skipped.empty()) return check_result("checkpoint.resume", CheckStatus::skip, e.skipped, d);
  if (!e.failed.empty()) return check_result("checkpoint.resume", CheckStatus::fail, e.failed, d);
  d["ranks"] = nlohmann::json::array();
  size_t items = 0;
  for (const RankResume& r : e.ranks) {
    d["ranks"].push_back({{"rank", r.rank}, {"items", r.items}, {"identical", r.recorded && r.first_difference.empty()},
                          {"first_difference", r.first_difference}});
    items += r.items;
  }
  for (const RankResume& r : e.ranks) {
    const std::string rank = "rank " + std::to_string(r.rank);
    if (!r.recorded)
      return check_result("checkpoint.resume", CheckStatus::fail, "the resumed run's " + rank + " recorded no final state", d);
    if (!r.first_difference.empty()) {
      d["first_difference"] = r.first_difference;
      return check_result("checkpoint.resume", CheckStatus::fail,
                          rank + ": " + r.first_difference + " " + r.difference +
                              " between the straight run and the run " + e.killed + " and resumed" +
                              resume_hint(r.first_difference),
                          d);
    }
  }
  // Nothing compared is no pass.
  if (items == 0) return check_result("checkpoint.resume", CheckStatus::fail, "the straight run recorded no final state", d);
  d["items"] = items;
  return check_result("checkpoint.resume", CheckStatus::pass,
                      e.killed + " and resumed to the end: " + std::to_string(items) +
                          " items (parameters, optimizer state, and what else the run's state holds) equal the "
                          "straight run's bit for bit on every rank",
                      d);
}

}  // namespace ddp
