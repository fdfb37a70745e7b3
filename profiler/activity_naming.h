#pragma once
// How an activity record appears in the trace: its stage, its lane's name and its display name.
#include <string>

#include "profiler/activity_source.h"
#include "traces/model/event.h"

namespace ddp::prof {

const char* mem_kind_name(MemKind k);
const char* sync_kind_name(SyncKind k);

// The stage a record becomes: kernels whose name starts with "nccl" are `nccl`; copies by direction.
Stage stage_for(const ActivityRecord& r);
// "gpu<device>/stream<stream>" for GPU work.
std::string gpu_lane_name(uint32_t device, uint32_t stream);
// A readable name for a copy/memset ("memcpy HtoD pinned->device") or the record's own name (demangled kernels).
std::string display_name(const ActivityRecord& r);

}  // namespace ddp::prof
