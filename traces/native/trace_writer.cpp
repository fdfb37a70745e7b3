#include "traces/native/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "traces/base/crc32.h"
#include "traces/model/run_folder.h"
#include "traces/native/event_codec.h"

namespace ddp {
namespace {
bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
}  // namespace

TraceWriter::~TraceWriter() {
  close();
  ZSTD_freeCCtx(cctx_);
}

bool TraceWriter::open(const std::string& path, uint32_t rank, uint32_t world, std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  fd_ = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error = "cannot create trace file " + path + ": " + std::strerror(errno);
    return false;
  }
  format::FileHeader h{};
  std::memcpy(h.magic, format::kFileMagic, sizeof(h.magic));
  h.version = format::kVersion;
  h.rank = rank;
  h.world = world;
  h.header_bytes = sizeof(h);
  h.created_unix_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (!write_all(fd_, reinterpret_cast<const uint8_t*>(&h), sizeof(h))) {
    error = "cannot write trace header to " + path + ": " + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  bytes_ = sizeof(h);
  return true;
}

bool TraceWriter::write_chunk(format::ChunkType type, const uint8_t* payload, size_t size) {
  if (fd_ < 0 || size > format::kMaxChunkPayload) return false;
  format::ChunkHeader ch{format::kChunkMagic, static_cast<uint16_t>(type), 0, static_cast<uint32_t>(size),
                         crc32(payload, size)};
  frame_.resize(sizeof(ch) + size);
  std::memcpy(frame_.data(), &ch, sizeof(ch));
  if (size) std::memcpy(frame_.data() + sizeof(ch), payload, size);
  if (!write_all(fd_, frame_.data(), frame_.size())) return false;
  bytes_ += frame_.size();
  return true;
}

bool TraceWriter::write_lane(uint8_t lane, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t> p(1 + name.size());
  p[0] = lane;
  std::memcpy(p.data() + 1, name.data(), name.size());
  return write_chunk(format::ChunkType::lane, p.data(), p.size());
}

bool TraceWriter::write_events(uint8_t lane, const Event* events, size_t count) {
  if (count == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  raw_.clear();
  encode_events(events, count, raw_);
  format::EventsPayloadHeader eh{lane, 1, 0, static_cast<uint32_t>(count), static_cast<uint32_t>(raw_.size())};
  size_t bound = ZSTD_compressBound(raw_.size());
  packed_.resize(sizeof(eh) + bound);
  std::memcpy(packed_.data(), &eh, sizeof(eh));
  // Level 1: the drain thread shares cores with training; level 3 saves ~4% of bytes for twice the CPU.
  if (!cctx_ && !(cctx_ = ZSTD_createCCtx())) return false;
  size_t z = ZSTD_compressCCtx(cctx_, packed_.data() + sizeof(eh), bound, raw_.data(), raw_.size(), 1);
  if (ZSTD_isError(z)) return false;
  if (!write_chunk(format::ChunkType::events, packed_.data(), sizeof(eh) + z)) return false;
  events_ += count;
  return true;
}

bool TraceWriter::write_clock(const format::ClockPayload& clock) {
  std::lock_guard<std::mutex> lock(mu_);
  return write_chunk(format::ChunkType::clock, reinterpret_cast<const uint8_t*>(&clock), sizeof(clock));
}

bool TraceWriter::write_meta(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t> p(key.size() + 1 + value.size());
  std::memcpy(p.data(), key.data(), key.size());
  p[key.size()] = 0;
  std::memcpy(p.data() + key.size() + 1, value.data(), value.size());
  return write_chunk(format::ChunkType::meta, p.data(), p.size());
}

bool TraceWriter::write_end(uint64_t events, uint64_t dropped) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t p[2] = {events, dropped};
  return write_chunk(format::ChunkType::end, reinterpret_cast<const uint8_t*>(p), sizeof(p));
}

void TraceWriter::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool write_native_traces(const std::string& run_dir, const std::vector<RankTrace>& ranks, uint32_t world,
                         std::string& error) {
  for (const RankTrace& t : ranks) {
    const std::string path = in_run(run_dir, rank_trace_file(static_cast<int>(t.rank)));
    TraceWriter w;
    if (!w.open(path, t.rank, world, error)) return false;
    bool ok = true;
    for (size_t l = 0; l < t.lanes.size(); ++l) ok &= w.write_lane(static_cast<uint8_t>(l), t.lanes[l]);
    for (const auto& c : t.clocks) ok &= w.write_clock(c);
    for (const auto& [k, v] : t.meta) ok &= w.write_meta(k, v);
    // One lane's events per chunk, in time order (the codec codes deltas to the previous event of the chunk).
    constexpr size_t kChunk = 1 << 14;
    for (size_t l = 0; l < t.lanes.size(); ++l) {
      std::vector<Event> lane;  // each span with a CPU split followed by its cpu event, as the recorder writes them
      SpanCpuCursor splits(t.cpu);
      for (size_t i = 0; i < t.events.size(); ++i) {
        const SpanCpu* split = splits.at(i);
        if (t.events[i].lane != l) continue;
        lane.push_back(t.events[i]);
        if (split) lane.push_back(cpu_event(t.events[i], *split));
      }
      for (size_t i = 0; i < lane.size(); i += kChunk)
        ok &= w.write_events(static_cast<uint8_t>(l), lane.data() + i, std::min(kChunk, lane.size() - i));
    }
    ok &= w.write_end(t.events.size() + t.cpu.size(), 0);
    w.close();
    if (!ok) {
      error = "cannot write " + path;
      return false;
    }
  }
  return true;
}

}  // namespace ddp
