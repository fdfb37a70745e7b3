#pragma once
// Our job's manifest from the ranks' side: rank 0 writes it when the ranks have met (so a crashed run still has
// one) and, at the end, completes that same value with every rank's entry; runtime/common/manifest.h fills it,
// traces/model/manifest.h writes it.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/worker_setup.h"
#include "traces/model/manifest.h"

namespace ddp {

// Where this rank runs, for the start manifest's rank_hosts (exchanged between the ranks as text).
records::rank_host this_rank_host();
// Rank 0, before training: the manifest from what it knows and the ranks' hosts (this_rank_host's, in rank order),
// written; returned for write_end_manifest to complete.
Manifest write_start_manifest(const RunSetup& s, const std::vector<int64_t>& sample_shape,
                              const std::vector<std::string>& rank_hosts);
// Rank 0, after the last step: `start` completed with each rank's entry (records::manifest_rank as JSON text, in
// rank order, read against records.def) and the gradient buckets, written over the start manifest.
void write_end_manifest(const RunSetup& s, Manifest start, const std::vector<std::string>& rank_entries,
                        const std::vector<uint64_t>& gradient_buckets);

}  // namespace ddp
