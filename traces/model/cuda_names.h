#pragma once
// The names of a rank's CUDA events (kernels, copies, API calls). The profiler interns each name once and writes it
// as meta "gpu_name/<id>"; a CUDA event carries the id (Event::name_id). Exporters and the viewer both read names
// through here, so a kernel is called the same everywhere.
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traces/model/rank_trace.h"

namespace ddp {

// Indexed by name id; ids without an entry (or with an empty one) hold "".
std::vector<std::string> cuda_event_names(const RankTrace& rank);

// The name of CUDA event `e` from `names`, or its stage's name when the event is unnamed.
std::string_view cuda_event_name(const Event& e, const std::vector<std::string>& names);

// Kineto's category for a CUDA event of stage `s` (kernel, gpu_memcpy, gpu_memset, cuda_sync, cuda_runtime), so tools
// that know PyTorch profiler traces read both our exports the same way.
std::string_view cuda_category(Stage s);

// Correlation id -> the runtime call (a cuda_api span) that launched the GPU work carrying it: the launch arrows of
// every export.
using CudaLaunches = std::unordered_map<uint32_t, const Event*>;
CudaLaunches cuda_launches(const RankTrace& rank);

}  // namespace ddp
