#pragma once
// The pieces the timeline loaders share (timeline_from_run.cpp, timeline_from_chrome.cpp,
// timeline_from_kineto.cpp): a Chrome trace's events streamed into a TimelineBuilder, and one of our RankTraces added
// as a process. Internal to traces/timeline_from_*.cpp.
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traces/chrome/chrome_reader.h"
#include "traces/timeline/timeline.h"

namespace ddp::timeline_detail {

// A Chrome trace's events into `b`, one callback at a time (the reader's ChromeEventFn), on the file's own clock and
// process keys (per-rank files are scoped and shifted as their builders join: TimelineBuilder::scope_processes,
// absorb). Call close() at the end.
class ChromeToTimeline {
 public:
  explicit ChromeToTimeline(TimelineBuilder& b) : b_(b) {}

  // The events come from this plain JSON file (not gzip: their offsets are the file's): a span keeps its event's
  // place there instead of its args text, read again when shown (ExtraTexts::add_place).
  // Only where the file can be read again at an offset (args_can_be_read_again).
  void args_in_file(const std::string& path) { args_file_ = b_.extras().add_file(path); }

  bool operator()(const ChromeEventView& e);
  // Closes "B" spans left open at `end_ns` and notes unmatched "B"/"E" events as problems.
  void close(int64_t end_ns);
  int64_t last_ts() const { return last_ts_; }  // the file's clock

 private:
  struct Open {
    int p = 0, l = 0;
    Span span;
  };
  static uint64_t key(int p, int l) { return (static_cast<uint64_t>(p) << 32) | static_cast<uint32_t>(l); }

  int proc(const ChromeEventView& e);
  std::pair<int, int> where(const ChromeEventView& e);
  Span make_span(const ChromeEventView& e, int64_t t0, int64_t t1);
  uint8_t stage_of(uint32_t name, const ChromeEventView& e);  // stage_for_chrome_event, looked up once per name
  void span(const ChromeEventView& e, int64_t t0, int64_t t1);
  void metadata(const ChromeEventView& e);

  TimelineBuilder& b_;
  std::unordered_map<uint64_t, std::vector<Open>> open_;
  std::string last_pid_;
  // A pid or tid of at most 8 bytes of text (Kineto's are a few digits) as one number, exactly: nearly every event's
  // lane is then found with two compares instead of a loop over each key's bytes.
  struct ShortKey {
    static constexpr uint32_t kLong = UINT32_MAX;  // over 8 bytes: compared as text
    uint64_t bits = 0;
    uint32_t size = kLong;
    bool operator==(const ShortKey& o) const { return bits == o.bits && size == o.size; }
  };
  static ShortKey short_key(std::string_view k);
  struct RecentLane {
    std::string pid, tid;
    ShortKey pid_key, tid_key;
    int p = -1, l = -1;
  };
  std::array<RecentLane, 8> recent_lanes_;
  size_t next_recent_lane_ = 0;
  size_t last_recent_lane_ = 0;  // where the last event's lane was found
  std::string extra_;            // make_span's args text, one buffer for every span
  static constexpr uint32_t kNoFile = UINT32_MAX;
  static constexpr uint8_t kNotLookedUp = 0xFE;        // not a Stage, not kNoStage
  std::array<std::vector<uint8_t>, 4> stage_by_name_;  // [category class][name id]: other, kernel, memcpy, memset
  uint32_t args_file_ = kNoFile;
  int last_proc_ = -1;
  uint64_t unmatched_end_ = 0;
  // The process and lane key of instant events of global scope ("s": "g"): they belong to no thread or process.
  static constexpr std::string_view kGlobalProcess = "global";
  int64_t last_ts_ = std::numeric_limits<int64_t>::min();
};

// A regular file of plain JSON: its events' args can be read again at their offsets (not gzip, whose offsets are in
// the inflated text; not a pipe, read once).
bool args_can_be_read_again(const std::string& path);

// The args of `e` a span shows, as "key: value" lines (what the span's own fields do not already hold: step, epoch,
// micro, bucket, bytes), appended to `out`. True when there was any.
bool append_shown_args(const ChromeEventView& e, std::string& out);

// Adds rank `r`'s events as one process (named as the Chrome export names it), on the run's clock with time zero at
// `origin_ns`. Returns the process.
int add_rank_to_timeline(TimelineBuilder& b, const RankTrace& r, int64_t origin_ns);

}  // namespace ddp::timeline_detail
