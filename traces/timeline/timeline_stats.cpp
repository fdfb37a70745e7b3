// Statistics of the spans of one name (what a click on a span shows), and the text the views print them with.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "traces/timeline/timeline.h"

namespace ddp {

SpanStats span_stats(const Timeline& tl, uint32_t name, int process) {
  SpanStats st;
  std::vector<int64_t> d;
  for (size_t p = 0; p < tl.processes.size(); ++p) {
    if (process >= 0 && static_cast<size_t>(process) != p) continue;
    for (const Lane& l : tl.processes[p].lanes)
      for (const Row& r : l.rows)
        for (const Span& s : r.spans)
          if (s.name == name) {
            d.push_back(s.duration());
            st.bytes += tl.bytes(s);
          }
  }
  st.count = d.size();
  if (d.empty()) return st;
  std::sort(d.begin(), d.end());
  for (int64_t x : d) st.total_ns += x;
  st.min_ns = d.front();
  st.max_ns = d.back();
  st.mean_ns = static_cast<double>(st.total_ns) / static_cast<double>(d.size());
  auto pct = [&](double q) {
    return static_cast<double>(d[std::min(d.size() - 1, static_cast<size_t>(q * d.size()))]);
  };
  st.p50_ns = pct(0.50);
  st.p90_ns = pct(0.90);
  st.p99_ns = pct(0.99);
  return st;
}

std::string format_duration(int64_t ns) {
  char buf[48];
  double a = std::fabs(static_cast<double>(ns));
  if (a < 1e3)
    std::snprintf(buf, sizeof(buf), "%lld ns", static_cast<long long>(ns));
  else if (a < 1e6)
    std::snprintf(buf, sizeof(buf), "%.3f us", static_cast<double>(ns) / 1e3);
  else if (a < 1e9)
    std::snprintf(buf, sizeof(buf), "%.3f ms", static_cast<double>(ns) / 1e6);
  else
    std::snprintf(buf, sizeof(buf), "%.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

std::string format_bytes(double b) {
  char buf[48];
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof(buf), u ? "%.2f %s" : "%.0f %s", b, unit[u]);
  return buf;
}

}  // namespace ddp
