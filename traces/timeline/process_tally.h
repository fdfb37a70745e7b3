#pragma once
// What a process's spans add up to, counted as they come (TimelineBuilder::add_span): its per-stage totals and where
// its steps are. finish used to take these in a pass over every span, which read tens of millions of spans back from
// memory after the loader had just written them.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "traces/model/stages.h"
#include "traces/timeline/timeline_span.h"

namespace ddp {

struct StepMark {
  int64_t t0 = 0, t1 = 0;
  uint32_t step = 0;
};

struct StageStat {
  uint64_t count = 0;
  int64_t total_ns = 0;
};

// A process gets its steps from its step spans; a trace without them (e.g. Kineto without ProfilerStep) gets each
// step's extent from the spans that carry that step arg.
class ProcessTally {
 public:
  void add(const Span& s, int64_t t1) {
    if (s.has_stage()) {
      StageStat& st = stages_[s.stage];
      ++st.count;
      st.total_ns += t1 - s.t0;
    }
    if (s.step == kNoStep) return;
    if (s.stage == static_cast<uint8_t>(Stage::step)) {
      if (!has_step_spans_) std::vector<StepMark>().swap(derived_);  // step spans decide from here on
      has_step_spans_ = true;
      step_spans_.push_back({s.t0, t1, s.step});
      return;
    }
    if (has_step_spans_ || s.step >= kMaxDerivedStep) return;  // a step arg too large to index
    if (derived_.size() <= s.step) derived_.resize(s.step + 1, kUnseen);
    widen(derived_[s.step], StepMark{s.t0, t1, s.step});
  }
  bool has_step_spans() const { return has_step_spans_; }
  const std::array<StageStat, kStageCount>& stages() const { return stages_; }

  // Every time counted so far moved by `d` (the spans were, or will be).
  void shift(int64_t d) {
    for (StepMark& m : step_spans_) m.t0 += d, m.t1 += d;
    for (StepMark& m : derived_)
      if (seen(m)) m.t0 += d, m.t1 += d;
  }
  // `other`'s spans counted here too (on this one's clock already).
  void join(ProcessTally&& other) {
    for (size_t i = 0; i < stages_.size(); ++i) {
      stages_[i].count += other.stages_[i].count;
      stages_[i].total_ns += other.stages_[i].total_ns;
    }
    if (other.has_step_spans_ && !has_step_spans_) std::vector<StepMark>().swap(derived_);
    has_step_spans_ |= other.has_step_spans_;
    step_spans_.insert(step_spans_.end(), other.step_spans_.begin(), other.step_spans_.end());
    if (!has_step_spans_) {
      if (derived_.size() < other.derived_.size()) derived_.resize(other.derived_.size(), kUnseen);
      for (size_t i = 0; i < other.derived_.size(); ++i)
        if (seen(other.derived_[i])) widen(derived_[i], other.derived_[i]);
    }
    other = ProcessTally{};
  }
  // The steps sorted by start; the tally is empty of steps after.
  std::vector<StepMark> take_steps() {
    std::vector<StepMark> steps = std::move(step_spans_);
    if (!has_step_spans_)
      for (const StepMark& m : derived_)
        if (seen(m)) steps.push_back(m);
    std::vector<StepMark>().swap(derived_);
    std::sort(steps.begin(), steps.end(),
              [](const StepMark& a, const StepMark& b) { return a.t0 < b.t0 || (a.t0 == b.t0 && a.step < b.step); });
    return steps;
  }

 private:
  static constexpr uint32_t kMaxDerivedStep = 1u << 22;
  static constexpr StepMark kUnseen{0, -1, 0};  // a derived step no span carried yet
  static bool seen(const StepMark& m) { return m.t1 >= m.t0; }
  // `m` grown to hold `more` (of the same step), or taken from it when no span carried the step yet.
  static void widen(StepMark& m, const StepMark& more) {
    if (!seen(m)) {
      m = more;
      return;
    }
    m.t0 = std::min(m.t0, more.t0);
    m.t1 = std::max(m.t1, more.t1);
  }
  std::array<StageStat, kStageCount> stages_{};
  bool has_step_spans_ = false;
  std::vector<StepMark> step_spans_;  // the step spans that carry their step number
  std::vector<StepMark> derived_;     // by step number, until a step span is seen (kUnseen: no span carried it)
};

}  // namespace ddp
