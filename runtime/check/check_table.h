#pragma once
// The closed-loop checks, registered once: id (stable: checks.json, --checks, docs/checks.md), what evidence it is
// judged on, which subjects it applies to, and its judge. Table order is ladder order. Adding a check is one entry
// here and one judge (judges.h) fed by what the subjects hand over (subject.h).
#include <string>
#include <vector>

#include "runtime/check/check_result.h"
#include "runtime/check/subject.h"

namespace ddp {

// The ladder's state while it runs: the subject, the run folder, the main run, and what one check tells a later one.
struct LadderState {
  CheckSubject& subject;
  std::string out_dir;
  MainRun main;
  bool samples_follow_rule = true;  // data.shard_rule's verdict, which numerics.reference's cause reads
};

enum class EvidenceFrom {
  main_run,  // judged on the ladder's one verification run
  own_runs,  // starts runs of its own (resume, faults)
};

using Judge = CheckResult (*)(LadderState& ladder);

struct CheckEntry {
  const char* id;
  EvidenceFrom evidence;
  unsigned subjects;  // SubjectKind bits
  Judge judge;
  // A check whose pass in the same ladder settles this one's fail: its evidence is stronger than this check's
  // (checkpoint.complete lists the keys a resume might need; an exact checkpoint.resume proves what the resume
  // needs). Such a fail becomes a warn that says so, with `settled_because`; nullptr: none.
  const char* settled_by = nullptr;
  const char* settled_because = nullptr;
};

// `results` (ladder order) with each fail whose entry's settled_by passed made a warn, the reason appended.
void settle(std::vector<CheckResult>& results);

const std::vector<CheckEntry>& check_table();
std::vector<std::string> check_ids();
// "" when every id is in the table; otherwise the usage error naming the first unknown one.
std::string unknown_check_id(const std::vector<std::string>& ids);

}  // namespace ddp
