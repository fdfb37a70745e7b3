#include "profiler/clock_sync.h"

namespace ddp::prof {
ClockOffset estimate_offset(const std::vector<PingRound>& rounds) {
  ClockOffset best;
  int64_t best_rtt = INT64_MAX;
  for (const auto& r : rounds) {
    int64_t rtt = r.local_recv_ns - r.local_send_ns;
    if (rtt < 0 || rtt >= best_rtt) continue;  // a negative round trip is a broken sample
    best_rtt = rtt;
    best.peer_minus_local_ns = r.peer_ns - (r.local_send_ns + rtt / 2);
    best.uncertainty_ns = (rtt + 1) / 2;
    best.valid = true;
  }
  best.rounds = static_cast<uint32_t>(rounds.size());
  return best;
}
}  // namespace ddp::prof
