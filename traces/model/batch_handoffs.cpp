#include "traces/model/batch_handoffs.h"

#include <cstdint>
#include <unordered_map>

namespace ddp {

std::vector<std::pair<size_t, size_t>> batch_handoffs(const RankTrace& rank) {
  auto key = [](const Event& e) { return (static_cast<uint64_t>(e.epoch) << 32) | e.batch_index(); };
  std::unordered_map<uint64_t, size_t> last;  // (pass, batch) -> its loader span that ended last
  for (size_t i = 0; i < rank.events.size(); ++i) {
    const Event& e = rank.events[i];
    if (!e.is_span() || !stage_has(e.stage_id(), kStageLoaderThread)) continue;
    auto [it, fresh] = last.try_emplace(key(e), i);
    if (!fresh && rank.events[it->second].t1 < e.t1) it->second = i;
  }
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < rank.events.size(); ++i) {
    const Event& e = rank.events[i];
    if (!e.is_span() || e.stage_id() != Stage::wait_data) continue;
    auto it = last.find(key(e));
    if (it != last.end() && rank.events[it->second].t1 <= e.t1) out.push_back({it->second, i});
  }
  return out;
}

}  // namespace ddp
