#include "traces/native/trace_reader.h"

#include <zstd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "traces/base/crc32.h"
#include "traces/native/event_codec.h"

namespace ddp {

namespace {
std::string at(uint64_t offset) { return " at byte " + std::to_string(offset); }

// Returns an empty string when the payload was applied, else why it is invalid.
std::string apply_chunk(format::ChunkType type, const uint8_t* p, size_t n, RankTrace& t) {
  switch (type) {
    case format::ChunkType::lane: {
      if (n < 1) return "empty lane chunk";
      uint8_t id = p[0];
      if (t.lanes.size() <= id) {
        size_t old = t.lanes.size();
        t.lanes.resize(id + 1u);
        for (size_t i = old; i < t.lanes.size(); ++i) t.lanes[i] = "lane " + std::to_string(i);
      }
      t.lanes[id].assign(reinterpret_cast<const char*>(p + 1), n - 1);
      return {};
    }
    case format::ChunkType::events: {
      format::EventsPayloadHeader eh;
      if (n < sizeof(eh)) return "events chunk shorter than its header";
      std::memcpy(&eh, p, sizeof(eh));
      if (eh.codec != 1) return "events chunk has unknown codec " + std::to_string(eh.codec);
      if (eh.raw_bytes > format::kMaxChunkPayload * 4ull || eh.count > eh.raw_bytes)
        return "events chunk declares an implausible size";
      std::vector<uint8_t> raw(eh.raw_bytes);
      size_t z = ZSTD_decompress(raw.data(), raw.size(), p + sizeof(eh), n - sizeof(eh));
      if (ZSTD_isError(z) || z != eh.raw_bytes) return "events chunk does not decompress";
      std::string err;
      size_t before = t.events.size();
      if (!decode_events(raw.data(), raw.size(), eh.count, eh.lane, t.events, err)) {
        t.events.resize(before);
        return err;
      }
      if (t.lanes.size() <= eh.lane) {
        size_t old = t.lanes.size();
        t.lanes.resize(eh.lane + 1u);
        for (size_t i = old; i < t.lanes.size(); ++i) t.lanes[i] = "lane " + std::to_string(i);
      }
      return {};
    }
    case format::ChunkType::clock: {
      if (n != sizeof(format::ClockPayload)) return "clock chunk has the wrong size";
      format::ClockPayload c;
      std::memcpy(&c, p, sizeof(c));
      t.clocks.push_back(c);
      return {};
    }
    case format::ChunkType::meta: {
      const void* z = std::memchr(p, 0, n);
      if (!z) return "meta chunk without a key terminator";
      size_t k = static_cast<const uint8_t*>(z) - p;
      t.meta[std::string(reinterpret_cast<const char*>(p), k)] =
          std::string(reinterpret_cast<const char*>(p + k + 1), n - k - 1);
      return {};
    }
    case format::ChunkType::end: {
      if (n != 16) return "end chunk has the wrong size";
      std::memcpy(&t.dropped, p + 8, 8);
      t.complete = true;
      return {};
    }
  }
  return "unknown chunk type " + std::to_string(static_cast<unsigned>(type));
}
}  // namespace

TraceReadResult read_trace_bytes(const uint8_t* data, size_t size) {
  TraceReadResult r;
  format::FileHeader h;
  if (size < sizeof(h)) {
    r.error = TraceError::not_a_trace;
    r.message = "file is shorter than a trace header (" + std::to_string(size) + " bytes)";
    return r;
  }
  std::memcpy(&h, data, sizeof(h));
  if (std::memcmp(h.magic, format::kFileMagic, sizeof(h.magic)) != 0) {
    r.error = TraceError::not_a_trace;
    r.message = "not a ddp_profile trace (bad magic)";
    return r;
  }
  if (h.version != format::kVersion || h.header_bytes < sizeof(h) || h.header_bytes > size) {
    r.error = TraceError::unsupported_version;
    r.message = "unsupported trace version " + std::to_string(h.version);
    return r;
  }
  RankTrace& t = r.trace;
  t.rank = h.rank;
  t.world = h.world;
  t.created_unix_ns = h.created_unix_ns;
  uint64_t off = h.header_bytes;
  while (off < size) {
    format::ChunkHeader ch;
    if (size - off < sizeof(ch)) {
      t.damage = "truncated chunk header" + at(off);
      break;
    }
    std::memcpy(&ch, data + off, sizeof(ch));
    if (ch.magic != format::kChunkMagic) {
      t.damage = "bad chunk magic" + at(off);
      break;
    }
    if (ch.size > format::kMaxChunkPayload || ch.size > size - off - sizeof(ch)) {
      t.damage = "chunk payload truncated or oversized" + at(off);
      break;
    }
    const uint8_t* payload = data + off + sizeof(ch);
    if (crc32(payload, ch.size) != ch.crc) {
      t.damage = "chunk checksum mismatch" + at(off);
      break;
    }
    std::string why = apply_chunk(static_cast<format::ChunkType>(ch.type), payload, ch.size, t);
    if (!why.empty()) {
      t.damage = why + at(off);
      break;
    }
    off += sizeof(ch) + ch.size;
  }
  t.good_bytes = off;
  t.cpu = take_cpu_events(t.events);
  if (t.damage.empty() && !t.complete) t.damage = "trace was not closed cleanly (the rank ended early)";
  return r;
}

TraceReadResult read_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    TraceReadResult r;
    r.error = TraceError::cannot_open;
    r.message = "cannot open " + path;
    return r;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TraceReadResult r = read_trace_bytes(bytes.data(), bytes.size());
  if (!r.ok()) r.message = path + ": " + r.message;
  return r;
}

}  // namespace ddp
