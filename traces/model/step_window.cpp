#include "traces/model/step_window.h"

#include <algorithm>
#include <charconv>

namespace ddp {
namespace {

bool parse_step(std::string_view s, uint32_t& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

bool parse_step_window(std::string_view text, StepWindow& out, std::string& error) {
  const size_t dash = text.find('-');
  StepWindow w;
  const bool ok = dash == std::string_view::npos
                      ? parse_step(text, w.first) && (w.last = w.first, true)
                      : parse_step(text.substr(0, dash), w.first) && parse_step(text.substr(dash + 1), w.last);
  if (!ok || w.first > w.last) {
    error = "--steps " + std::string(text) + ": give A-B (steps A to B, A <= B) or A (one step), e.g. --steps 10-19";
    return false;
  }
  out = w;
  return true;
}

StepWindow steps_within(uint32_t first, uint32_t last, uint64_t bytes, uint64_t limit) {
  const uint64_t steps = uint64_t{last} - first + 1;
  const long double per_step = static_cast<long double>(bytes) / static_cast<long double>(steps);
  const uint64_t fit = per_step <= 0 ? steps : static_cast<uint64_t>(0.9L * static_cast<long double>(limit) / per_step);
  return {first, static_cast<uint32_t>(first + std::clamp<uint64_t>(fit, 1, steps) - 1)};
}

bool step_range(const RunTrace& run, uint32_t& first, uint32_t& last) {
  bool any = false;
  for (const RankTrace& r : run.ranks)
    for (const Event& e : r.events)
      if (e.is_span() && e.stage_id() == Stage::step) {
        first = any ? std::min(first, e.step) : e.step;
        last = any ? std::max(last, e.step) : e.step;
        any = true;
      }
  return any;
}

bool keep_steps(RunTrace& run, const StepWindow& window, std::string& error) {
  if (window.everything()) return true;
  uint32_t first = 0, last = 0;
  const bool has_steps = step_range(run, first, last);
  if (!has_steps || window.last < first || window.first > last) {
    error = "--steps " + std::to_string(window.first) + "-" + std::to_string(window.last) + ": " +
            (has_steps ? "the traces hold steps " + std::to_string(first) + "-" + std::to_string(last)
                       : std::string("the traces hold no steps"));
    return false;
  }
  for (RankTrace& r : run.ranks) {
    int64_t t0 = std::numeric_limits<int64_t>::max(), t1 = std::numeric_limits<int64_t>::min();
    for (const Event& e : r.events)
      if (e.is_span() && window.holds(e.step)) t0 = std::min(t0, e.t0), t1 = std::max(t1, e.t1);
    // Counters have no step: a sample belongs to the window when it falls in the time its spans cover.
    auto outside = [&](const Event& e) { return e.is_span() ? !window.holds(e.step) : e.t0 < t0 || e.t0 > t1; };
    r.events.erase(std::remove_if(r.events.begin(), r.events.end(), outside), r.events.end());
  }
  const uint32_t kept_first = std::max(first, window.first), kept_last = std::min(last, window.last);
  run.step_window = KeptSteps{kept_first, kept_last};
  return true;
}

}  // namespace ddp
