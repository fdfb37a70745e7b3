// CUPTI activity records made by hand, as CUPTI would fill a buffer, translated and collected into trace events: the
// translation is tested on any machine whose build has the CUPTI headers, no GPU needed.
#if DDP_PROFILE_CUPTI
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "profiler/cupti_records.h"
#include "tests/support/fake_activity_source.h"
#include "tests/support/memory_event_sink.h"

namespace {
using namespace ddp;
using prof::ActivityRecord;
namespace rec = prof::cupti_record;
using FakeSource = ddp::testing::FakeActivitySource;
using MemorySink = ddp::testing::MemoryEventSink;

// A record as CUPTI hands it over: every field we do not set is zero.
template <typename Record>
Record blank(CUpti_ActivityKind kind) {
  Record r;
  std::memset(static_cast<void*>(&r), 0, sizeof(r));
  r.kind = kind;
  return r;
}

rec::Kernel kernel(uint32_t corr, uint64_t t0, uint64_t t1, const char* name) {
  auto k = blank<rec::Kernel>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.deviceId = 0;
  k.streamId = 7;
  k.correlationId = corr;
  k.start = t0;
  k.end = t1;
  k.name = name;
  return k;
}

rec::Memcpy host_to_device(uint32_t corr, CUpti_ActivityMemoryKind host, uint64_t bytes, uint64_t t0, uint64_t t1) {
  auto m = blank<rec::Memcpy>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = static_cast<uint8_t>(host);
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = bytes;
  m.deviceId = 0;
  m.streamId = 13;
  m.correlationId = corr;
  m.start = t0;
  m.end = t1;
  return m;
}

rec::Memset memset_on_device(uint32_t corr, uint64_t bytes, uint64_t t0, uint64_t t1) {
  auto m = blank<rec::Memset>(CUPTI_ACTIVITY_KIND_MEMSET);
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = bytes;
  m.deviceId = 0;
  m.streamId = 7;
  m.correlationId = corr;
  m.start = t0;
  m.end = t1;
  return m;
}

template <typename Record>
const CUpti_Activity* as_activity(const Record& r) {
  return reinterpret_cast<const CUpti_Activity*>(&r);
}

// Translates hand-made records and runs them through a collector (identity clock), as the CUPTI source would.
struct Rig {
  std::shared_ptr<FakeSource::Control> ctl = std::make_shared<FakeSource::Control>();
  MemorySink sink;
  prof::CuptiApiNames api_names;
  std::vector<ActivityRecord> batch;
  std::unique_ptr<prof::ActivityCollector> col;

  Rig() {
    ctl->identity_clock = true;
    prof::CollectorOptions o;
    o.flush_ms = 0;
    col = std::make_unique<prof::ActivityCollector>(std::make_unique<FakeSource>(ctl), sink, o);
    std::string err;
    EXPECT_TRUE(col->start(err)) << err;
  }
  template <typename Record>
  void add(const Record& r) {
    ActivityRecord a;
    ASSERT_TRUE(prof::translate_cupti_record(as_activity(r), api_names, a));
    batch.push_back(a);
  }
  prof::CollectorStats collect() {
    FakeSource::push(*ctl, batch);
    return col->stop();
  }
};

TEST(CuptiRecords, KernelBecomesASpanOnItsStreamWithItsDemangledName) {
  Rig rig;
  rig.add(kernel(42, 1'000, 2'500, "_Z6matmulPKfS0_Pfi"));
  auto st = rig.collect();
  EXPECT_EQ(st.kernels, 1u);
  auto k = rig.sink.with(Stage::kernel);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(k[0].t0, 1'000);
  EXPECT_EQ(k[0].t1, 2'500);
  EXPECT_EQ(k[0].item, 42u);
  EXPECT_EQ(rig.sink.lane_of(k[0]), "gpu0/stream7");
  EXPECT_EQ(rig.sink.name_of(k[0]), "matmul(float const*, float const*, float*, int)");
}

TEST(CuptiRecords, NcclKernelIsKnownByItsMangledName) {
  Rig rig;
  rig.add(kernel(5, 100, 900, "_Z29ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
  auto st = rig.collect();
  EXPECT_EQ(st.nccl_kernels, 1u);
  auto n = rig.sink.with(Stage::nccl);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].item, 5u);
  EXPECT_TRUE(rig.sink.with(Stage::kernel).empty());
}

TEST(CuptiRecords, HostToDeviceCopiesByHostMemoryKind) {
  Rig rig;
  rig.add(host_to_device(1, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 1 << 20, 0, 50'000));
  rig.add(host_to_device(2, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 4096, 100'000, 250'000));
  auto st = rig.collect();
  EXPECT_EQ(st.memcpys, 2u);
  EXPECT_EQ(st.memcpy_bytes_pinned, 1u << 20);
  EXPECT_EQ(st.memcpy_ns_pinned, 50'000);
  EXPECT_EQ(st.memcpy_bytes_pageable, 4096u);
  EXPECT_EQ(st.memcpy_ns_pageable, 150'000);
  auto h2d = rig.sink.with(Stage::memcpy_h2d);
  ASSERT_EQ(h2d.size(), 2u);
  EXPECT_EQ(h2d[0].value, 1u << 20);
  EXPECT_EQ(h2d[1].value, 4096u);
  EXPECT_EQ(rig.sink.lane_of(h2d[0]), "gpu0/stream13");
  EXPECT_EQ(rig.sink.name_of(h2d[0]), "memcpy HtoD pinned->device");
  EXPECT_EQ(rig.sink.name_of(h2d[1]), "memcpy HtoD pageable->device");
}

TEST(CuptiRecords, MemsetCarriesItsBytes) {
  Rig rig;
  rig.add(memset_on_device(9, 512, 10, 20));
  auto st = rig.collect();
  EXPECT_EQ(st.memsets, 1u);
  auto m = rig.sink.with(Stage::memset);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].value, 512u);
  EXPECT_EQ(m[0].item, 9u);
  EXPECT_EQ(rig.sink.name_of(m[0]), "memset device");
}

TEST(CuptiRecords, RecordOfUnfinishedWorkIsCountedNotDrawn) {
  // A forced flush hands over work still on the GPU with start = end = 0.
  Rig rig;
  rig.add(kernel(3, 0, 0, "_Z6matmulPKfS0_Pfi"));
  rig.add(kernel(4, 300, 400, "gemm"));
  auto st = rig.collect();
  EXPECT_EQ(st.incomplete, 1u);
  ASSERT_EQ(rig.sink.got.size(), 1u);
  EXPECT_EQ(rig.sink.got[0].item, 4u);
}

TEST(CuptiRecords, KindsNotRecordedAreNotTranslated) {
  auto marker = blank<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  prof::CuptiApiNames names;
  ActivityRecord a;
  EXPECT_FALSE(prof::translate_cupti_record(as_activity(marker), names, a));
}

}  // namespace
#endif  // DDP_PROFILE_CUPTI
