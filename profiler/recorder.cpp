#include "profiler/recorder.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "profiler/host_memory.h"
#include "profiler/thread_cpu.h"
#include "traces/native/trace_writer.h"

namespace ddp::prof {

std::atomic<bool> g_recording{false};
std::atomic<uint32_t> g_generation{1};
thread_local ThreadBuffer* t_buffer = nullptr;
thread_local uint32_t t_buffer_generation = 0;

namespace {
struct Recorder {
  RecorderConfig cfg;
  TraceWriter writer;
  std::mutex lanes_mu;  // guards buffers (the list, not their contents)
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  int next_lane = 0;                    // lane ids: thread buffers and external lanes share one space
  std::map<std::string, int> external;  // external lane name -> id
  std::mutex drain_mu;                  // one drainer at a time
  TickConverter converter;
  std::vector<Event> scratch;
  std::thread writer_thread;
  std::mutex wake_mu;
  std::condition_variable wake;
  bool stopping = false;
  std::atomic<bool> write_failed{false};
};

// The running recorder. stop() frees it while other threads may still reach for it (the SIGTERM thread's flush(), the
// GPU collector writing events): every use off the hot path holds g_lifetime_mu, and stop() retires the recorder
// under it, so no thread can be inside a recorder that is being freed. The pointer is atomic for the unlocked
// "is anything running" checks.
std::mutex g_lifetime_mu;
std::atomic<Recorder*> g_rec{nullptr};

// Runs `use` on the running recorder, if there is one, holding it alive meanwhile. Returns whether it ran.
template <typename Use>
bool with_recorder(Use&& use) {
  std::lock_guard<std::mutex> lock(g_lifetime_mu);
  Recorder* r = g_rec.load(std::memory_order_acquire);
  if (!r) return false;
  use(*r);
  return true;
}

uint64_t round_pow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

void drain_locked(Recorder& r) {
  r.converter.add(sample_clock_pair());
  std::vector<ThreadBuffer*> bufs;
  {
    std::lock_guard<std::mutex> lock(r.lanes_mu);
    for (auto& b : r.buffers) bufs.push_back(b.get());
  }
  for (ThreadBuffer* b : bufs) {
    uint64_t tail = b->tail.load(std::memory_order_relaxed);
    uint64_t head = b->head.load(std::memory_order_acquire);
    if (head == tail) continue;
    r.scratch.clear();
    for (uint64_t i = tail; i < head; ++i) {
      Event e = b->ring[i & b->mask];
      e.t0 = r.converter.to_ns(static_cast<uint64_t>(e.t0));
      e.t1 = e.kind == static_cast<uint8_t>(EventKind::counter) ? e.t0 : r.converter.to_ns(static_cast<uint64_t>(e.t1));
      if (e.t1 < e.t0) e.t1 = e.t0;
      r.scratch.push_back(e);
    }
    b->tail.store(head, std::memory_order_release);
    if (!r.writer.write_events(b->lane, r.scratch.data(), r.scratch.size()) && !r.write_failed) {
      r.write_failed = true;  // the profiler keeps training alive: report once, keep going
      std::fprintf(stderr, "ddp_profile: rank %u: writing the trace failed; later events are lost\n", r.cfg.rank);
    }
  }
}

// The writer thread drains every thread's ring into the trace and samples the host memory counter. Its own lane holds
// only that counter's events, so the lane is named for what a reader finds on it, not for the thread: "memory" is an
// output (docs/run-folder.md, docs/stalls.md, the integration test's lane list), kept as it is.
constexpr const char* kMemoryCounterLane = "memory";

// The writer's nice value. It shares the rank's core with the training thread and Gloo's threads (a local launch pins
// each rank to its share of the cores); at nice 0, waking every flush it preempted whichever of them ran, mid-step.
// At 10 the scheduler lets it wait for a gap, and its ~10 % share under full load still drains far faster than a
// rank fills its rings (the rings hold over a second of the busiest thread's events).
constexpr int kWriterNice = 10;

void writer_loop(Recorder& r) {
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWriterNice);  // best effort: a failure changes nothing
  name_this_thread(kMemoryCounterLane);
  std::unique_lock<std::mutex> lock(r.wake_mu);
  while (!r.stopping) {
    r.wake.wait_for(lock, std::chrono::milliseconds(r.cfg.flush_ms));
    if (r.stopping) break;
    lock.unlock();
    if (r.cfg.sample_host_memory) record_counter(Counter::host_rss_bytes, host_rss_bytes());
    {
      std::lock_guard<std::mutex> d(r.drain_mu);
      drain_locked(r);
    }
    lock.lock();
  }
}
}  // namespace

bool start(const RecorderConfig& cfg, std::string& error) {
  std::lock_guard<std::mutex> lock(g_lifetime_mu);
  if (g_rec.load()) {
    error = "recorder already started";
    return false;
  }
  auto r = std::make_unique<Recorder>();
  r->cfg = cfg;
  if (!r->writer.open(cfg.path, cfg.rank, cfg.world, error)) return false;
  // Said once: whether the spans' CPU splits carry their wait for a core (traces/model/span_cpu.h).
  r->writer.write_meta(kRunQueueWaitMeta, run_queue_wait_known() ? kRunQueueWaitSchedstat : kRunQueueWaitAbsent);
  r->converter.add(sample_clock_pair());
  Recorder& rec = *r;
  g_rec.store(r.release(), std::memory_order_release);
  g_generation.fetch_add(1);
  g_recording.store(true);
  // The writer names its lane through with_recorder: it waits for this lock, by then the recorder is published.
  rec.writer_thread = std::thread(writer_loop, std::ref(rec));
  return true;
}

void flush() {
  with_recorder([](Recorder& r) {
    std::lock_guard<std::mutex> d(r.drain_mu);
    drain_locked(r);
  });
}

namespace {
// Ends the writer thread. Not under g_lifetime_mu: the writer takes it (attaching its buffer, naming its lane).
void stop_writer(Recorder& r) {
  {
    std::lock_guard<std::mutex> lock(r.wake_mu);
    r.stopping = true;
  }
  r.wake.notify_all();
  if (r.writer_thread.joinable()) r.writer_thread.join();
}

// Drains what is left and writes the end chunk. Under g_lifetime_mu.
RecorderStats finish_trace(Recorder& r) {
  RecorderStats s;
  {
    std::lock_guard<std::mutex> d(r.drain_mu);
    drain_locked(r);
  }
  for (auto& b : r.buffers) s.dropped += b->dropped.load();
  s.events = r.writer.events_written();
  r.writer.write_end(s.events, s.dropped);
  s.bytes = r.writer.bytes_written();
  r.writer.close();
  return s;
}
}  // namespace

RecorderStats stop() {
  Recorder* r = g_rec.load(std::memory_order_acquire);
  if (!r) return {};
  stop_writer(*r);
  g_recording.store(false);
  std::lock_guard<std::mutex> lock(g_lifetime_mu);
  RecorderStats s = finish_trace(*r);
  g_generation.fetch_add(1);  // detaches every thread's buffer pointer
  g_rec.store(nullptr, std::memory_order_release);
  delete r;
  return s;
}

ThreadBuffer* attach_thread() {
  if (!recording()) return nullptr;
  ThreadBuffer* attached = nullptr;
  with_recorder([&](Recorder& r) {
    std::lock_guard<std::mutex> lock(r.lanes_mu);
    if (r.next_lane >= 250) return;  // lane ids are one byte
    auto b = std::make_unique<ThreadBuffer>();
    uint64_t cap = round_pow2(r.cfg.ring_events < 64 ? 64 : r.cfg.ring_events);
    static_assert(std::is_trivially_destructible_v<Event> && alignof(Event) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    b->ring_storage.reset(new unsigned char[cap * sizeof(Event)]);  // untouched until used
    b->ring = reinterpret_cast<Event*>(b->ring_storage.get());
    b->mask = cap - 1;
    b->lane = static_cast<uint8_t>(r.next_lane++);
    r.writer.write_lane(b->lane, "thread " + std::to_string(b->lane));
    attached = b.get();
    r.buffers.push_back(std::move(b));
  });
  if (!attached) return nullptr;
  t_buffer = attached;
  t_buffer_generation = g_generation.load();
  return attached;
}

void name_this_thread(const std::string& lane_name) {
  ThreadBuffer* b = recording() ? this_thread_buffer() : nullptr;
  if (!b) return;
  with_recorder([&](Recorder& r) { r.writer.write_lane(b->lane, lane_name); });  // replaces the default name
}

void record_counter(Counter counter, uint64_t value) {
  ThreadBuffer* b = recording() ? this_thread_buffer() : nullptr;
  if (!b) return;
  const uint64_t h = b->head.load(std::memory_order_relaxed);
  Event* slot = b->claim(h);
  if (!slot) return;
  Event& e = *slot;
  e = Event{};
  e.t0 = e.t1 = static_cast<int64_t>(ticks());
  e.value = value;
  e.step = b->ctx.step;
  e.epoch = b->ctx.epoch;
  e.stage = static_cast<uint8_t>(counter);
  e.kind = static_cast<uint8_t>(EventKind::counter);
  e.lane = b->lane;
  b->head.store(h + 1, std::memory_order_release);
}

int external_lane(const std::string& name) {
  if (!recording()) return -1;
  int lane = -1;
  with_recorder([&](Recorder& r) {
    std::lock_guard<std::mutex> lock(r.lanes_mu);
    auto it = r.external.find(name);
    if (it != r.external.end()) {
      lane = it->second;
      return;
    }
    if (r.next_lane >= 250) return;
    lane = r.next_lane++;
    r.external.emplace(name, lane);
    r.writer.write_lane(static_cast<uint8_t>(lane), name);
  });
  return lane;
}

void record_external(uint8_t lane, const Event* events, size_t count) {
  if (count == 0) return;
  std::vector<Event> v(events, events + count);
  for (Event& e : v) e.lane = lane;
  with_recorder([&](Recorder& r) {
    if (!r.writer.write_events(lane, v.data(), v.size()) && !r.write_failed) {
      r.write_failed = true;
      std::fprintf(stderr, "ddp_profile: rank %u: writing the trace failed; later events are lost\n", r.cfg.rank);
    }
  });
}

void record_clock(const format::ClockPayload& clock) {
  with_recorder([&](Recorder& r) { r.writer.write_clock(clock); });
}

void record_meta(const std::string& key, const std::string& value) {
  with_recorder([&](Recorder& r) { r.writer.write_meta(key, value); });
}

}  // namespace ddp::prof
