#pragma once
// Which loader span hands each batch to the main thread: for every wait_data span, the loader-thread span (a worker's
// read, transform or collate, the pin thread's pin) of the same pass and batch that ended last. The exports draw
// them as arrows from the worker that made a batch to the wait for it (the flow Nsight Systems draws between a
// producer and its consumer), for our own runs and a user's job alike.
#include <cstddef>
#include <utility>
#include <vector>

#include "traces/model/rank_trace.h"

namespace ddp {

// (index of the loader span, index of the wait_data span) into rank.events, in wait_data order.
std::vector<std::pair<size_t, size_t>> batch_handoffs(const RankTrace& rank);

}  // namespace ddp
