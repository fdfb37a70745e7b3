#include "traces/kineto/kineto_operators.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace ddp {
namespace {

using Interval = kineto_detail::TimeInterval;
using Op = kineto_detail::OperatorCall;

// Sorted, overlapping and touching intervals joined.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.t0 < b.t0; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.t1 <= i.t0) continue;
    if (!out.empty() && i.t0 <= out.back().t1)
      out.back().t1 = std::max(out.back().t1, i.t1);
    else
      out.push_back(i);
  }
  return out;
}

// Where two merged lists overlap, merged.
std::vector<Interval> intersection(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].t0, b[j].t0), hi = std::min(a[i].t1, b[j].t1);
    if (lo < hi) out.push_back({lo, hi});
    (a[i].t1 < b[j].t1 ? i : j)++;
  }
  return out;
}

// Nanoseconds of [t0, t1) inside a merged list.
int64_t overlap(const std::vector<Interval>& v, int64_t t0, int64_t t1) {
  auto it = std::upper_bound(v.begin(), v.end(), t0, [](int64_t t, const Interval& i) { return t < i.t1; });
  int64_t ns = 0;
  for (; it != v.end() && it->t0 < t1; ++it) ns += std::min(t1, it->t1) - std::max(t0, it->t0);
  return ns;
}

// Each operator's own time (the parts of it no child covers), handed to `emit(op, t0, t1)` piece by piece. Kineto's
// operators on one thread nest; a child that outlasts its parent (rounding of the microsecond timestamps) is cut to
// its parent's end.
template <class Emit>
void own_time(std::vector<Op>& ops, Emit emit) {
  std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.t0 != b.t0 ? a.t0 < b.t0 : a.t1 > b.t1; });
  struct Open {
    size_t op;
    int64_t cursor, t1;
  };
  std::vector<Open> open;
  auto close = [&] {
    const Open o = open.back();
    open.pop_back();
    emit(o.op, o.cursor, o.t1);
    if (!open.empty()) open.back().cursor = std::max(open.back().cursor, o.t1);
  };
  for (size_t k = 0; k < ops.size(); ++k) {
    while (!open.empty() && open.back().t1 <= ops[k].t0) close();
    int64_t t1 = ops[k].t1;
    if (!open.empty()) {
      emit(open.back().op, open.back().cursor, ops[k].t0);
      t1 = std::min(t1, open.back().t1);
    }
    open.push_back({k, ops[k].t0, t1});
  }
  while (!open.empty()) close();
}

}  // namespace

bool UntrackedOperatorReader::operator()(const ChromeEventView& e) {
  if (e.ph != 'X' || !e.has_ts || !e.has_dur || e.dur_ns < 0) return true;
  kineto_detail::ThreadOperators& t = thread(e);
  const Interval span{e.ts_ns, e.ts_ns + e.dur_ns};
  if (auto m = map_.classify(e.name, e.cat)) {
    // A DataLoader's __next__ is a wait up to its first operator only: the operators inside it stay untracked.
    if (m->stage == Stage::step)
      t.steps.push_back(span);
    else if (m->stage != Stage::wait_data)
      t.stages.push_back(span);
    return true;
  }
  if (e.cat != "cpu_op" && e.cat != "user_annotation") return true;
  auto [it, fresh] = name_ids_.try_emplace(std::string(e.name), static_cast<uint32_t>(names_.size()));
  if (fresh) names_.emplace_back(e.name);
  t.ops.push_back({span.t0, span.t1, it->second});
  return true;
}

kineto_detail::ThreadOperators& UntrackedOperatorReader::thread(const ChromeEventView& e) {
  // Events come in runs from one thread: the last one's is reused without building its key (as kineto_file.cpp does).
  if (last_ && e.pid.key() == last_->first.first && e.tid.key() == last_->first.second) return last_->second;
  last_ = &*threads_.try_emplace({std::string(e.pid.key()), std::string(e.tid.key())}).first;
  return last_->second;
}

KinetoUntrackedOperators UntrackedOperatorReader::finish() {
  KinetoUntrackedOperators out;
  kineto_detail::ThreadOperators* main = nullptr;
  for (auto& [key, t] : threads_)
    if (!t.steps.empty() && (!main || t.steps.size() > main->steps.size())) main = &t;
  if (!main) return out;
  out.steps = static_cast<uint32_t>(main->steps.size());
  const std::vector<Interval> steps = merged(main->steps);
  const std::vector<Interval> tracked = intersection(merged(main->stages), steps);
  std::vector<KinetoOperatorTime> per_name(names_.size());
  std::vector<size_t> last_counted(names_.size(), SIZE_MAX);
  own_time(main->ops, [&](size_t op, int64_t t0, int64_t t1) {
    if (t1 <= t0) return;
    const int64_t ns = overlap(steps, t0, t1) - overlap(tracked, t0, t1);
    if (ns <= 0) return;
    const uint32_t name = main->ops[op].name;
    per_name[name].untracked_ns += ns;
    if (last_counted[name] != op) ++per_name[name].calls;
    last_counted[name] = op;
    out.untracked_ns += ns;
  });
  for (uint32_t i = 0; i < names_.size(); ++i)
    if (per_name[i].untracked_ns > 0) {
      per_name[i].name = names_[i];
      out.operators.push_back(std::move(per_name[i]));
    }
  std::sort(out.operators.begin(), out.operators.end(),
            [](const KinetoOperatorTime& a, const KinetoOperatorTime& b) { return a.untracked_ns > b.untracked_ns; });
  return out;
}

bool kineto_untracked_operators(const std::string& path, const KinetoStageMap& map, KinetoUntrackedOperators& out,
                                std::string& error) {
  UntrackedOperatorReader reader(map);
  ChromeDocInfo info;
  const ChromeStatus status = parse_chrome_file(path, std::ref(reader), info);
  if (!status.ok() && !(status.error == ChromeError::truncated && info.events > 0)) {
    error = status.message;
    return false;
  }
  out = reader.finish();
  return true;
}

}  // namespace ddp
