#pragma once
// Offset between two ranks' monotonic clocks from ping-pong round trips (NTP's estimate): for a round with local
// send time a, peer time p and local receive time b, offset = p - (a + b) / 2, uncertain by (b - a) / 2. The round with
// the smallest round trip wins. The transport (the process group) is the runtime's business.
#include <cstdint>
#include <vector>

namespace ddp::prof {

struct PingRound {
  int64_t local_send_ns;
  int64_t peer_ns;
  int64_t local_recv_ns;
};

struct ClockOffset {
  int64_t peer_minus_local_ns = 0;  // add to a local time to get the peer's time
  int64_t uncertainty_ns = 0;
  uint32_t rounds = 0;
  bool valid = false;
};

ClockOffset estimate_offset(const std::vector<PingRound>& rounds);

}  // namespace ddp::prof
