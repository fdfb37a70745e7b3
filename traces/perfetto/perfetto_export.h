#pragma once
// Perfetto's own trace format (protobuf TracePackets, docs/viewer.md "Which format"): what Perfetto UI and
// trace_processor read natively and at any size, where JSON is their legacy input (parsed in the browser, ~2 GB at
// most). Written by a small encoder (proto_writer.h), no protobuf library.
//
// Per rank: a process track (pid = rank), a thread track per lane, a counter track per counter; spans as
// TYPE_SLICE_BEGIN/END pairs, properly nested per thread; names interned once per rank's sequence; debug annotations
// step (on each step's slice, which the others nest in) and bucket (allreduce); flows from each CUDA API call to the
// GPU work it launched and from each backward to the gradient buckets' allreduces it produced. Every rank on rank 0's
// clock, time zero at the run's first event.
#include <cstdint>
#include <string>
#include <vector>

#include "traces/model/run_trace.h"

namespace ddp {

struct PerfettoExportStats {
  uint64_t slices = 0, counters = 0, flows = 0;
  uint64_t clipped = 0;  // spans that overlapped an enclosing span on their thread: ended with it (a track nests)
  uint64_t bytes = 0;
  std::vector<std::string> files;  // what was written
};

// True when `path` names a tar archive: one file per rank plus a perfetto_manifest.json (Perfetto merges them).
bool is_perfetto_archive_path(const std::string& path);

// `path` ending in .tar: rank<R>.pftrace per rank and perfetto_manifest.json in a tar; anything else: one trace with
// every rank. Written whole or not at all.
bool export_perfetto(const RunTrace& run, const std::string& path, PerfettoExportStats& stats, std::string& error);

// One rank's TracePackets, each framed as Trace.packet (so any concatenation of them is a Trace): `shift` puts its
// timestamps on the export's clock; `sequence` is its trusted_packet_sequence_id (unique per rank).
std::string perfetto_rank_packets(const RankTrace& rank, int64_t shift, uint32_t sequence, PerfettoExportStats& stats);

}  // namespace ddp
