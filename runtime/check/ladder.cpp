#include "runtime/check/ladder.h"

#include <algorithm>
#include <iostream>

#include "runtime/check/check_table.h"
#include "runtime/common/json_file.h"
#include "runtime/common/run_folder_setup.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace {

CheckResult judge_one(const CheckEntry& c, LadderState& L) {
  if (!(c.subjects & L.subject.kind()))
    return check_result(c.id, CheckStatus::skip, std::string("does not apply to ") + L.subject.what());
  if (c.evidence == EvidenceFrom::main_run && !L.main.ok)
    return check_result(c.id, CheckStatus::fail, "the check run failed: " + L.main.failure);
  try {
    return c.judge(L);
  } catch (const std::exception& e) {
    return check_result(c.id, CheckStatus::fail, std::string("could not run: ") + e.what());
  }
}

}  // namespace

int run_ladder(CheckSubject& subject, const std::vector<std::string>& wanted_ids, const std::string& out_dir) {
  std::string err;
  if (std::string bad = unknown_check_id(wanted_ids); !bad.empty()) {
    std::cerr << "ddp_profile: " << bad << "\n";
    return 2;
  }
  if (!prepare_run_folder(out_dir, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  if (int stop = subject.prepare(out_dir); stop != kGoOn) return stop;
  // The whole ladder is every check that applies to the subject; one asked for by id is judged, or says why not.
  auto wanted = [&](const CheckEntry& c) {
    if (wanted_ids.empty()) return (c.subjects & subject.kind()) != 0;
    return std::find(wanted_ids.begin(), wanted_ids.end(), c.id) != wanted_ids.end();
  };
  LadderState L{subject, out_dir, MainRun{}};
  bool need_main = false;
  for (const CheckEntry& c : check_table())
    need_main |= wanted(c) && (c.evidence == EvidenceFrom::main_run || subject.own_runs_need_main_run());
  if (need_main) {
    L.main.dir = in_run(out_dir, kCheckMainRun);
    std::cout << "check run: " << L.main.dir << std::endl;
    if (int stop = subject.run_main(L.main.dir, L.main); stop != kGoOn) return stop;
    Manifest m;
    if (read_manifest(L.main.dir, m, L.main.manifest_error)) L.main.manifest = std::move(m);
  }
  std::vector<CheckResult> results;
  for (const CheckEntry& c : check_table()) {
    if (!wanted(c)) continue;
    std::cout << "  " << c.id << " ..." << std::flush;
    results.push_back(judge_one(c, L));
    std::cout << " " << status_name(results.back().status) << std::endl;
  }
  settle(results);
  nlohmann::json j = checks_json(results);
  j["run"] = out_dir;
  const nlohmann::json about = subject.describe();
  for (const auto& [k, v] : about.items()) j[k] = v;
  std::cout << "\n" << checks_table(results);
  if (!write_json_atomic(in_run(out_dir, kChecksFile), j, err)) {
    std::cerr << "ddp_profile: " << err << "\n";
    return 1;
  }
  std::cout << "\nchecks: " << in_run(out_dir, kChecksFile) << std::endl;
  return j["failed"].get<int>() > 0 ? 1 : 0;
}

}  // namespace ddp
