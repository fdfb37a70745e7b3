// The viewer's data model: rows, level of detail, counters, statistics.
#include <gtest/gtest.h>

#include <random>

#include "traces/model/run_folder.h"
#include "traces/timeline/timeline.h"

using namespace ddp;

namespace {

Span mk(int64_t t0, int64_t t1, uint8_t stage = static_cast<uint8_t>(Stage::kernel)) {
  Span s;
  s.t0 = t0;
  s.set_t1(t1);
  s.stage = stage;
  s.name = stage;
  return s;
}

Row make_row(std::vector<Span> spans) {
  Row r;
  r.spans = std::move(spans);
  for (const Span& s : r.spans) r.max_dur = std::max(r.max_dur, s.duration());
  return r;
}

// Every box's index range is disjoint from and after the previous one; together they cover every span that overlaps
// the view.
void check_cover(const Row& row, const LodView& v, const std::vector<DrawBox>& boxes) {
  size_t next = 0;
  std::vector<bool> covered(row.spans.size(), false);
  for (const DrawBox& b : boxes) {
    ASSERT_GE(b.first, next);
    ASSERT_GE(b.count, 1u);
    next = b.first + b.count;
    ASSERT_LE(next, row.spans.size());
    for (size_t i = b.first; i < next; ++i) {
      covered[i] = true;
      ASSERT_GE(row.spans[i].t0, b.t0);
      ASSERT_LE(row.spans[i].t1(), b.t1);
    }
    if (b.count == 1) {
      ASSERT_EQ(b.t0, row.spans[b.first].t0);
      ASSERT_EQ(b.t1, row.spans[b.first].t1());
    }
  }
  for (size_t i = 0; i < row.spans.size(); ++i) {
    bool visible = row.spans[i].t1() >= v.t0 && row.spans[i].t0 <= v.t1;
    if (visible) {
      ASSERT_TRUE(covered[i]) << "visible span " << i << " not drawn";
    }
  }
}

}  // namespace

TEST(TimelineLod, ZoomedInDrawsEverySpanOfTheVisibleRangeOnly) {
  std::vector<Span> spans;
  for (int i = 0; i < 1000; ++i) spans.push_back(mk(i * 100, i * 100 + 60));
  Row row = make_row(spans);
  LodView v{10'000, 20'000, 1.0, 2.0};  // 1 ns per pixel: a 60 ns span is 60 px wide
  std::vector<DrawBox> boxes;
  query_row(row, v, boxes);
  ASSERT_EQ(boxes.size(), 101u);  // spans 100..200 (span 200 starts exactly at the view's end)
  EXPECT_EQ(boxes.front().first, 100u);
  EXPECT_EQ(boxes.back().first, 200u);
  for (const auto& b : boxes) EXPECT_FALSE(b.merged());
  check_cover(row, v, boxes);
  EXPECT_EQ(first_visible(row, 10'000), 100u);
}

TEST(TimelineLod, ZoomedOutMergesSmallSpans) {
  std::vector<Span> spans;
  for (int i = 0; i < 100'000; ++i) spans.push_back(mk(i * 100, i * 100 + 60));
  Row row = make_row(spans);
  LodView v{0, 10'000'000, 10'000'000 / 1000.0, 2.0};  // 1000 px for 10 ms: every span is far below 1 px
  std::vector<DrawBox> boxes;
  query_row(row, v, boxes);
  ASSERT_EQ(boxes.size(), 1u);  // gaps of 40 ns < 2 px: one merged run
  EXPECT_EQ(boxes[0].count, 100'000u);
  EXPECT_EQ(boxes[0].t0, 0);
  EXPECT_EQ(boxes[0].t1, 99'999 * 100 + 60);
  check_cover(row, v, boxes);
}

TEST(TimelineLod, GapsWiderThanTheThresholdSplitRunsAndWideSpansStayAlone) {
  std::vector<Span> spans;
  // clusters of 10 tiny spans, separated by gaps of 1000 ns, and one wide span after cluster 5
  int64_t t = 0;
  for (int c = 0; c < 10; ++c) {
    for (int i = 0; i < 10; ++i, t += 10) spans.push_back(mk(t, t + 5));
    if (c == 5) {
      spans.push_back(mk(t, t + 5000, static_cast<uint8_t>(Stage::forward)));
      t += 5000;
    }
    t += 1000;
  }
  Row row = make_row(spans);
  LodView v{0, t, 50.0, 2.0};  // threshold 100 ns: clusters merge, the gaps (1000 ns) split them
  std::vector<DrawBox> boxes;
  query_row(row, v, boxes);
  check_cover(row, v, boxes);
  size_t merged = 0, single = 0;
  for (const auto& b : boxes) (b.merged() ? merged : single) += 1;
  EXPECT_EQ(merged, 10u);
  EXPECT_EQ(single, 1u);
  bool wide_alone = false;
  for (const auto& b : boxes)
    if (!b.merged() && row.spans[b.first].stage == static_cast<uint8_t>(Stage::forward)) wide_alone = true;
  EXPECT_TRUE(wide_alone);
}

TEST(TimelineLod, RandomRowsAreCoveredWithBoundedBoxes) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<Span> spans;
    int64_t t = 0;
    int n = 1 + static_cast<int>(rng() % 3000);
    for (int i = 0; i < n; ++i) {
      t += static_cast<int64_t>(rng() % 500);
      int64_t d = (rng() % 10 == 0) ? static_cast<int64_t>(rng() % 20000) : static_cast<int64_t>(rng() % 50);
      spans.push_back(mk(t, t + d));
      t += d;
    }
    Row row = make_row(spans);
    int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(t + 1));
    int64_t b = a + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(t + 1));
    double width_px = 200 + static_cast<double>(rng() % 2000);
    LodView v{a, b, static_cast<double>(b - a) / width_px, 2.0};
    std::vector<DrawBox> boxes;
    query_row(row, v, boxes);
    check_cover(row, v, boxes);
    // a merged box is at least ~min_px wide apart from the next: boxes are bounded by the pixel count (plus the
    // wide spans, each of which is >= min_px wide)
    ASSERT_LE(boxes.size(), static_cast<size_t>(2 * width_px / v.min_px) + 4) << iter;
  }
}

TEST(Timeline, BuilderAssignsRowsStepsAndStats) {
  TimelineBuilder b;
  int p = b.process("0");
  int l = b.lane(p, "0");
  b.set_lane_name(p, l, "main");
  for (uint32_t step = 0; step < 4; ++step) {
    int64_t t = 1'000'000 + step * 1000;
    Span st = mk(t, t + 900, static_cast<uint8_t>(Stage::step));
    st.step = step;
    Span f = mk(t + 100, t + 400, static_cast<uint8_t>(Stage::forward));
    f.step = step;
    Span k = mk(t + 150, t + 160 + step * 10);  // nested twice
    b.add_span(p, l, f);
    b.add_span(p, l, k);
    b.add_span(p, l, st);
  }
  b.add_counter(p, "host_rss_bytes", 1'000'500, 10);
  b.add_counter(p, "host_rss_bytes", 1'000'000, 5);
  Timeline tl = b.finish();
  EXPECT_EQ(tl.origin_ns, 1'000'000);
  EXPECT_EQ(tl.t_begin, 0);
  EXPECT_EQ(tl.t_end, 3900);
  ASSERT_EQ(tl.processes.size(), 1u);
  const Process& pr = tl.processes[0];
  ASSERT_EQ(pr.lanes[0].rows.size(), 3u);
  EXPECT_EQ(pr.lanes[0].rows[0].spans.size(), 4u);
  EXPECT_EQ(pr.lanes[0].rows[0].spans[0].stage, static_cast<uint8_t>(Stage::step));
  EXPECT_EQ(pr.lanes[0].rows[1].spans[0].stage, static_cast<uint8_t>(Stage::forward));
  EXPECT_EQ(pr.lanes[0].rows[2].max_dur, 40);
  ASSERT_EQ(pr.steps.size(), 4u);
  EXPECT_EQ(pr.steps[2].t0, 2000);
  int64_t a = 0, z = 0;
  ASSERT_TRUE(tl.step_range(3, a, z));
  EXPECT_EQ(a, 3000);
  EXPECT_EQ(z, 3900);
  EXPECT_FALSE(tl.step_range(9, a, z));
  EXPECT_EQ(pr.stages[static_cast<int>(Stage::forward)].count, 4u);
  EXPECT_EQ(pr.stages[static_cast<int>(Stage::forward)].total_ns, 1200);
  ASSERT_EQ(pr.counters.size(), 1u);
  EXPECT_TRUE(pr.counters[0].bytes);
  EXPECT_EQ(pr.counters[0].t[0], 0);  // sorted
  EXPECT_EQ(pr.counters[0].vmax, 10);

  SpanStats s = span_stats(tl, static_cast<uint32_t>(Stage::kernel));
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.min_ns, 10);
  EXPECT_EQ(s.max_ns, 40);
  EXPECT_DOUBLE_EQ(s.mean_ns, 25.0);
  EXPECT_EQ(tl.color(pr.lanes[0].rows[1].spans[0]), stage_color(Stage::forward));
}

TEST(Timeline, CounterQueryAggregatesPerPixel) {
  CounterSeries c;
  for (int i = 0; i < 100'000; ++i) {
    c.t.push_back(i * 10);
    c.v.push_back(i % 100);
  }
  LodView v{0, 1'000'000, 1000.0, 2.0};  // 1000 px, 100 samples per pixel
  std::vector<CounterPoint> pts;
  query_counter(c, v, pts);
  EXPECT_GE(pts.size(), 990u);
  EXPECT_LE(pts.size(), 1002u);
  EXPECT_EQ(pts[10].hi, 99);
  EXPECT_EQ(pts[10].lo, 0);
}

TEST(Timeline, NameColoursAreStableAndOpaque) {
  EXPECT_EQ(name_color("aten::mm"), name_color("aten::mm"));
  EXPECT_NE(name_color("aten::mm"), name_color("aten::add"));
  EXPECT_EQ(name_color("x") >> 24, 0xFFu);
  EXPECT_EQ(format_duration(1500), "1.500 us");
  EXPECT_EQ(format_duration(2'500'000), "2.500 ms");
  EXPECT_EQ(format_bytes(2048), "2.00 KiB");
  EXPECT_EQ(stage_for_chrome_event("ncclKernel_AllReduce_RING", "kernel"), static_cast<uint8_t>(Stage::nccl));
  EXPECT_EQ(stage_for_chrome_event("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy"),
            static_cast<uint8_t>(Stage::memcpy_h2d));
  EXPECT_EQ(stage_for_chrome_event("aten::mm", "cpu_op"), kNoStage);
}

// A rank with a GPU stream lane (named kernels, one unnamed) and a comm lane with a bucketed allreduce, built in
// memory as the profiler writes it: CUDA events carry their interned name id in Event::bucket and their correlation
// id in Event::item.
TEST(Timeline, CudaSpansFromARunAreNamedByTheirKernelNotShownAsBuckets) {
  RankTrace r;
  r.rank = 0;
  r.world = 1;
  r.lanes = {"comm", "gpu0/stream7"};
  r.meta["gpu_name/1"] = "void gemm<float>(float const*)";
  r.meta["gpu_name/4"] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  auto gpu = [](Stage s, int64_t t0, int64_t t1, uint32_t correlation, uint16_t name_id) {
    Event e = make_span(s, 1, t0, t1);
    e.item = correlation;
    e.bucket = name_id;
    return e;
  };
  Event allreduce = make_span(Stage::allreduce, 0, 1'000, 5'000);
  allreduce.bucket = 3;
  r.events = {allreduce, gpu(Stage::kernel, 10'000, 20'000, 11, 1), gpu(Stage::nccl, 20'000, 30'000, 12, 4),
              gpu(Stage::kernel, 30'000, 31'000, 13, kNoName), gpu(Stage::kernel, 40'000, 45'000, 14, 1)};
  RunTrace run;
  run.ranks.push_back(r);

  Timeline tl = timeline_from_run(run);
  ASSERT_EQ(tl.processes.size(), 1u);
  const Process& p = tl.processes[0];
  ASSERT_EQ(p.lanes.size(), 2u);
  ASSERT_EQ(p.lanes[1].name, "gpu0/stream7");
  ASSERT_EQ(p.lanes[1].rows.size(), 1u);
  const SpanArray& k = p.lanes[1].rows[0].spans;
  ASSERT_EQ(k.size(), 4u);
  EXPECT_EQ(tl.name(k[0]), "void gemm<float>(float const*)");
  EXPECT_EQ(tl.name(k[1]), "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(tl.name(k[2]), "kernel") << "an unnamed CUDA event falls back to its stage's name";
  EXPECT_EQ(k[0].name, k[3].name) << "one interned name per kernel";
  for (const Span& s : k) EXPECT_EQ(tl.bucket(s), kNoBucket) << tl.name(s) << ": a name id is not a bucket";
  EXPECT_EQ(k[0].stage, static_cast<uint8_t>(Stage::kernel));
  EXPECT_EQ(k[1].stage, static_cast<uint8_t>(Stage::nccl));
  EXPECT_EQ(tl.color(k[0]), stage_color(Stage::kernel));
  EXPECT_EQ(p.stages[static_cast<size_t>(Stage::kernel)].count, 3u);

  // Other spans keep their bucket; a click on a kernel counts that kernel only.
  ASSERT_EQ(p.lanes[0].rows.size(), 1u);
  EXPECT_EQ(tl.bucket(p.lanes[0].rows[0].spans[0]), 3);
  SpanStats gemm = span_stats(tl, k[0].name);
  EXPECT_EQ(gemm.count, 2u);
  EXPECT_EQ(gemm.total_ns, 15'000);
}

// Args texts are kept compressed in blocks: every id finds its own text, in sealed blocks and in the open one.
TEST(Timeline, ExtraTextsFindEveryTextAcrossBlocks) {
  ExtraTexts x;
  std::vector<std::string> texts;
  for (int i = 0; i < 20000; ++i) {
    texts.push_back("External id: " + std::to_string(i) +
                    "\nEv Idx: " + std::string(static_cast<size_t>(i % 300), 'x'));
    ASSERT_EQ(x.add(texts.back()), static_cast<uint32_t>(i + 1));
    if (i == 15000) x.seal();  // a short block in the middle
  }
  for (uint32_t id : {1u, 2u, 777u, 15001u, 15002u, 20000u}) EXPECT_EQ(x.at(id), texts[id - 1]) << id;
  x.seal();
  for (uint32_t id = 1; id <= texts.size(); id += 97) ASSERT_EQ(x.at(id), texts[id - 1]) << id;
  EXPECT_EQ(x.at(20000), texts.back());
  EXPECT_EQ(x.at(0), "");
  EXPECT_EQ(x.at(20001), "");
  EXPECT_EQ(x.at(20000).size(), texts.back().size());
  size_t raw = 0;
  for (const auto& t : texts) raw += t.size();
  EXPECT_LT(x.memory_bytes(), raw / 4);  // they compress
}

// A span's duration is exact to the nanosecond up to 2^30 ns, then rounded up in microseconds, milliseconds, seconds:
// never shorter than it was (a parent that ends with its child still contains it), within one unit of it.
TEST(Timeline, SpanDurationsAreExactUpToASecondThenNeverShorterThanGiven) {
  for (int64_t ns : {int64_t{0}, int64_t{1}, int64_t{999}, (int64_t{1} << 30) - 1}) {
    Span s;
    s.t0 = 5;
    s.set_t1(5 + ns);
    EXPECT_EQ(s.duration(), ns);
    EXPECT_EQ(s.t1(), 5 + ns);
  }
  int64_t before = 0;
  for (int64_t ns : {int64_t{1} << 30, (int64_t{1} << 30) + 1, int64_t{3'600'000'000'123},
                     int64_t{2'000'000'000'000'000}, int64_t{1'000'000'000'000'000'000}}) {
    Span s;
    s.set_duration(ns);
    EXPECT_GE(s.duration(), ns);
    const int64_t unit = ns < (int64_t{1} << 30) * 1'000       ? 1'000
                         : ns < (int64_t{1} << 30) * 1'000'000 ? 1'000'000
                                                               : 1'000'000'000;
    EXPECT_LT(s.duration() - ns, unit) << ns;
    EXPECT_GE(s.duration(), before);
    before = s.duration();
  }
  Span forever;
  forever.set_duration(int64_t{4'000'000'000'000'000'000});  // past 34 years: a damaged time, the longest span
  EXPECT_EQ(forever.duration(), ((int64_t{1} << 30) - 1) * 1'000'000'000);
  Span negative;
  negative.t0 = 100;
  negative.set_t1(40);  // an end before the start is a zero-length span
  EXPECT_EQ(negative.duration(), 0);
  EXPECT_EQ(negative.t1(), 100);
  Span late;
  late.set_step(uint64_t{1} << 40);  // beyond 24 bits: the largest step, not kNoStep
  EXPECT_EQ(late.step, kNoStep - 1);
}

// Rows are made while spans come when they come in display order, else by sorting at finish: both must give the same
// rows. Random nested spans, handed over sorted to one builder and shuffled to another (and split across two
// builders joined by absorb, as a rank's profiling cycles are).
TEST(Timeline, RowsAreTheSameWhateverOrderTheSpansCameIn) {
  std::mt19937 rng(11);
  std::vector<Span> spans;
  int64_t t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += static_cast<int64_t>(rng() % 50) + (i % 500 == 0 ? 10'000 : 0);  // now and then a pause: nothing open
    Span parent = mk(t, t + 40 + static_cast<int64_t>(rng() % 200));
    spans.push_back(parent);
    for (int64_t c = parent.t0; c + 10 < parent.t1() && spans.size() % 7 != 0; c += 15)
      spans.push_back(mk(c, c + 10, static_cast<uint8_t>(Stage::forward)));
  }
  auto rows_of = [](Timeline tl) {
    std::vector<std::string> out;
    for (const Process& p : tl.processes) {
      for (size_t st = 0; st < p.stages.size(); ++st)  // the stage totals, counted as spans came, come along
        if (p.stages[st].count)
          out.push_back("stage " + std::to_string(st) + " " + std::to_string(p.stages[st].count) + " " +
                        std::to_string(p.stages[st].total_ns));
      for (const Lane& l : p.lanes)
        for (size_t d = 0; d < l.rows.size(); ++d)
          for (const Span& s : l.rows[d].spans)
            out.push_back(std::to_string(d) + " " + std::to_string(s.t0) + " " + std::to_string(s.t1()));
    }
    return out;
  };
  auto build = [](const std::vector<Span>& in) {
    TimelineBuilder b;
    const int p = b.process("1");
    const int l = b.lane(p, "1");
    for (const Span& s : in) b.add_span(p, l, s);
    return b.finish();
  };
  std::vector<Span> sorted = spans;
  std::stable_sort(sorted.begin(), sorted.end(), starts_before);
  const std::vector<std::string> expected = rows_of(build(sorted));
  ASSERT_GT(expected.size(), 10000u);
  EXPECT_NE(expected.back().substr(0, 2), "0 ");  // nested: more than one row

  std::vector<Span> shuffled = spans;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  EXPECT_EQ(rows_of(build(shuffled)), expected);

  // Two builders, each in order: joined where the second starts after the first has ended (row by row), and
  // overlapping (the lane is sorted at finish).
  size_t gap = 0;  // after the middle, where no span is open: the rows join row by row
  for (int64_t end = 0; gap < sorted.size(); ++gap) {
    if (gap > sorted.size() / 2 && sorted[gap].t0 >= end) break;
    end = std::max(end, sorted[gap].t1());
  }
  ASSERT_LT(gap, sorted.size());
  for (size_t cut : {gap, sorted.size() / 3}) {
    TimelineBuilder first, second;
    const int p1 = first.process("1"), l1 = first.lane(p1, "1");
    const int p2 = second.process("1"), l2 = second.lane(p2, "1");
    for (size_t i = 0; i < sorted.size(); ++i)
      (i < cut ? first.add_span(p1, l1, sorted[i]) : second.add_span(p2, l2, sorted[i]));
    first.absorb(std::move(second));
    EXPECT_EQ(rows_of(first.finish()), expected) << cut;
  }
  std::vector<Span> late_first(sorted.begin() + sorted.size() / 2, sorted.end());
  TimelineBuilder a, b;
  const int pa = a.process("1"), la = a.lane(pa, "1"), pb = b.process("1"), lb = b.lane(pb, "1");
  for (const Span& s : late_first) a.add_span(pa, la, s);
  for (size_t i = 0; i < sorted.size() / 2; ++i) b.add_span(pb, lb, sorted[i]);
  a.absorb(std::move(b));  // the earlier spans joined after the later ones
  EXPECT_EQ(rows_of(a.finish()), expected);
}

// A process's steps come from its step spans when it has any, else from the spans carrying a step arg. Whether it
// has any is kept as spans are added, and joins with the process: a process whose step spans all came from an
// absorbed builder (a rank's file) still takes its steps from them, not from the operator that runs past the step.
TEST(Timeline, StepsComeFromStepSpansAlsoWhenTheyCameFromAJoinedBuilder) {
  for (const bool joined : {false, true}) {
    TimelineBuilder into, other;
    const int pi = into.process("r0"), li = into.lane(pi, "main");
    const int po = other.process("r0"), lo = other.lane(po, "main");
    TimelineBuilder& with_steps = joined ? other : into;
    const int ps = joined ? po : pi, ls = joined ? lo : li;
    Span step = mk(1000, 2000, static_cast<uint8_t>(Stage::step));
    step.step = 7;
    with_steps.add_span(ps, ls, step);
    Span op = mk(2500, 3000);  // an operator with step arg 7 that runs after the step span ended
    op.step = 7;
    with_steps.add_span(ps, ls, op);
    if (joined) into.absorb(std::move(other));
    const Timeline tl = into.finish();
    ASSERT_EQ(tl.processes.size(), 1u);
    ASSERT_EQ(tl.processes[0].steps.size(), 1u) << joined;
    EXPECT_EQ(tl.processes[0].steps[0].t1 - tl.processes[0].steps[0].t0, 1000) << "joined " << joined;
  }
}

// An empty name (a Chrome event with "name": "" or none) may come as a view with a null pointer; interning it must
// not hand that pointer to memcpy or memcmp (UBSan stopped CI's fuzzed-mutation test on it), and it is one name.
TEST(StringTable, EmptyNamesInternAsOneWhateverTheirPointer) {
  StringTable t;
  const uint32_t null_view = t.intern(std::string_view{});
  const char* text = "aten::mm";
  EXPECT_EQ(t.intern(std::string_view(text, 0)), null_view);
  EXPECT_EQ(t.intern(std::string_view{}), null_view);
  EXPECT_EQ(t.at(null_view), "");
  EXPECT_NE(t.intern("aten::mm"), null_view);
}

namespace {
// Texts of every size from 1 to `max_size`: `base` repeated, and each of those with one byte `other` instead.
std::vector<std::string> one_byte_apart(size_t max_size, char base, char other) {
  std::vector<std::string> out;
  for (size_t size = 1; size <= max_size; ++size) {
    const std::string text(size, base);
    out.push_back(text);
    for (size_t at = 0; at < size; ++at) {
      std::string v = text;
      v[at] = other;
      out.push_back(v);
    }
  }
  return out;
}
}  // namespace

// Names are told apart by every byte, whatever their length: the recent-names cache compares most of them by their
// ends (timeline.cpp, name_ends), which must never take two names for one.
TEST(StringTable, NamesDifferingInAnyOneByteAreDifferentNames) {
  StringTable t;
  const std::vector<std::string> names = one_byte_apart(40, 'a', 'b');
  std::vector<uint32_t> ids;
  for (const std::string& n : names) ids.push_back(t.intern(n));
  std::vector<uint32_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end()) << "two names got one id";
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string again = names[i];  // the same text at another address
    EXPECT_EQ(t.intern(again), ids[i]) << names[i];
    EXPECT_EQ(t.at(ids[i]), names[i]);
  }
}

// A lane is its pid and tid, every byte of them: keys of up to 8 bytes are compared as one number each
// (ChromeToTimeline::ShortKey), longer ones as text, and two keys differing in one byte are two lanes.
TEST(Timeline, LanesWhoseKeysDifferInAnyOneByteAreDifferentLanes) {
  const std::vector<std::string> tids = one_byte_apart(12, '1', '2');
  std::string json = "{\"traceEvents\": [";
  int64_t ts = 0;
  for (int round = 0; round < 2; ++round)  // each lane met again after the others: not only the last one remembered
    for (const std::string& tid : tids) {
      json += std::string(ts ? "," : "") + "{\"ph\": \"X\", \"name\": \"op\", \"pid\": \"" + tid + "\", \"tid\": \"" +
              tid + "\", \"ts\": " + std::to_string(ts) + ", \"dur\": 1}";
      ts += 2;
    }
  json += "]}";
  Timeline tl;
  std::string error;
  ASSERT_TRUE(timeline_from_chrome_text(json, tl, error)) << error;
  size_t lanes = 0;
  for (const Process& p : tl.processes)
    for (const Lane& l : p.lanes) {
      ++lanes;
      EXPECT_EQ(l.span_count, 2u) << p.key << " " << l.key;
      EXPECT_EQ(p.key, l.key);
    }
  EXPECT_EQ(lanes, tids.size());
}

// A row of a big lane is made of the staged chunks' pages moved into place, its last part-filled chunk too (up to its
// last span's page): every span comes out where it was, in order, and the stage totals count each once.
TEST(Timeline, ABigRowComesOutWholeFromItsMovedChunks) {
  constexpr int64_t kSpans = 200'000;  // staged in chunks of 1 Ki, 2 Ki, ... 128 Ki spans: the last ~70 Ki part-filled
  TimelineBuilder b;
  const int p = b.process("1"), l = b.lane(p, "1");
  for (int64_t i = 0; i < kSpans; ++i) {
    Span s = mk(i * 10, i * 10 + 1 + i % 7);
    s.name = static_cast<uint32_t>(i % 1000);  // a mark of each span's own
    b.add_span(p, l, s);
  }
  const Timeline tl = b.finish();
  ASSERT_EQ(tl.processes.size(), 1u);
  ASSERT_EQ(tl.processes[0].lanes.size(), 1u);
  const Lane& lane = tl.processes[0].lanes[0];
  ASSERT_EQ(lane.rows.size(), 1u);
  const SpanArray& row = lane.rows[0].spans;
  ASSERT_EQ(row.size(), static_cast<size_t>(kSpans));
  int64_t total = 0;
  for (int64_t i = 0; i < kSpans; ++i) {
    ASSERT_EQ(row[i].t0, i * 10) << i;
    ASSERT_EQ(row[i].duration(), 1 + i % 7) << i;
    ASSERT_EQ(row[i].name, static_cast<uint32_t>(i % 1000)) << i;
    total += 1 + i % 7;
  }
  EXPECT_EQ(lane.rows[0].max_dur, 7);
  const StageStat& kernel = tl.processes[0].stages[static_cast<size_t>(Stage::kernel)];
  EXPECT_EQ(kernel.count, static_cast<uint64_t>(kSpans));
  EXPECT_EQ(kernel.total_ns, total);
}
