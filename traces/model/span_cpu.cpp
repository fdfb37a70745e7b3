#include "traces/model/span_cpu.h"

#include <algorithm>
#include <array>

namespace ddp {
namespace {

uint32_t to_us(uint64_t ns) { return static_cast<uint32_t>(std::min<uint64_t>((ns + 500) / 1000, kWaitUnknown - 1)); }

}  // namespace

Event cpu_event(const Event& span, uint64_t cpu_ns, int64_t wait_ns) {
  Event e = span;
  e.kind = static_cast<uint8_t>(EventKind::cpu);
  e.value = cpu_ns;
  e.item = wait_ns < 0 ? kWaitUnknown : to_us(static_cast<uint64_t>(wait_ns));
  return e;
}

Event cpu_event(const Event& span, const SpanCpu& split) {
  Event e = span;
  e.kind = static_cast<uint8_t>(EventKind::cpu);
  e.value = static_cast<uint64_t>(split.cpu_us) * 1000;
  e.item = split.wait_us;
  return e;
}

SpanCpu split_of(const Event& cpu, uint32_t index) { return {index, to_us(cpu.value), cpu.item}; }

uint32_t blocked_us(const SpanCpu& c, int64_t wall_ns) {
  const int64_t accounted = int64_t{c.cpu_us} + (c.wait_known() ? int64_t{c.wait_us} : 0);
  const int64_t wall_us = (wall_ns + 500) / 1000;
  return static_cast<uint32_t>(std::max<int64_t>(0, wall_us - accounted));
}

std::vector<SpanCpu> take_cpu_events(std::vector<Event>& events) {
  std::vector<SpanCpu> out;
  constexpr uint32_t kNone = UINT32_MAX;
  std::array<uint32_t, 256> last_span;  // per lane, the index (in what is kept) of its last event if a span
  last_span.fill(kNone);
  size_t kept = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.kind == static_cast<uint8_t>(EventKind::cpu)) {
      const uint32_t s = last_span[e.lane];
      if (s != kNone && events[s].stage == e.stage && events[s].t0 == e.t0 && events[s].t1 == e.t1)
        out.push_back(split_of(e, s));
      last_span[e.lane] = kNone;
      continue;
    }
    last_span[e.lane] = e.is_span() ? static_cast<uint32_t>(kept) : kNone;
    events[kept++] = e;
  }
  events.resize(kept);
  // Lanes interleave in a file: the splits come in their cpu events' order, not their spans'.
  std::sort(out.begin(), out.end(), [](const SpanCpu& a, const SpanCpu& b) { return a.event < b.event; });
  return out;
}

}  // namespace ddp
