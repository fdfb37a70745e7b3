// Cost of recording one span on the hot path (target: <= 10 ns, Tracy's class). Each case reports
// ratio_to_target = measured ns per span / 10 ns. The timestamp floor (two ticks() reads) is reported too: on
// virtual machines where the TSC read itself is slow, it bounds what any recorder can reach.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "profiler/span.h"

namespace {
constexpr double kTargetNs = 10.0;

void report(benchmark::State& state) {
  state.counters["ns_per_span"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["ratio_to_target"] = benchmark::Counter(static_cast<double>(state.iterations()) * kTargetNs * 1e-9,
                                                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

struct Recording {
  Recording() {
    std::string err;
    ddp::prof::RecorderConfig cfg;
    cfg.path =
        (std::filesystem::temp_directory_path() / ("span_bench_" + std::to_string(::getpid()) + ".ddpt")).string();
    cfg.ring_events = 1u << 20;
    cfg.flush_ms = 10;
    cfg.sample_host_memory = false;
    ok = ddp::prof::start(cfg, err);
    path = cfg.path;
  }
  ~Recording() {
    ddp::prof::stop();
    std::filesystem::remove(path);
  }
  bool ok = false;
  std::string path;
};

void BM_TimestampPair(benchmark::State& state) {
  for (auto _ : state) {
    uint64_t a = ddp::prof::ticks();
    uint64_t b = ddp::prof::ticks();
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
  }
  report(state);
}
BENCHMARK(BM_TimestampPair);

void BM_SpanRecording(benchmark::State& state) {
  Recording rec;
  if (!rec.ok) {
    state.SkipWithError("cannot start the recorder");
    return;
  }
  ddp::prof::name_this_thread("bench");
  // Bursts that fit the ring, drained between bursts outside the timed region: a span that finds the ring full is
  // dropped (a cheaper path), and a drainer that cannot keep up with ~20 M spans/s would otherwise turn this into a
  // benchmark of dropping. Real runs record ~10^5 spans/s.
  constexpr int kBurst = 1 << 16;
  for (auto _ : state) {
    for (int i = 0; i < kBurst; ++i) {
      ddp::prof::Span s(ddp::Stage::forward);
      s.bytes(64);
    }
    state.PauseTiming();
    ddp::prof::flush();
    state.ResumeTiming();
  }
  const double spans = static_cast<double>(state.iterations()) * kBurst;
  state.counters["ns_per_span"] = benchmark::Counter(spans, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["ratio_to_target"] =
      benchmark::Counter(spans * kTargetNs * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  ddp::prof::ThreadBuffer* b = ddp::prof::this_thread_buffer();
  state.counters["dropped"] = static_cast<double>(b ? b->dropped.load() : 0);
}
BENCHMARK(BM_SpanRecording);

void BM_SpanNotRecording(benchmark::State& state) {
  for (auto _ : state) {
    ddp::prof::Span s(ddp::Stage::forward);
    benchmark::ClobberMemory();
  }
  report(state);
}
BENCHMARK(BM_SpanNotRecording);
}  // namespace

BENCHMARK_MAIN();
