#pragma once
// The viewer's data model, without any GL: processes (ranks) -> lanes -> rows of spans sorted by start, plus counter
// series per process. Built from a run folder (native traces, one clock) or from a Chrome trace JSON (ours or
// PyTorch profiler / Kineto). The level-of-detail query keeps a frame cheap at 10 M spans: a binary search finds the
// visible range of each row and runs of spans narrower than a few pixels come back as one merged box.
#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traces/model/event.h"
#include "traces/model/run_folder.h"
#include "traces/model/stages.h"
#include "traces/timeline/process_tally.h"
#include "traces/timeline/span_array.h"
#include "traces/timeline/staged_spans.h"
#include "traces/timeline/timeline_span.h"

struct ZSTD_CCtx_s;

namespace ddp {

// Interned strings: span names are arbitrary in Kineto traces, so spans carry a 32-bit id. Ids 0..kStageCount-1 are
// the stage names, in Stage order.
class StringTable {
 public:
  StringTable();
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  uint32_t intern(std::string_view s);
  std::optional<uint32_t> find(std::string_view s) const;
  std::string_view at(uint32_t id) const { return id < strings_.size() ? std::string_view(strings_[id]) : "?"; }
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // a deque keeps addresses stable, so the index can hold views
  std::unordered_map<std::string_view, uint32_t> index_;
  // The names met lately, by a hash of their ends: a trace repeats a few hundred names millions of times, and this
  // answers most of them with a few compares instead of hashing every byte for the index.
  struct Recent {
    const char* data = nullptr;
    uint64_t head = 0, tail = 0;  // the name's ends (timeline.cpp, name_ends)
    size_t size = 0;
    uint32_t id = 0;
  };
  static constexpr size_t kRecentSlots = 4096;
  std::vector<Recent> recent_;
};

// The spans' other args as text ("External id: 1025\nEv Idx: 0"), shown for one span at a time. In a Kineto trace
// nearly every span has some, about 50 bytes that would otherwise be most of the timeline's memory, so they are kept
// one of two ways, in blocks: zstd-compressed text (decompressing a block takes tens of microseconds), or, for a plain
// JSON file, only the event's place in the file (a byte or two a span, no formatting or compressing while loading),
// the event read again and its args formatted when they are asked for.
class ExtraTexts {
 public:
  uint32_t add(std::string_view text);  // the text's id, 1-based
  // A plain trace file that places point into (its size and time stamp are kept: a file changed since is said so).
  uint32_t add_file(const std::string& path);
  // The args of the event whose text starts at byte `offset` of file `file` (add_file's index); the id.
  uint32_t add_place(uint32_t file, uint64_t offset);
  std::string at(uint32_t id) const;  // "" for 0 or an unknown id; a place that cannot be read says why
  void seal();                        // closes the block being filled (finish() calls it)
  // Takes `other`'s texts after this one's, sealing both first: `other`'s id i becomes i + the returned offset.
  uint32_t append(ExtraTexts&& other);
  size_t size() const { return count_; }
  size_t memory_bytes() const;

 private:
  enum class Kind : uint8_t { texts, raw_texts, places };  // raw_texts: zstd failed, the texts as they are
  struct Block {
    uint32_t first = 1;  // id of its first text
    uint32_t count = 0;
    uint32_t raw_size = 0;
    Kind kind = Kind::texts;
    uint32_t file = 0;   // places: the file (files_ index)
    uint64_t start = 0;  // places: where the block's first gap counts from
    std::string packed;  // texts: a zstd frame of varint lengths and bytes; places: varint gaps between offsets
  };
  struct SourceFile {
    std::string path;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
  };
  // Whether the block being filled takes one more entry of `kind` (same kind and file, places in file order, room).
  bool open_block_takes(Kind kind, uint32_t file, uint64_t start) const;
  void open_block(Kind kind, uint32_t file, uint64_t start);  // seals the open block unless it takes the entry
  std::string_view open_bytes() const;                        // the open block's, of either kind
  std::string text_at(const Block& b, uint32_t id) const;
  std::string place_at(const Block& b, uint32_t id) const;

  std::vector<Block> blocks_;
  std::vector<SourceFile> files_;
  std::string open_;  // the block being filled, uncompressed, of texts
  // The block being filled, of places: room for a whole block made once and written a byte at a time (a place is
  // written per span: a string's append checked its room and called memcpy for a byte or two each time).
  std::unique_ptr<char[]> places_;
  size_t places_size_ = 0;
  uint32_t open_count_ = 0;
  Kind open_kind_ = Kind::texts;
  uint32_t open_file_ = 0;
  uint64_t open_start_ = 0, open_end_ = 0;  // places: the open block's start and its last event's offset
  uint32_t count_ = 0;
  // Reused for every block: a compression context (a fresh one per block set up its tables each time) and the
  // buffer it compresses into (sized once, never zero-filled); each block then keeps an exact-size copy.
  struct FreeContext {
    void operator()(ZSTD_CCtx_s* c) const;
  };
  std::unique_ptr<ZSTD_CCtx_s, FreeContext> context_;
  std::unique_ptr<char[]> scratch_;
  size_t scratch_size_ = 0;
};

// Spans of one lane that do not overlap (nesting depth d of the lane), sorted by t0.
struct Row {
  SpanArray spans;
  int64_t max_dur = 0;  // the longest span: lets a binary search on t0 find every span overlapping a time
};

struct Lane {
  std::string name;
  std::string key;  // tid as text (lane id for run folders)
  int64_t sort = 0;
  std::vector<Row> rows;  // row d = nesting depth d
  uint64_t span_count = 0;
};

struct CounterSeries {
  std::string name;
  std::vector<int64_t> t;  // ns, sorted
  std::vector<double> v;
  double vmin = 0, vmax = 0;
  bool bytes = false;  // values are byte counts (name ends with "_bytes" or is a Kineto memory counter)
};

struct Process {
  std::string name;
  std::string key;  // pid as text
  int rank = -1;    // known for our own traces
  int64_t sort = 0;
  std::vector<Lane> lanes;
  std::vector<CounterSeries> counters;
  std::vector<StepMark> steps;  // sorted by t0
  std::array<StageStat, kStageCount> stages{};
  uint64_t span_count = 0;
};

struct Timeline {
  std::string source;    // the path it was loaded from
  std::string run_dir;   // the run folder, when loaded from one
  std::string producer;  // "ddp_profile", "kineto" or ""
  StringTable names;
  ExtraTexts extras;
  std::vector<SpanDetail> details;    // Span::detail with kDetailBit set indexes these; without it, an ExtraTexts id
  std::vector<SpanCpuSplit> cpu;      // Span::detail with kCpuTag indexes these (the spans that carry a CPU split)
  std::vector<uint32_t> name_colors;  // per name id (stage colour or a hashed colour)
  std::vector<Process> processes;     // sorted for display
  int64_t t_begin = 0, t_end = 0;     // over all spans and counter samples
  int64_t origin_ns = 0;              // the source's time of t = 0
  uint64_t span_count = 0;
  uint64_t counter_samples = 0;
  std::vector<std::string> problems;  // damage and oddities found while loading, one line each

  uint32_t color(const Span& s) const {
    if (s.has_stage()) return stage_color(static_cast<Stage>(s.stage));
    return s.name < name_colors.size() ? name_colors[s.name] : 0xFFA0A0A0;
  }
  std::string_view name(const Span& s) const { return names.at(s.name); }
  // Span::detail: kDetailBit and an index into `details` (fewer than 2^30: 24 GB of them), kCpuTag (both top bits)
  // and an index into `cpu`, or else an ExtraTexts id (0 = none).
  static constexpr uint32_t kDetailBit = 0x80000000u;
  static constexpr uint32_t kCpuTag = 0xC0000000u;
  static constexpr uint32_t kTagMask = 0xC0000000u;
  const SpanCpuSplit* cpu_split(const Span& s) const {
    const uint32_t i = s.detail & ~kTagMask;
    return (s.detail & kTagMask) == kCpuTag && i < cpu.size() ? &cpu[i] : nullptr;
  }
  // The span's detail field without its CPU split: a details index with kDetailBit, or a text id.
  uint32_t own_detail(const Span& s) const {
    if ((s.detail & kTagMask) != kCpuTag) return s.detail;
    const SpanCpuSplit* c = cpu_split(s);
    return c ? c->detail : 0;
  }
  const SpanDetail* detail(const Span& s) const {
    const uint32_t d = own_detail(s);
    const uint32_t i = d & ~kDetailBit;
    return (d & kDetailBit) && i < details.size() ? &details[i] : nullptr;
  }
  uint64_t bytes(const Span& s) const {
    const SpanDetail* d = detail(s);
    return d ? d->bytes : 0;
  }
  uint16_t bucket(const Span& s) const {
    const SpanDetail* d = detail(s);
    return d ? d->bucket : kNoBucket;
  }
  uint16_t epoch(const Span& s) const {
    const SpanDetail* d = detail(s);
    return d ? d->epoch : 0;
  }
  uint8_t micro(const Span& s) const {
    const SpanDetail* d = detail(s);
    return d ? d->micro : 0;
  }
  std::string extra(const Span& s) const {
    const SpanDetail* d = detail(s);
    const uint32_t own = own_detail(s);
    return extras.at(d ? d->text : (own & kDetailBit) ? 0 : own);
  }
  // Steps known in any process: the union of their ranges. False when the step is not in the trace.
  bool step_range(uint32_t step, int64_t& t0, int64_t& t1) const;
};

// Accumulates spans and counters, then sorts them into rows. Used by both loaders; public for tests and benchmarks.
class TimelineBuilder {
 public:
  TimelineBuilder();
  int process(std::string_view key);            // finds or adds
  int lane(int process, std::string_view key);  // finds or adds
  void set_process_name(int p, std::string_view name) { procs_[p].name = name; }
  void set_process_labels(int p, std::string_view labels) { labels_[p] = labels; }
  void set_process_sort(int p, int64_t sort) { procs_[p].sort = sort; }
  void set_process_rank(int p, int rank) { procs_[p].rank = rank; }
  void set_lane_name(int p, int l, std::string_view name) { procs_[p].lanes[l].name = name; }
  void set_lane_sort(int p, int l, int64_t sort) { procs_[p].lanes[l].sort = sort; }
  uint32_t intern(std::string_view s) { return tl_.names.intern(s); }
  // A Span::detail for these (0 when there is nothing: no bytes, no bucket, no text).
  // text_id: an ExtraTexts id or 0. A detail record only when there is more than a text.
  uint32_t add_detail(uint64_t bytes, uint16_t bucket, uint32_t text_id, uint16_t epoch = 0, uint8_t micro = 0);
  // The Span::detail of a span whose detail was `detail` (add_detail's) and that carries this CPU split.
  uint32_t add_cpu_split(uint32_t detail, uint32_t cpu_us, uint32_t wait_us) {
    tl_.cpu.push_back(SpanCpuSplit{cpu_us, wait_us, detail});
    return Timeline::kCpuTag | static_cast<uint32_t>(tl_.cpu.size() - 1);
  }
  void reserve_cpu_splits(size_t more) { tl_.cpu.reserve(tl_.cpu.size() + more); }
  ExtraTexts& extras() { return tl_.extras; }
  void add_span(int p, int l, const Span& s) {
    if (!remaps_.empty()) apply_remaps();  // spans absorbed before wait for theirs: they go first
    const int64_t t1 = s.t1();
    staged_[p][l].add(s, t1);
    tallies_[p].add(s, t1);  // counted as they come, as is the range: finish takes no pass of its own for them
    span_lo_ = std::min(span_lo_, s.t0);
    span_hi_ = std::max(span_hi_, t1);
  }
  void add_counter(int p, std::string_view name, int64_t t, double v);
  void problem(std::string line) { tl_.problems.push_back(std::move(line)); }
  Timeline& timeline() { return tl_; }
  // Takes every process of `other` (built from another file, on another thread) with its spans, counters, names
  // and texts, every time moved by `shift_ns` (that file's clock onto this one's). A process whose key this builder
  // has already gets the other's spans and counters too (one rank's profiling cycles, one file each).
  void absorb(TimelineBuilder&& other, int64_t shift_ns = 0);
  // absorb of each (builder, shift) in order. Their spans are remapped at finish, in the pass that moves every span
  // to time zero (a lane joined to spans it already has is remapped now).
  void absorb_all(const std::vector<std::pair<TimelineBuilder*, int64_t>>& others);
  // Makes every process so far one file's among several (per-rank Kineto traces): keys and names get the prefixes
  // (two ranks' "pid 0" stay two processes), each process the rank, and the sort order sort_base + its own sort
  // index clamped to [0, sort_range), so that a file's processes stay together; problem lines get the name prefix.
  void scope_processes(const std::string& key_prefix, const std::string& name_prefix, int rank, int64_t sort_base,
                       int64_t sort_range);
  // Sorts, assigns nesting rows, computes steps/statistics/colours and moves time zero to the earliest event.
  Timeline finish();

 private:
  // An absorbed builder's clock and ids onto this one's, for its spans.
  struct SpanRemap {
    int64_t shift = 0;
    std::vector<uint32_t> name_of;
    uint32_t text_offset = 0, detail_offset = 0, cpu_offset = 0;
    // A detail field (a split's inner one too) onto this builder's tables.
    uint32_t detail(uint32_t d) const {
      if ((d & Timeline::kTagMask) == Timeline::kCpuTag)
        return Timeline::kCpuTag | ((d & ~Timeline::kTagMask) + cpu_offset);
      if (d & Timeline::kDetailBit) return Timeline::kDetailBit | ((d & ~Timeline::kDetailBit) + detail_offset);
      return d ? d + text_offset : 0;
    }
    void operator()(Span& s) const {
      s.t0 += shift;
      s.name = name_of[s.name];
      s.detail = detail(s.detail);
    }
  };
  static constexpr int kNoRemap = -1;
  void apply_remap(size_t p, size_t l);  // lane l of process p remapped now, if its spans wait for a remap
  void apply_remaps();                   // every lane's
  void finish_processes(int64_t shift);
  void finish_process(size_t p, int64_t shift);  // rows, steps, totals and counters of process p (its own data only)

  Timeline tl_;
  std::vector<Process> procs_;
  std::vector<std::string> labels_;
  std::vector<std::vector<LaneStaging>> staged_;  // [process][lane]
  std::vector<ProcessTally> tallies_;             // [process]
  std::vector<SpanRemap> remaps_;                 // of the builders absorbed
  std::vector<std::vector<int>> remap_of_;        // [process][lane]: the remaps_ index its spans wait for, or kNoRemap
  int64_t span_lo_ = std::numeric_limits<int64_t>::max(), span_hi_ = std::numeric_limits<int64_t>::min();
  std::unordered_map<std::string, int> proc_index_;
  std::vector<std::unordered_map<std::string, int>> lane_index_;
  std::vector<std::unordered_map<std::string, int>> counter_index_;
};

// Builds the model of a loaded run: every rank on rank 0's clock (RankTrace::clock_offset_ns), time zero at the run's
// first event (RunTrace::origin_ns), as the Chrome export does.
Timeline timeline_from_run(const RunTrace& run);

// Reads a Chrome trace (ours or Kineto; .json or .json.gz). False with `error` set when the file cannot be used.
bool timeline_from_chrome_file(const std::string& path, Timeline& out, std::string& error);
bool timeline_from_chrome_text(std::string_view json, Timeline& out, std::string& error);

// Per-rank PyTorch profiler traces loaded by load_kineto_run (traces/kineto/kineto_import.h) as one timeline: every
// event of every rank's file (not only the stages the analysis reads) on the measured common clock, each rank's
// processes together ("rank 1 · python3", "rank 1 · GPU 0"), led by a "rank R · stages (ddp_profile)" process with the
// stage spans the analysis saw (the derived wait_comm and wait_data included). Time zero is the earliest event,
// origin_ns says where that is on the run's clock. False with `error` set when a file cannot be re-read.
bool timeline_from_kineto_run(const RunTrace& run, Timeline& out, std::string& error);

// torch Flight Recorder dumps (a folder of them, or the files; traces/flight_recorder) as per-rank collective
// timelines.
bool timeline_from_fr_dumps(const std::vector<std::string>& inputs, Timeline& out, std::string& error);

// A run folder, a folder of Flight Recorder dumps, or a Chrome trace file.
bool load_timeline(const std::string& path, Timeline& out, std::string& error);

// The stage a Chrome event maps to: our vocabulary by name, Kineto GPU categories (kernel, gpu_memcpy, gpu_memset,
// NCCL kernels) and "ProfilerStep#N" (the step). kNoStage otherwise.
uint8_t stage_for_chrome_event(std::string_view name, std::string_view cat);

// A stable colour for a name outside the vocabulary (0xAABBGGRR).
uint32_t name_color(std::string_view name);

// ---- level of detail ----
struct LodView {
  int64_t t0 = 0, t1 = 0;  // visible time range (ns)
  double ns_per_px = 1;    // zoom
  double min_px = 2;       // spans narrower than this merge with their neighbours
};

// One box to draw: a single span (count == 1, `first` is its index in the row) or `count` merged spans starting at
// `first` that cover [t0, t1].
struct DrawBox {
  int64_t t0 = 0, t1 = 0;
  uint32_t first = 0;
  uint32_t count = 1;
  bool merged() const { return count > 1; }
};

// Index of the first span in `row` that may overlap time t (binary search).
size_t first_visible(const Row& row, int64_t t);
// Appends the boxes of `row` visible in `view`. Costs O(boxes * log n), not O(visible spans).
void query_row(const Row& row, const LodView& view, std::vector<DrawBox>& out);

// Per-pixel-column aggregates of a counter series in the visible range (plus the sample before it).
struct CounterPoint {
  int64_t t = 0;
  double lo = 0, hi = 0, last = 0;
};
void query_counter(const CounterSeries& c, const LodView& view, std::vector<CounterPoint>& out);

// Statistics of every span with one name (what a click on a span shows).
struct SpanStats {
  uint64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0;
  double mean_ns = 0, p50_ns = 0, p90_ns = 0, p99_ns = 0;
  uint64_t bytes = 0;
};
// process < 0: all processes.
SpanStats span_stats(const Timeline& tl, uint32_t name, int process = -1);

// "1.234 ms", "850 ns", "2.50 s".
std::string format_duration(int64_t ns);
std::string format_bytes(double bytes);

}  // namespace ddp
