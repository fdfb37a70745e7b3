#include "traces/chrome/span_cpu_args.h"

namespace ddp {

void write_cpu_args(JsonOut& o, const SpanCpu& c, int64_t wall_ns, std::string_view prefix, std::string_view sep) {
  auto arg = [&](const char* key, uint64_t us) {
    o.raw(sep);
    o.ch('"');
    o.raw(prefix);
    o.raw(key);
    o.raw("\":");
    o.unum(us);
  };
  arg(kOnCpuArg, c.cpu_us);
  if (c.wait_known()) arg(kWaitingForCpuArg, c.wait_us);
  arg(kBlockedArg, blocked_us(c, wall_ns));
}

}  // namespace ddp
