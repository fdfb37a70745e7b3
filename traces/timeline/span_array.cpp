// SpanArray: rows in pages of their own, assembled from staged chunks by moving pages (span_array.h says why).
#include "traces/timeline/span_array.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "traces/timeline/staged_spans.h"

namespace ddp {
namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

size_t round_to_pages(size_t bytes) { return (bytes + page_size() - 1) / page_size() * page_size(); }

Span* map_spans(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<Span*>(p);
}

}  // namespace

SpanArray::~SpanArray() {
  if (data_) ::munmap(data_, mapped_);
}

SpanArray SpanArray::with_capacity(size_t n) {
  SpanArray a;
  if (n == 0) return a;
  a.mapped_ = round_to_pages(n * sizeof(Span));
  a.data_ = map_spans(a.mapped_);  // untouched pages cost nothing until written
  return a;
}

SpanArray& SpanArray::operator=(const std::vector<Span>& spans) {
  SpanArray a = with_capacity(spans.size());
  for (const Span& s : spans) a.push_back(s);
  return *this = std::move(a);
}

SpanArray SpanArray::from_staged(StagedSpans& staged) {
  const size_t total = staged.size();
  SpanArray a = with_capacity(total);
  const size_t page = page_size();
  staged.take_chunks([&](Span* spans, size_t count, size_t capacity) {
    if (!spans) return;
    const size_t bytes = capacity * sizeof(Span);
    Span* at = a.data_ + a.size_;
    // A chunk landing on a page boundary is moved: its pages replace the placeholder's (MREMAP_FIXED unmaps what was
    // there). A full one whole; the last one, part-filled most often (up to 24 MB: copied, it was written to fresh
    // pages again), up to its last span's page, which ends where the placeholder does, unless it is small (a copy
    // costs less than moving pages then). Anything else (a part-filled chunk inside the row, a chunk after one) is
    // copied.
    constexpr size_t kSmallestMovedTail = 64 << 10;
    const bool last = a.size_ + count == total;
    const size_t moved = count == capacity ? bytes : round_to_pages(count * sizeof(Span));
    const bool movable = (count == capacity || (last && moved >= kSmallestMovedTail)) && moved % page == 0 &&
                         moved <= bytes && reinterpret_cast<uintptr_t>(at) % page == 0;
    if (movable && ::mremap(spans, moved, moved, MREMAP_MAYMOVE | MREMAP_FIXED, at) != MAP_FAILED) {
      if (moved < bytes) ::munmap(reinterpret_cast<char*>(spans) + moved, bytes - moved);  // the chunk's unused end
      a.size_ += count;
      return;
    }
    if (count) std::memcpy(static_cast<void*>(at), spans, count * sizeof(Span));
    a.size_ += count;
    ::munmap(spans, bytes);
  });
  return a;
}

}  // namespace ddp
