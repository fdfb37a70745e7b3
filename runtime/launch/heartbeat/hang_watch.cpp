#include "runtime/launch/heartbeat/hang_watch.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>

namespace ddp {
namespace {
bool in_collective(const ProgressSnapshot& s) {
  return s.stage >= 0 && s.stage < kStageCount && stage_has(static_cast<Stage>(s.stage), kStageBlocksOnPeers);
}
}  // namespace

bool process_stopped(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  return stat[paren + 2] == 'T' || stat[paren + 2] == 't';
}

int blame_tier(const ProgressSnapshot& s) {
  if (s.reason.empty()) return 1;
  return looks_like_comm_error(s.reason) ? 2 : 0;
}

bool blamed_before(const ProgressSnapshot& a, const ProgressSnapshot& b) {
  return std::make_tuple(blame_tier(a), a.last_ns) < std::make_tuple(blame_tier(b), b.last_ns);
}

int HangWatch::poll(const std::vector<RunningRank>& running, int64_t now_ns, double& silent_s) {
  int64_t slowest_step = 0, newest_ns = 0;
  for (const RunningRank& r : running) {
    slowest_step = std::max(slowest_step, r.beat.median_step_ns);
    newest_ns = std::max(newest_ns, r.beat.last_ns);
  }
  timeout_s_ = hang_timeout_s(user_timeout_s_, slowest_step);
  auto silence = [&](const RunningRank& r) { return static_cast<double>(now_ns - r.beat.last_ns) / 1e9; };
  // Lower is blamed first: stopped, says why, not in a collective, furthest behind, silent longest.
  auto order = [&](const RunningRank& r) {
    return std::make_tuple(!r.process_stopped, r.beat.reason.empty(), in_collective(r.beat), r.beat.step,
                           r.beat.last_ns);
  };
  const RunningRank* hung = nullptr;
  for (const RunningRank& r : running) {
    // Saving a checkpoint or closing the run (no heartbeat while it writes) is not a step: it gets the allowance of
    // the first step, not 20 step times.
    const bool saving = r.beat.stage == static_cast<int32_t>(Stage::checkpoint);
    const double limit_s = saving && user_timeout_s_ <= 0 ? std::max(timeout_s_, kHangWarmupS) : timeout_s_;
    if (silence(r) >= limit_s && (!hung || order(r) < order(*hung))) hung = &r;
  }
  // A rank blocked in a collective while a peer is still busy elsewhere is that peer's victim: the peer (which may
  // have reached this step later, so its silence is younger) is named when its own silence passes the limit. Twice
  // the limit in a collective ends the wait regardless.
  if (hung && in_collective(hung->beat) && silence(*hung) < 2 * timeout_s_)
    for (const RunningRank& r : running)
      if (r.rank != hung->rank && !in_collective(r.beat)) {
        hung = nullptr;
        break;
      }
  const auto now = std::chrono::steady_clock::now();
  if (!hung) {
    seen_ = false;
    return -1;
  }
  if (!seen_ || seen_newest_ns_ != newest_ns) {  // first sighting, or progress since: look again later
    seen_ = true;
    seen_newest_ns_ = newest_ns;
    seen_at_ = now;
    return -1;
  }
  if (std::chrono::duration<double>(now - seen_at_).count() < kConfirmS) return -1;
  silent_s = silence(*hung);
  return hung->rank;
}

}  // namespace ddp
