#pragma once
// A lane's spans as a loader hands them over, before TimelineBuilder::finish sorts them into rows: chunks that never
// move once allocated, so growing copies nothing and has no vector's doubling room (tens of millions of spans grew a
// vector to twice their size and copied them each time), and two builders' spans join by moving chunks. finish then
// consumes the chunks one at a time into the rows, freeing each as it goes: the spans are in memory about once.
#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

#include <sys/mman.h>

#include "traces/timeline/timeline_span.h"

namespace ddp {

class StagedSpans {
 public:
  StagedSpans() = default;
  StagedSpans(const StagedSpans&) = delete;
  StagedSpans& operator=(const StagedSpans&) = delete;
  StagedSpans(StagedSpans&& o) noexcept : chunks_(std::move(o.chunks_)), size_(o.size_) { o.size_ = 0; }
  StagedSpans& operator=(StagedSpans&& o) noexcept {
    if (this != &o) {
      release();
      chunks_ = std::move(o.chunks_);
      size_ = o.size_;
      o.size_ = 0;
    }
    return *this;
  }
  ~StagedSpans() { release(); }

  void push_back(const Span& s) {
    if (chunks_.empty() || chunks_.back().size == chunks_.back().capacity) grow(0);
    Chunk& c = chunks_.back();
    new (&c.spans[c.size++]) Span(s);
    ++size_;
  }
  // Room for `n` more spans in one chunk (a loader that knows its count).
  void reserve(size_t n) {
    if (n > 0 && (chunks_.empty() || chunks_.back().capacity - chunks_.back().size < n)) grow(n);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Moves `other`'s chunks after this one's (no span is copied).
  void append(StagedSpans&& other) {
    for (Chunk& c : other.chunks_) chunks_.push_back(c);
    size_ += other.size_;
    other.chunks_.clear();
    other.size_ = 0;
  }

  template <class F>
  void for_each(F&& f) {
    for (Chunk& c : chunks_)
      for (size_t i = 0; i < c.size; ++i) f(c.spans[i]);
  }
  template <class F>
  void for_each(F&& f) const {
    for (const Chunk& c : chunks_)
      for (size_t i = 0; i < c.size; ++i) f(static_cast<const Span&>(c.spans[i]));
  }
  // Hands every span to `f` in order, returning each chunk's memory to the system once it is done: the spans are
  // gone after.
  template <class F>
  void consume(F&& f) {
    for (Chunk& c : chunks_) {
      for (size_t i = 0; i < c.size; ++i) f(static_cast<const Span&>(c.spans[i]));
      unmap(c);
    }
    chunks_.clear();
    size_ = 0;
  }

 private:
  // Chunks are mapped pages of their own, so that a chunk consumed is returned to the system at once (freed heap
  // memory stays in the process: finish would hold the staged spans and the rows together). They grow from 32 KB to
  // 2 MB: a lane of a few spans costs little, a big lane's last chunk wastes at most 2 MB.
  static constexpr size_t kFirstChunk = 1024, kLargestChunk = 65536;
  struct Chunk {
    Span* spans = nullptr;
    size_t size = 0, capacity = 0;
  };
  void grow(size_t at_least) {
    size_t n = chunks_.empty() ? kFirstChunk : std::min(kLargestChunk, chunks_.back().capacity * 2);
    n = std::max(n, at_least);
    void* p = ::mmap(nullptr, n * sizeof(Span), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    chunks_.push_back(Chunk{static_cast<Span*>(p), 0, n});
  }
  static void unmap(Chunk& c) {
    if (c.spans) ::munmap(c.spans, c.capacity * sizeof(Span));
    c = Chunk{};
  }
  void release() {
    for (Chunk& c : chunks_) unmap(c);
    chunks_.clear();
    size_ = 0;
  }
  std::vector<Chunk> chunks_;
  size_t size_ = 0;
};

}  // namespace ddp
