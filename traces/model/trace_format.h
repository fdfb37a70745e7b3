#pragma once
// The native per-rank trace file (`rank<R>.ddpt`). Layout, all little-endian:
//   FileHeader, then a sequence of chunks: ChunkHeader + payload.
// Every chunk carries its payload length and CRC-32, and is written with one write(2) call, so a rank killed at any
// moment leaves a file whose chunks up to the last complete one are readable and verifiable. docs/run-folder.md
// describes each payload.
#include <cstdint>

namespace ddp::format {

inline constexpr char kFileMagic[8] = {'D', 'D', 'P', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kChunkMagic = 0x4B4E4843;  // "CHNK"
inline constexpr uint32_t kMaxChunkPayload = 64u << 20;

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t rank;
  uint32_t world;
  uint32_t header_bytes;  // sizeof(FileHeader), so later versions may grow it
  int64_t created_unix_ns;
};
static_assert(sizeof(FileHeader) == 32);

enum class ChunkType : uint16_t {
  lane = 1,    // u8 lane id, then the lane's name (UTF-8, no terminator)
  events = 2,  // u8 lane, u8 codec (1 = zstd of event_codec stream), u16 0, u32 count, u32 raw bytes, data
  clock = 3,   // ClockPayload
  meta = 4,    // key '\0' value
  end = 5,     // u64 events written, u64 events dropped (buffers full); present only after a clean close
};

struct ChunkHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t flags;
  uint32_t size;  // payload bytes
  uint32_t crc;   // CRC-32 of the payload
};
static_assert(sizeof(ChunkHeader) == 16);

struct EventsPayloadHeader {
  uint8_t lane;
  uint8_t codec;
  uint16_t reserved;
  uint32_t count;
  uint32_t raw_bytes;
};
static_assert(sizeof(EventsPayloadHeader) == 12);

// Offset of this rank's monotonic clock against rank 0's, measured by ping-pong over the process group.
// rank0_time = local_time + offset_ns, known to within +-uncertainty_ns.
struct ClockPayload {
  int64_t offset_ns;
  int64_t uncertainty_ns;
  int64_t measured_at_ns;  // local clock when measured
  uint32_t phase;          // 0 = at start, 1 = at end
  uint32_t rounds;
};
static_assert(sizeof(ClockPayload) == 32);

}  // namespace ddp::format
