#include "runtime/user/user_judges.h"

#include <fstream>
#include <set>

#include "traces/model/run_folder.h"

namespace ddp {

std::string user_collectives_file(int rank) { return verify_log_file(rank, "collectives"); }
std::string user_checkpoints_file(int rank) { return verify_log_file(rank, "checkpoints"); }
std::string user_final_file(int rank) { return verify_log_file(rank, "final"); }
std::string user_reference_file(int64_t step) {
  return std::string(kVerifyDir) + "/reference_step" + std::to_string(step) + ".pt";
}

std::string user_reference_meta_file(int64_t step) {
  return std::string(kVerifyDir) + "/reference_step" + std::to_string(step) + ".json";
}

bool read_json_lines(const std::string& path, std::vector<nlohmann::json>& out, std::string& error) {
  out.clear();
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      error = path + ": line " + std::to_string(n) + " is not a JSON object";
      return false;
    }
    out.push_back(std::move(j));
  }
  return true;
}

std::vector<MicroComm> parse_micro_comm(const std::vector<nlohmann::json>& lines) {
  std::vector<MicroComm> out;
  for (const auto& j : lines) {
    MicroComm m;
    m.step = j.value("step", int64_t{0});
    m.micro = j.value("micro", 0);
    m.collectives =
        j.contains("collectives") && j["collectives"].is_number_integer() ? j["collectives"].get<int>() : -1;
    m.sync_flag = j.value("sync_flag", true);
    out.push_back(m);
  }
  return out;
}

CheckResult judge_user_no_sync(const std::vector<std::vector<MicroComm>>& per_rank) {
  // Per rank and optimizer step: the micro-steps in order. Accumulation is right when only the last micro-step of a
  // step communicates (every earlier one under no_sync) and the last one does.
  nlohmann::json d = nlohmann::json::array();
  int64_t steps = 0, accumulating = 0;
  bool counted = true;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    std::map<int64_t, std::vector<MicroComm>> by_step;
    for (const auto& m : per_rank[r]) by_step[m.step].push_back(m);
    for (const auto& [step, micros] : by_step) {
      ++steps;
      if (micros.size() > 1) ++accumulating;
      for (size_t k = 0; k < micros.size(); ++k) {
        const MicroComm& m = micros[k];
        counted = counted && m.collectives >= 0;
        const bool communicated = m.collectives >= 0 ? m.collectives > 0 : m.sync_flag;
        const bool last = k + 1 == micros.size();
        if (!last && communicated)
          return check_result("comm.no_sync", CheckStatus::fail,
                              "rank " + std::to_string(r) + ", step " + std::to_string(step) + ": micro-step " +
                                  std::to_string(k) + " of " + std::to_string(micros.size()) + " ran " +
                                  (m.collectives >= 0 ? std::to_string(m.collectives) + " gradient allreduce(s)"
                                                      : std::string("with gradient sync on")) +
                                  " before the last micro-step: accumulate the earlier micro-steps inside "
                                  "`with model.no_sync():`, so a step communicates once",
                              {{"rank", r}, {"step", step}, {"micro", k}, {"micro_steps", micros.size()}});
        if (last && !communicated)
          return check_result("comm.no_sync", CheckStatus::fail,
                              "rank " + std::to_string(r) + ", step " + std::to_string(step) +
                                  ": the last micro-step did not synchronise gradients (the optimizer stepped on "
                                  "this rank's own gradients): leave the last backward outside no_sync",
                              {{"rank", r}, {"step", step}, {"micro", k}});
      }
    }
  }
  if (steps == 0) return check_result("comm.no_sync", CheckStatus::fail, "no micro-steps were recorded");
  const std::string how =
      counted ? "counted by a comm hook" : "from DDP's sync flag (the script has its own comm hook)";
  if (accumulating == 0)
    return check_result("comm.no_sync", CheckStatus::pass,
                        "no gradient accumulation: every optimizer step synchronised once (" + how + ")",
                        {{"steps", steps}});
  return check_result("comm.no_sync", CheckStatus::pass,
                      std::to_string(accumulating) +
                          " accumulated step(s) across ranks communicated once each, on "
                          "their last micro-step (" +
                          how + ")",
                      {{"steps", steps}, {"accumulating_steps", accumulating}});
}

CheckResult judge_no_distributed_sampler(const std::vector<std::vector<ConsumedBatch>>& per_rank,
                                         const std::string& sampler_class) {
  std::set<int64_t> first;
  for (const auto& b : per_rank[0])
    if (b.epoch == 0) first.insert(b.indices.begin(), b.indices.end());
  nlohmann::json d = {{"sampler", sampler_class}, {"shared_with_rank0", nlohmann::json::array()}};
  std::string summary =
      "the loader has no DistributedSampler (" + (sampler_class.empty() ? "none" : sampler_class) + ")";
  for (size_t r = 1; r < per_rank.size(); ++r) {
    std::set<int64_t> mine;
    for (const auto& b : per_rank[r])
      if (b.epoch == 0) mine.insert(b.indices.begin(), b.indices.end());
    int64_t shared = 0;
    for (int64_t i : mine) shared += first.count(i) > 0;
    d["shared_with_rank0"].push_back(shared);
    if (r == 1)
      summary += ": in epoch 0 rank 1 read " + std::to_string(shared) + " of the same " + std::to_string(mine.size()) +
                 " indices as rank 0; each rank reads the whole dataset. Pass sampler=DistributedSampler(dataset) "
                 "to the DataLoader";
  }
  return check_result("data.shard_rule", CheckStatus::fail, summary, d);
}

std::map<std::string, std::string> parse_final_state(const std::vector<nlohmann::json>& lines) {
  std::map<std::string, std::string> out;
  for (const auto& j : lines)
    if (j.contains("name") && j["name"].is_string()) out[j["name"]] = j.value("hash", std::string());
  return out;
}

CheckResult judge_resume_states(const std::vector<std::map<std::string, std::string>>& straight,
                                const std::vector<std::map<std::string, std::string>>& resumed, int killed_after_save,
                                int64_t killed_at_step) {
  nlohmann::json d = {{"killed_after_save", killed_after_save}, {"killed_at_step", killed_at_step}};
  size_t items = 0;
  for (size_t r = 0; r < straight.size(); ++r) {
    if (r >= resumed.size() || resumed[r].empty())
      return check_result("checkpoint.resume", CheckStatus::fail,
                          "the resumed run's rank " + std::to_string(r) + " recorded no final state", d);
    for (const auto& [name, hash] : straight[r]) {
      auto it = resumed[r].find(name);
      if (it == resumed[r].end())
        return check_result(
            "checkpoint.resume", CheckStatus::fail,
            "rank " + std::to_string(r) + ": " + name + " exists in the straight run but not after resuming", d);
      if (it->second != hash) {
        std::string why = name.rfind("optimizer", 0) == 0 ? " (the resume does not restore the optimizer's state?)"
                          : name.rfind("param:", 0) == 0  ? " (the weights diverged after resuming: is something not "
                                                            "restored — optimizer, scheduler, sampler position, RNG?)"
                                                          : "";
        d["first_difference"] = name;
        return check_result("checkpoint.resume", CheckStatus::fail,
                            "rank " + std::to_string(r) + ": " + name +
                                " differs between the straight run and the run "
                                "resumed from checkpoint " +
                                std::to_string(killed_after_save) + " (step " + std::to_string(killed_at_step) + ")" +
                                why,
                            d);
      }
      ++items;
    }
  }
  if (items == 0)
    return check_result("checkpoint.resume", CheckStatus::fail, "the straight run recorded no final state", d);
  d["items"] = items;
  return check_result("checkpoint.resume", CheckStatus::pass,
                      "killed right after checkpoint " + std::to_string(killed_after_save) + " (step " +
                          std::to_string(killed_at_step) + ") and resumed: " + std::to_string(items) +
                          " parameter and optimizer items equal the straight run's bit for bit on every rank",
                      d);
}

}  // namespace ddp
