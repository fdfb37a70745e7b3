#pragma once
// Compact coding of one lane's events: per event, zig-zag varints of the deltas to the previous event (begin, step)
// and plain varints of the rest, then zstd over the whole block. Typical training spans take 2-6 bytes each.
#include <cstdint>
#include <string>
#include <vector>

#include "traces/model/event.h"

namespace ddp {

// Appends the coded block for `events` to `out` (uncompressed varint stream).
void encode_events(const Event* events, size_t count, std::vector<uint8_t>& out);

// Decodes exactly `count` events from a varint stream; returns false (and leaves `error` set) on malformed input.
bool decode_events(const uint8_t* data, size_t size, size_t count, uint8_t lane, std::vector<Event>& out,
                   std::string& error);

}  // namespace ddp
