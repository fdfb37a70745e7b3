#pragma once
// Analysis where the traces are (docs/kineto.md, "Digests"): a per-rank digest is what the importer keeps of one
// PyTorch profiler trace — its stage spans (steps, stages, collectives with their sizes and process groups), threads,
// CUDA record names and identity — written where the trace lies, so that only digests travel to one machine. The
// cross-rank half of the import (cycles, identity checks, the clock alignment, the analysis) then runs on the digests
// exactly as on the traces: the same KFile comes back, so the verdict and causes are the same.
//
// A digest file: 8 bytes of magic, the payload's size (u64, little-endian), then the payload as one zstd frame:
// a JSON header (identity, status, names, the untracked time's operators; its length a varint before it) and the spans,
// each as varints (start as a delta to the previous span's, duration, size, step, correlation, name, thread, process
// group) and three bytes (stage, collective source, flags).
#include <string>
#include <vector>

#include "traces/kineto/kineto_file.h"
#include "traces/kineto/kineto_map.h"

namespace ddp {

// A digest's file name ends so; any other file in a digest folder is not read as one.
inline constexpr const char* kDigestSuffix = ".ddpdigest";
bool is_digest_file_name(const std::string& name);
// True when any input is a digest file or a folder holding one.
bool names_digests(const std::vector<std::string>& inputs);

// The digest's file name for a trace: rank<R>.<trace file name without .json/.json.gz>.ddpdigest (rank "unknown"
// when the trace does not say; the name as it is when it starts with rank<R>. already).
std::string digest_file_name(const kineto_detail::KFile& f);

// Writes `f` as the digest `path` (atomically: whole or not at all). `source_bytes` is the trace file's size, kept
// for the ratio a digest's reader can report. False with `error` set.
bool write_digest(const kineto_detail::KFile& f, uint64_t source_bytes, const std::string& path, std::string& error);

// Reads a digest back into the KFile it was made from. A damaged or foreign file comes back with `status` set (and
// `path` the digest's), never throws on bad bytes.
kineto_detail::KFile read_digest(const std::string& path);

// What a digest says of itself without its spans: the trace it was made from (host and path) and its size.
struct DigestOrigin {
  std::string host;
  std::string path;
  uint64_t source_bytes = 0;
  int rank = -1;
};
bool read_digest_origin(const std::string& path, DigestOrigin& origin, std::string& error);

// One trace digested by make_digests.
struct DigestMade {
  std::string trace;   // the trace file
  std::string digest;  // the digest written
  int rank = -1;       // -1: the trace does not say (its digest carries the problem)
  uint64_t trace_bytes = 0, digest_bytes = 0;
  uint64_t json_bytes = 0;  // the trace's JSON text (a .json.gz file's inflated size)
  std::string problem;      // the trace is damaged: its digest says so, and the analysis lists it as it lists the trace
};

// --digest: every trace `inputs` name (files or folders of them) read as --analyze reads it (`map`: the user's --map
// rules, which apply here, where the events are) and written as a digest into `out_dir` (created when missing).
// Several calls, one per node, may write into one folder: a digest already there is replaced only when it was made
// from the same trace (host and path); another trace's digest of the same name is an error, found before anything is
// written. False with `error` set.
bool make_digests(const std::vector<std::string>& inputs, const KinetoStageMap& map, const std::string& out_dir,
                  std::vector<DigestMade>& made, std::string& error);

}  // namespace ddp
