#pragma once
// A lane's spans as a loader hands them over, before TimelineBuilder::finish makes the rows: StagedSpans holds spans in
// mapped chunks that never move, so growing copies nothing and has no vector's doubling room (tens of millions of
// spans grew a vector to twice their size and copied them each time), and two builders' spans join by moving chunks.
// LaneStaging sorts a lane's spans into rows as they come, while they come in display order, so that finish can move
// each row's chunks into place (SpanArray::from_staged) instead of sorting and copying them.
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <vector>

#include "traces/timeline/timeline_span.h"

namespace ddp {

class StagedSpans {
 public:
  StagedSpans() = default;
  StagedSpans(const StagedSpans&) = delete;
  StagedSpans& operator=(const StagedSpans&) = delete;
  StagedSpans(StagedSpans&& o) noexcept { take(o); }
  StagedSpans& operator=(StagedSpans&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  ~StagedSpans() { release(); }

  // The hot path of every loader: a compare and a copy (the open chunk's end is kept beside it).
  void push_back(const Span& s) {
    if (next_ == end_) grow();
    new (next_++) Span(s);
  }
  size_t size() const { return closed_size_ + open_size(); }
  bool empty() const { return size() == 0; }

  // Moves `other`'s chunks after this one's (no span is copied).
  void append(StagedSpans&& other) {
    close_open();
    other.close_open();
    for (Chunk& c : other.chunks_) chunks_.push_back(c);
    closed_size_ += other.closed_size_;
    other.chunks_.clear();
    other.closed_size_ = 0;
  }

  template <class F>
  void for_each(F&& f) {
    for (size_t k = 0; k < chunks_.size(); ++k) {
      Chunk& c = chunks_[k];
      for (size_t i = 0, n = chunk_size(k); i < n; ++i) f(c.spans[i]);
    }
  }
  template <class F>
  void for_each(F&& f) const {
    for (size_t k = 0; k < chunks_.size(); ++k) {
      const Chunk& c = chunks_[k];
      for (size_t i = 0, n = chunk_size(k); i < n; ++i) f(static_cast<const Span&>(c.spans[i]));
    }
  }
  // Hands every chunk to `f(spans, count, capacity)`, in order, with its mapping (f unmaps or moves it): the spans
  // are gone after. For SpanArray::from_staged.
  template <class F>
  void take_chunks(F&& f) {
    close_open();
    for (Chunk& c : chunks_) {
      f(c.spans, c.size, c.capacity);
      c = Chunk{};
    }
    chunks_.clear();
    closed_size_ = 0;
  }

  // Hands every span to `f` in order, returning each chunk's memory to the system once it is done: the spans are
  // gone after.
  template <class F>
  void consume(F&& f) {
    close_open();
    for (Chunk& c : chunks_) {
      for (size_t i = 0; i < c.size; ++i) f(static_cast<const Span&>(c.spans[i]));
      unmap(c);
    }
    chunks_.clear();
    closed_size_ = 0;
  }

 private:
  // Chunks are mapped pages of their own, so that a chunk consumed is returned to the system at once (freed heap
  // memory stays in the process: finish would hold the staged spans and the rows together). They grow from 24 KB to
  // 24 MB: a lane of a few spans costs little, and a big lane's chunks are few (each one mapped, moved and unmapped
  // is a TLB shootdown on every core); pages of a chunk never written are never resident.
  static constexpr size_t kFirstChunk = 1024, kLargestChunk = 1u << 20;
  struct Chunk {
    Span* spans = nullptr;
    size_t size = 0, capacity = 0;  // size: of a closed chunk (the open one, the last, is filled up to next_)
  };
  size_t open_size() const { return next_ ? static_cast<size_t>(next_ - chunks_.back().spans) : 0; }
  size_t chunk_size(size_t k) const { return k + 1 == chunks_.size() && next_ ? open_size() : chunks_[k].size; }
  // The open chunk's size written into it: every chunk is closed after (push_back opens a new one when it comes).
  void close_open() {
    if (!next_) return;
    chunks_.back().size = open_size();
    closed_size_ += chunks_.back().size;
    next_ = end_ = nullptr;
  }
  void grow() {
    const size_t n = chunks_.empty() ? kFirstChunk : std::min(kLargestChunk, chunks_.back().capacity * 2);
    void* p = ::mmap(nullptr, n * sizeof(Span), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    close_open();
    chunks_.push_back(Chunk{static_cast<Span*>(p), 0, n});
    next_ = chunks_.back().spans;
    end_ = next_ + n;
  }
  static void unmap(Chunk& c) {
    if (c.spans) ::munmap(c.spans, c.capacity * sizeof(Span));
    c = Chunk{};
  }
  void release() {
    for (Chunk& c : chunks_) unmap(c);
    chunks_.clear();
    closed_size_ = 0;
    next_ = end_ = nullptr;
  }
  void take(StagedSpans& o) {
    chunks_ = std::move(o.chunks_);
    closed_size_ = o.closed_size_;
    next_ = o.next_;
    end_ = o.end_;
    o.chunks_.clear();
    o.closed_size_ = 0;
    o.next_ = o.end_ = nullptr;
  }
  std::vector<Chunk> chunks_;
  size_t closed_size_ = 0;  // spans in the closed chunks
  Span* next_ = nullptr;    // where the open chunk takes its next span; null when no chunk is open
  Span* end_ = nullptr;     // the open chunk's end
};

// Display order: by start, longest first on ties (so parents precede the children that start with them).
inline bool starts_before(const Span& a, const Span& b) {
  return a.t0 < b.t0 || (a.t0 == b.t0 && a.duration() > b.duration());
}

// The row a span takes when spans come in display order: how many spans are still open at its start. The one owner
// of the rows' nesting rule, for rows made as spans come (LaneStaging) and for a lane sorted at finish.
class NestingDepth {
 public:
  static constexpr size_t kMaxRows = 64;  // deeper nesting shares the last row

  size_t next(int64_t t0, int64_t t1) {
    while (!open_.empty() && open_.back() <= t0) open_.pop_back();
    const size_t d = std::min(open_.size(), kMaxRows - 1);
    open_.push_back(t1);
    return d;
  }
  void shift(int64_t d) {
    for (int64_t& end : open_) end += d;
  }

 private:
  std::vector<int64_t> open_;  // ends of the spans open at the last start
};

class LaneStaging {
 public:
  // `t1`: s.t1(), which the caller has already.
  void add(const Span& s, int64_t t1) {
    // In display order unless it starts before the last one (durations compare as their codes: same order).
    if (ordered_ && (count_ == 0 || s.t0 > last_.t0 || (s.t0 == last_.t0 && s.dur_code <= last_.dur_code))) {
      const size_t d = depth_.next(s.t0, t1);
      if (rows_.size() <= d) {
        rows_.resize(d + 1);
        row_max_dur_.resize(d + 1, 0);
      }
      rows_[d].push_back(s);
      row_max_dur_[d] = std::max(row_max_dur_[d], t1 - s.t0);
    } else {
      ordered_ = false;  // from here on finish sorts the lane
      rest_.push_back(s);
    }
    if (count_ == 0) first_ = s;
    last_ = s;
    max_t1_ = std::max(max_t1_, t1);
    ++count_;
  }
  size_t size() const { return count_; }
  bool ordered() const { return ordered_; }
  std::vector<StagedSpans>& rows() { return rows_; }               // by depth, while ordered()
  int64_t row_max_dur(size_t d) const { return row_max_dur_[d]; }  // the longest span of rows()[d]
  StagedSpans& rest() { return rest_; }                            // the spans from the first one out of order on

  template <class F>
  void for_each(F&& f) {
    for (StagedSpans& r : rows_) r.for_each(f);
    rest_.for_each(f);
  }
  template <class F>
  void for_each(F&& f) const {
    for (const StagedSpans& r : rows_) r.for_each(f);
    rest_.for_each(f);
  }
  // After every span was moved by `d` (for_each), or before they are (TimelineBuilder::absorb_all moves them at
  // finish): the order state moves with them.
  void shifted(int64_t d) {
    first_.t0 += d;
    last_.t0 += d;
    max_t1_ += d;
    depth_.shift(d);
  }
  // `other`'s spans after this one's. Rows join row by row when every span of `other` starts after this lane's
  // have ended (one rank's profiling cycles, one file each), else the lane is sorted at finish.
  void append(LaneStaging&& other) {
    if (other.count_ == 0) return;
    if (count_ == 0) {
      *this = std::move(other);
      return;
    }
    if (ordered_ && other.ordered_ && other.first_.t0 >= max_t1_ && !starts_before(other.first_, last_)) {
      if (rows_.size() < other.rows_.size()) {
        rows_.resize(other.rows_.size());
        row_max_dur_.resize(other.rows_.size(), 0);
      }
      for (size_t d = 0; d < other.rows_.size(); ++d) {
        rows_[d].append(std::move(other.rows_[d]));
        row_max_dur_[d] = std::max(row_max_dur_[d], other.row_max_dur_[d]);
      }
      depth_ = std::move(other.depth_);  // this lane's spans all ended before other's first: none is open
    } else {
      ordered_ = false;
      for (StagedSpans& r : rows_) rest_.append(std::move(r));
      for (StagedSpans& r : other.rows_) rest_.append(std::move(r));
      rows_.clear();
      row_max_dur_.clear();
      rest_.append(std::move(other.rest_));
    }
    last_ = other.last_;
    max_t1_ = std::max(max_t1_, other.max_t1_);
    count_ += other.count_;
    other = LaneStaging{};
  }

 private:
  std::vector<StagedSpans> rows_;
  std::vector<int64_t> row_max_dur_;  // per row of rows_
  StagedSpans rest_;
  NestingDepth depth_;
  Span first_, last_;
  int64_t max_t1_ = std::numeric_limits<int64_t>::min();
  size_t count_ = 0;
  bool ordered_ = true;
};

}  // namespace ddp
