#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "traces/model/event.h"
#include "traces/model/rank_trace.h"
#include "traces/model/trace_format.h"

struct ZSTD_CCtx_s;

namespace ddp {

// Appends chunks to a native trace file. Each chunk goes out in one write(2), unbuffered, so what was written
// survives the process being killed. Thread-safe.
class TraceWriter {
 public:
  TraceWriter() = default;
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Creates (truncates) the file and writes the header. Returns false with `error` set on failure.
  bool open(const std::string& path, uint32_t rank, uint32_t world, std::string& error);
  bool is_open() const { return fd_ >= 0; }

  bool write_lane(uint8_t lane, const std::string& name);
  bool write_events(uint8_t lane, const Event* events, size_t count);
  bool write_clock(const format::ClockPayload& clock);
  bool write_meta(const std::string& key, const std::string& value);
  bool write_end(uint64_t events, uint64_t dropped);
  void close();

  uint64_t bytes_written() const { return bytes_; }
  uint64_t events_written() const { return events_; }

 private:
  bool write_chunk(format::ChunkType type, const uint8_t* payload, size_t size);

  std::mutex mu_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint64_t events_ = 0;
  std::vector<uint8_t> raw_, packed_, frame_;
  // One compression context for every chunk: a fresh one per chunk (ZSTD_compress) allocates and initialises its
  // tables each time, on the writer thread that shares the rank's core with training.
  ZSTD_CCtx_s* cctx_ = nullptr;
};

// Writes each rank as run_dir/rank<R>.ddpt (the native format), world size `world`: its lanes, clocks, meta and
// events, one lane's events per chunk in time order.
bool write_native_traces(const std::string& run_dir, const std::vector<RankTrace>& ranks, uint32_t world,
                         std::string& error);

}  // namespace ddp
