// checkpoint.complete and checkpoint.resume: what a checkpoint holds, and whether a killed-and-resumed run ends
// where the straight run does.
#include <algorithm>
#include <set>

#include "runtime/check/check_ids.h"
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
    // The weights and nothing of the optimizer: a save meant for inference, not for resuming.
    auto is = [](const std::string& item, const char* prefix) { return item.rfind(prefix, 0) == 0; };
    const bool lacks_a_param = std::any_of(missing.begin(), missing.end(), [&](auto& m) { return is(m, "param:"); });
    const bool has_optimizer = std::any_of(found.begin(), found.end(), [&](auto& f) { return is(f, "optimizer."); });
    const bool weights_only = !lacks_a_param && !has_optimizer &&
                              std::any_of(missing.begin(), missing.end(), [&](auto& m) { return is(m, "optimizer."); });
    return check_result(check_id::kCheckpointComplete, CheckStatus::fail,
                        std::to_string(missing.size()) + " item(s) the live run holds are not in " + file + ": " +
                            list + (missing.size() > 4 ? ", ..." : "") +
                            (weights_only ? " (it holds the model's weights alone: a save for inference, not resumable "
                                            "— save_only_model=True, save_pretrained, a state_dict() of the model)"
                                          : " (a resume would not be exact)"),
                        d);
  }
  return check_result(
      check_id::kCheckpointComplete, CheckStatus::pass,
      "all " + std::to_string(expected.size()) +
          " items present (model, AdamW moments and step counts, loss scaler, epoch/step/sampler position, RNG "
          "states); written atomically with a verified CRC-32",
      d);
}

namespace {
// Why a resume from `c` does not need `item`, which it lacks, and when it would ("" = it is needed).
std::string not_needed(const std::string& item, const CheckpointContents& c, const std::set<std::string>& have) {
  const bool epoch = have.count("epoch") > 0;
  if (item == "step" && epoch && c.epoch_boundary)
    return "step (derivable from the epoch at an epoch boundary; needed for a checkpoint saved mid-epoch)";
  if (item == "sampler.position" && epoch && c.epoch_boundary)
    return "sampler.position (an epoch boundary resumes at the next epoch's first batch; needed mid-epoch)";
  if (item == "sampler.position" && epoch && have.count("step"))
    return "sampler.position (derivable from the global step and the epoch when the script skips the batches it "
           "trained on: checkpoint.resume shows whether it does)";
  if (item.rfind("rng.", 0) == 0 &&
      std::find(c.rng_untouched.begin(), c.rng_untouched.end(), item) != c.rng_untouched.end())
    return item +
           " (the job never drew from it after attach; needed once dropout, augmentation or unseeded shuffling "
           "draws from it)";
  return {};
}

// One file: a missing item the resume needs fails; one it provably does not need is a warning saying when it would.
CheckResult judge_checkpoint_file(const CheckpointContents& c) {
  const std::set<std::string> have(c.found.begin(), c.found.end());
  std::vector<std::string> required, derivable;  // required: what this resume needs, present or not
  for (const auto& item : c.expected) {
    std::string why = have.count(item) ? std::string() : not_needed(item, c, have);
    if (why.empty())
      required.push_back(item);
    else
      derivable.push_back(why);
  }
  CheckResult r = check_checkpoint_items(required, c.found, c.file);
  if (r.status != CheckStatus::pass || derivable.empty()) return r;
  r.details["not_needed_here"] = derivable;
  std::string list;
  for (const auto& d : derivable) list += (list.empty() ? "" : "; ") + d;
  return check_result(check_id::kCheckpointComplete, CheckStatus::warn,
                      "all " + std::to_string(required.size()) + " items a resume from " + c.file +
                          " needs are present; not saved, not needed here: " + list,
                      r.details);
}
}  // namespace

CheckResult judge_checkpoint_complete(const CheckpointEvidence& e) {
  if (!e.failure.empty()) return check_result(check_id::kCheckpointComplete, CheckStatus::fail, e.failure);
  // No checkpoint is a choice with a risk, not a wrong result (a fail means the job computes or saves something
  // wrong): a warning that says the risk. Without the reason (`none`) nothing says it was the job's choice.
  if (e.files.empty() && e.none.empty())
    return check_result(check_id::kCheckpointComplete, CheckStatus::fail, "no checkpoint was found");
  if (e.files.empty())
    return check_result(check_id::kCheckpointComplete, CheckStatus::warn,
                        e.none +
                            ": nothing is wrong in what it computes, but a job stopped before its end (a node "
                            "lost, a time limit) starts again from its first step; to resume, save the model, "
                            "the optimizer, the scheduler, the sampler's position and the RNG streams");
  CheckResult first;
  for (size_t i = 0; i < e.files.size(); ++i) {
    const CheckpointContents& c = e.files[i];
    CheckResult r = judge_checkpoint_file(c);
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
  if (!e.skipped.empty()) return check_result(check_id::kCheckpointResume, CheckStatus::skip, e.skipped, d);
  if (!e.failed.empty()) return check_result(check_id::kCheckpointResume, CheckStatus::fail, e.failed, d);
  d["ranks"] = nlohmann::json::array();
  size_t items = 0;
  for (const RankResume& r : e.ranks) {
    d["ranks"].push_back({{"rank", r.rank},
                          {"items", r.items},
                          {"identical", r.recorded && r.first_difference.empty()},
                          {"first_difference", r.first_difference}});
    items += r.items;
  }
  for (const RankResume& r : e.ranks) {
    const std::string rank = "rank " + std::to_string(r.rank);
    if (!r.recorded)
      return check_result(check_id::kCheckpointResume, CheckStatus::fail,
                          "the resumed run's " + rank + " recorded no final state", d);
    if (!r.first_difference.empty()) {
      d["first_difference"] = r.first_difference;
      // Where the resumed run's data went another way, that is the cause; else a hint from the item's kind.
      // The cause, most specific first: the resumed run's data went another way; the state it resumed with already
      // differed (the first item, in the job's order, not restored); it resumed equal and parted later.
      std::string cause = resume_hint(r.first_difference);
      if (!e.data_stream.empty())
        cause = ": " + e.data_stream;
      else if (!e.first_state_difference.empty())
        cause =
            ": at its first forward the resumed run's state already differs from the straight run's after the "
            "checkpoint, first at " +
            e.first_state_difference + " (not saved, or not restored on resume)";
      else if (e.resume_point_compared)
        cause =
            ": the resumed run started from the straight run's state, RNG streams included, and parted after "
            "(something drawn or ordered differently after the restore?)";
      return check_result(check_id::kCheckpointResume, CheckStatus::fail,
                          rank + ": " + r.first_difference + " " + r.difference +
                              " between the straight run and the run " + e.killed + " and resumed" + cause,
                          d);
    }
  }
  // Nothing compared is no pass.
  if (items == 0)
    return check_result(check_id::kCheckpointResume, CheckStatus::fail, "the straight run recorded no final state", d);
  d["items"] = items;
  if (e.params_never_changed)  // equal to a run that never moved: no pass
    return check_result(check_id::kCheckpointResume, CheckStatus::warn,
                        "the resumed run ends equal to the straight run, but the straight run's parameters never "
                        "changed: an exact resume proves nothing (see train.learns)",
                        d);
  if (!e.data_stream.empty())
    return check_result(check_id::kCheckpointResume, CheckStatus::fail, "the final state matches, but " + e.data_stream,
                        d);
  return check_result(check_id::kCheckpointResume, CheckStatus::pass,
                      e.killed + " and resumed to the end: " + std::to_string(items) +
                          " items (parameters, optimizer state, and what else the run's state holds) equal the "
                          "straight run's bit for bit on every rank",
                      d);
}

}  // namespace ddp
