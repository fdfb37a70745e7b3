// Level-of-detail queries: what of a row or a counter series is visible in a time range at a zoom.
#include <algorithm>
#include <cmath>

#include "traces/timeline/timeline.h"

namespace ddp {

size_t first_visible(const Row& row, int64_t t) {
  // Every span that overlaps t starts at or after t - max_dur.
  int64_t from = t - row.max_dur;
  auto it =
      std::lower_bound(row.spans.begin(), row.spans.end(), from, [](const Span& s, int64_t v) { return s.t0 < v; });
  return static_cast<size_t>(it - row.spans.begin());
}

void query_row(const Row& row, const LodView& view, std::vector<DrawBox>& out) {
  const SpanArray& s = row.spans;
  const size_t n = s.size();
  if (n == 0 || view.t1 < view.t0) return;
  const int64_t thr = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(view.min_px * view.ns_per_px)));
  size_t i = first_visible(row, view.t0);
  auto start_at_or_after = [&](size_t from, int64_t t) {
    auto it = std::lower_bound(s.begin() + static_cast<std::ptrdiff_t>(from), s.end(), t,
                               [](const Span& a, int64_t v) { return a.t0 < v; });
    return static_cast<size_t>(it - s.begin());
  };
  while (i < n && s[i].t0 <= view.t1) {
    if (s[i].t1() < view.t0) {
      ++i;
      continue;
    }
    if (s[i].duration() >= thr) {
      out.push_back({s[i].t0, s[i].t1(), static_cast<uint32_t>(i), 1});
      ++i;
      continue;
    }
    // A run of small spans: extend while the next span starts within `thr` of the run's end, jumping by binary
    // search over everything that starts inside that window.
    int64_t run_t0 = s[i].t0, run_t1 = s[i].t1();
    size_t k = i + 1;
    while (k < n && run_t1 <= view.t1) {
      size_t j = start_at_or_after(k, run_t1 + thr);
      if (j == k) break;
      if (s[j - 1].duration() >= thr) {  // a wide span ends the run; it is drawn on its own
        if (j - 1 > k) run_t1 = std::max(run_t1, s[j - 2].t1());
        k = j - 1;
        break;
      }
      run_t1 = std::max(run_t1, s[j - 1].t1());
      k = j;
    }
    out.push_back({run_t0, run_t1, static_cast<uint32_t>(i), static_cast<uint32_t>(k - i)});
    i = k;
  }
}

void query_counter(const CounterSeries& c, const LodView& view, std::vector<CounterPoint>& out) {
  const size_t n = c.t.size();
  if (n == 0) return;
  auto it = std::upper_bound(c.t.begin(), c.t.end(), view.t0);
  size_t i = it == c.t.begin() ? 0 : static_cast<size_t>(it - c.t.begin()) - 1;
  const int64_t col = std::max<int64_t>(1, static_cast<int64_t>(view.ns_per_px));
  while (i < n && c.t[i] <= view.t1 + col) {
    int64_t col_end = c.t[i] + col;
    size_t j = static_cast<size_t>(std::lower_bound(c.t.begin() + static_cast<std::ptrdiff_t>(i), c.t.end(), col_end) -
                                   c.t.begin());
    if (j <= i) j = i + 1;
    CounterPoint pt;
    pt.t = c.t[i];
    pt.lo = pt.hi = c.v[i];
    // many samples in one pixel: look at a bounded number of them
    size_t stride = std::max<size_t>(1, (j - i) / 64);
    for (size_t k = i; k < j; k += stride) {
      pt.lo = std::min(pt.lo, c.v[k]);
      pt.hi = std::max(pt.hi, c.v[k]);
    }
    pt.last = c.v[j - 1];
    pt.lo = std::min(pt.lo, pt.last);
    pt.hi = std::max(pt.hi, pt.last);
    out.push_back(pt);
    i = j;
  }
}

}  // namespace ddp
