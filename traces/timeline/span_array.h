#pragma once
// A row's spans: one contiguous array in pages mapped for it. Built from a lane's staged chunks (staged_spans.h) by
// moving their pages into place (mremap), not by copying them: a row of tens of millions of spans costs no copy and
// no fresh page, and the staging and the row are never in memory together.
#include <cstddef>
#include <vector>

#include "traces/timeline/timeline_span.h"

namespace ddp {

class StagedSpans;

class SpanArray {
 public:
  SpanArray() = default;
  SpanArray(const SpanArray&) = delete;
  SpanArray& operator=(const SpanArray&) = delete;
  SpanArray(SpanArray&& o) noexcept { swap(o); }
  SpanArray& operator=(SpanArray&& o) noexcept {
    SpanArray(std::move(o)).swap(*this);
    return *this;
  }
  ~SpanArray();
  // A copy of `spans` (tests, small rows).
  SpanArray& operator=(const std::vector<Span>& spans);

  // Room for exactly `n` spans, filled by push_back (never more than n).
  static SpanArray with_capacity(size_t n);
  void push_back(const Span& s) { new (&data_[size_++]) Span(s); }
  // Every span of `staged`, in order: full chunks' pages moved into place, the others copied. `staged` is empty after.
  static SpanArray from_staged(StagedSpans& staged);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Span* begin() const { return data_; }
  const Span* end() const { return data_ + size_; }
  Span* begin() { return data_; }
  Span* end() { return data_ + size_; }
  const Span& operator[](size_t i) const { return data_[i]; }
  Span& operator[](size_t i) { return data_[i]; }
  const Span& front() const { return data_[0]; }
  const Span& back() const { return data_[size_ - 1]; }

 private:
  void swap(SpanArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(mapped_, o.mapped_);
  }
  Span* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped at data_
};

}  // namespace ddp
