#pragma once
// A span's CPU split (traces/model/span_cpu.h) as args of a JSON trace event: on a CPU, waiting for a core (when the
// kernel said), blocked; microseconds. Shared by the Chrome export and the Kineto export (whose own fields take the
// prefix "ddp_").
#include <cstdint>
#include <string_view>

#include "traces/base/json_out.h"
#include "traces/model/span_cpu.h"

namespace ddp {

// Writes `<sep>"<prefix>on_cpu_us":N<sep>...` for a span of `wall_ns`.
void write_cpu_args(JsonOut& o, const SpanCpu& c, int64_t wall_ns, std::string_view prefix, std::string_view sep);

}  // namespace ddp
