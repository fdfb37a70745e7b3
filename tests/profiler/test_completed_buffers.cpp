// The bounded hand-over between CUPTI's completion callback and the collector's thread.
#include <gtest/gtest.h>

#include <cstdlib>

#include "profiler/completed_buffers.h"

namespace {
using ddp::prof::CompletedBuffer;
using ddp::prof::CompletedBuffers;
using Offer = CompletedBuffers::Offer;

CompletedBuffer buffer(size_t valid) { return {static_cast<uint8_t*>(std::malloc(16)), valid}; }

TEST(CompletedBuffers, RefusesBuffersWhileClosed) {
  CompletedBuffers q(4);
  CompletedBuffer b = buffer(8);
  EXPECT_EQ(q.offer(b), Offer::closed);
  std::free(b.data);  // refused: still the caller's
  q.open();
  EXPECT_EQ(q.offer(buffer(8)), Offer::queued);
  q.close();
  b = buffer(8);
  EXPECT_EQ(q.offer(b), Offer::closed);
  std::free(b.data);
  auto left = q.take();  // closing keeps what was queued for the last delivery
  ASSERT_EQ(left.size(), 1u);
  std::free(left[0].data);
}

TEST(CompletedBuffers, FullQueueRefusesAndCountsWhatItLoses) {
  CompletedBuffers q(2);
  q.open();
  EXPECT_EQ(q.offer(buffer(1)), Offer::queued);
  EXPECT_EQ(q.offer(buffer(2)), Offer::queued);
  CompletedBuffer third = buffer(3);
  EXPECT_EQ(q.offer(third), Offer::full);
  q.count_lost(100);  // what the callback does with a refused buffer's records
  std::free(third.data);
  EXPECT_EQ(q.lost(), 100u);
  auto got = q.take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].valid, 1u);  // oldest first
  EXPECT_EQ(got[1].valid, 2u);
  for (auto& b : got) std::free(b.data);
  EXPECT_EQ(q.offer(buffer(4)), Offer::queued) << "taking the queue makes room again";
  // The destructor frees what is still queued (ASan would report a leak otherwise).
}
}  // namespace
