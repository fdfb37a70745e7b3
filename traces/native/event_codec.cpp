#include "traces/native/event_codec.h"

#include "traces/base/varint.h"

namespace ddp {

void encode_events(const Event* events, size_t count, std::vector<uint8_t>& out) {
  int64_t prev_t0 = 0;
  int64_t prev_step = 0;
  for (size_t i = 0; i < count; ++i) {
    const Event& e = events[i];
    put_varint(out, zigzag(e.t0 - prev_t0));
    put_varint(out, zigzag(e.t1 - e.t0));
    put_varint(out, static_cast<uint64_t>(e.kind) | (static_cast<uint64_t>(e.stage) << 2));
    put_varint(out, zigzag(static_cast<int64_t>(e.step) - prev_step));
    put_varint(out, e.value);
    put_varint(out, e.item);
    put_varint(out, e.epoch);
    put_varint(out, static_cast<uint16_t>(e.bucket + 1));  // kNoBucket codes as 0
    put_varint(out, e.micro);
    prev_t0 = e.t0;
    prev_step = e.step;
  }
}

bool decode_events(const uint8_t* data, size_t size, size_t count, uint8_t lane, std::vector<Event>& out,
                   std::string& error) {
  VarintReader c{data, data + size};
  int64_t prev_t0 = 0;
  int64_t prev_step = 0;
  // No reserve here: callers append chunk after chunk, and an exact reserve per chunk would copy quadratically.
  for (size_t i = 0; i < count; ++i) {
    Event e;
    e.t0 = prev_t0 + unzigzag(c.varint());
    e.t1 = e.t0 + unzigzag(c.varint());
    uint64_t ks = c.varint();
    e.kind = static_cast<uint8_t>(ks & 3);
    e.stage = static_cast<uint8_t>(ks >> 2);
    prev_step += unzigzag(c.varint());
    e.step = static_cast<uint32_t>(prev_step);
    e.value = c.varint();
    e.item = static_cast<uint32_t>(c.varint());
    e.epoch = static_cast<uint16_t>(c.varint());
    e.bucket = static_cast<uint16_t>(c.varint() - 1);
    e.micro = static_cast<uint8_t>(c.varint());
    e.lane = lane;
    if (!c.ok) {
      error = "event block ends inside event " + std::to_string(i) + " of " + std::to_string(count);
      return false;
    }
    const bool bad_stage =
        e.kind == static_cast<uint8_t>(EventKind::counter) ? e.stage >= kCounterCount : e.stage >= kStageCount;
    if (e.kind > static_cast<uint8_t>(EventKind::cpu) || bad_stage || e.t1 < e.t0) {
      error = "event " + std::to_string(i) + " has an invalid kind, stage or duration";
      return false;
    }
    prev_t0 = e.t0;
    out.push_back(e);
  }
  if (c.p != c.end) {
    error = "event block has " + std::to_string(c.end - c.p) + " trailing bytes";
    return false;
  }
  return true;
}

}  // namespace ddp
