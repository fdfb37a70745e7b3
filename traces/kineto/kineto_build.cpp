#include "traces/kineto/kineto_build.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "traces/base/text_format.h"

namespace ddp::kineto_detail {
namespace {

constexpr size_t kMaxLanes = 256;  // Event::lane is a byte

// A trace can show one allreduce up to three times (record_param_comms, the dispatcher's c10d::allreduce_ and the
// backend's gloo:/nccl:all_reduce); only the best source present is kept, so each collective counts once.
// The size and process group of a kept collective come from the record_param_comms around it (same thread) when the
// kept span has none (nccl:all_reduce inside record_param_comms carries no arguments).
void take_size_from_param_comms(std::vector<KSpan>& kept, const std::vector<const KSpan*>& param_comms) {
  for (KSpan& s : kept) {
    if (s.stage != Stage::allreduce || s.bytes) continue;
    auto it = std::upper_bound(
        param_comms.begin(), param_comms.end(), std::make_pair(s.thread, s.t0),
        [](const std::pair<uint16_t, int64_t>& k, const KSpan* p) { return k < std::make_pair(p->thread, p->t0); });
    if (it == param_comms.begin()) continue;
    const KSpan* p = *(it - 1);
    if (p->thread == s.thread && p->t0 <= s.t0 && s.t1 <= p->t1) {
      s.bytes = p->bytes;
      if (s.pg == 0) s.pg = p->pg;
    }
  }
}

std::vector<KSpan> keep_one_collective_source(const std::vector<KSpan>& in) {
  CollectiveSource best = CollectiveSource::none;
  std::vector<const KSpan*> param_comms;
  for (const KSpan& s : in) {
    if (s.stage != Stage::allreduce) continue;
    best = std::min(best, s.collective);
    if (s.collective == CollectiveSource::param_comms) param_comms.push_back(&s);
  }
  std::sort(param_comms.begin(), param_comms.end(), [](const KSpan* a, const KSpan* b) {
    return std::make_pair(a->thread, a->t0) < std::make_pair(b->thread, b->t0);
  });
  std::vector<KSpan> out;
  out.reserve(in.size());
  for (const KSpan& s : in)
    if (s.stage != Stage::allreduce || s.collective == best) out.push_back(s);
  take_size_from_param_comms(out, param_comms);
  return out;
}

// A stage matched inside the same stage on the same thread (a reentrant evaluate_function, `## forward ##` inside
// DistributedDataParallel.forward) is one piece of work: only the outermost span is kept.
std::vector<KSpan> keep_outermost(std::vector<KSpan> spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const KSpan& a, const KSpan& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.t0 != b.t0) return a.t0 < b.t0;
    return a.t1 > b.t1;
  });
  std::vector<KSpan> out;
  out.reserve(spans.size());
  std::array<int64_t, kStageCount> open_until{};
  uint16_t thread = std::numeric_limits<uint16_t>::max();
  for (const KSpan& s : spans) {
    if (s.thread != thread) {
      thread = s.thread;
      open_until.fill(std::numeric_limits<int64_t>::min());
    }
    int64_t& until = open_until[static_cast<size_t>(s.stage)];
    if (s.t1 <= until && s.t0 < until) continue;  // inside a kept span of the same stage
    until = std::max(until, s.t1);
    out.push_back(s);
  }
  return out;
}

struct Window {
  int64_t t0, t1;
  uint32_t step;
};

// The thread that records ProfilerStep#N (the training loop); without steps, the one with most forward/backward.
int main_thread(const std::vector<KSpan>& spans) {
  std::map<uint16_t, int> steps, compute;
  for (const KSpan& s : spans) {
    if (s.stage == Stage::step) steps[s.thread]++;
    if (s.stage == Stage::forward || s.stage == Stage::backward) compute[s.thread]++;
  }
  const auto& votes = steps.empty() ? compute : steps;
  int best = -1, n = 0;
  for (auto [t, c] : votes)
    if (c > n) best = t, n = c;
  return best;
}

// Without ProfilerStep annotations (profiled without prof.step()), the main thread's iterations: one per outermost
// forward pass, from the start of the wait for its batch (the last wait_data since the previous forward ended) to
// the start of the next iteration; the last ends with the thread's last span. Numbered from 0.
std::vector<Window> iteration_windows(const std::vector<KSpan>& spans, int main) {
  if (main < 0) return {};
  std::vector<const KSpan*> mine;
  for (const KSpan& s : spans)
    if (s.thread == main && !is_gpu_activity(s.stage)) mine.push_back(&s);
  std::sort(mine.begin(), mine.end(), [](const KSpan* a, const KSpan* b) { return a->t0 < b->t0; });
  std::vector<Window> out;
  int64_t prev_forward_end = std::numeric_limits<int64_t>::min(), wait_start = -1, end = 0;
  bool waiting = false;
  for (const KSpan* s : mine) {
    end = std::max(end, s->t1);
    if (s->stage == Stage::wait_data && s->t0 >= prev_forward_end) {
      if (!waiting) wait_start = s->t0;
      waiting = true;
    } else if (s->stage == Stage::forward && s->t0 >= prev_forward_end) {
      const int64_t t0 = waiting ? wait_start : s->t0;
      if (!out.empty()) out.back().t1 = t0;
      out.push_back({t0, s->t1, static_cast<uint32_t>(out.size())});
      prev_forward_end = s->t1;
      waiting = false;
    }
  }
  if (!out.empty()) out.back().t1 = std::max(out.back().t1, end);
  return out;
}

// The step span of a derived window, on the main thread.
KSpan step_span(const Window& w, int main) {
  KSpan s;
  s.t0 = w.t0;
  s.t1 = w.t1;
  s.step = w.step;
  s.stage = Stage::step;
  s.thread = static_cast<uint16_t>(main);
  return s;
}

// A trace cut off by a killed job: Kineto writes its threads' events in chunks, not in time order (some of the
// collective thread's first, the main thread's, then more of the collective thread's), so past the cut a step can
// lack its collectives while its main-thread spans are all there. A step of a cut-off trace is read only when it
// ends before the main thread's last event read and holds as many collectives as the rank's fullest step (DDP
// launches the same buckets every step); the others are left out, and the note says how many.
void keep_complete_steps(std::vector<KSpan>& spans, std::vector<Window>& windows, int main,
                         std::vector<std::string>& notes) {
  int64_t horizon = std::numeric_limits<int64_t>::min();
  std::vector<size_t> collectives(windows.size(), 0);  // windows are sorted by t0
  for (const KSpan& s : spans) {
    if (s.thread == main) horizon = std::max(horizon, s.t0);
    if (s.stage != Stage::allreduce) continue;
    auto it =
        std::upper_bound(windows.begin(), windows.end(), s.t0, [](int64_t t, const Window& w) { return t < w.t0; });
    if (it != windows.begin() && s.t0 <= (it - 1)->t1) ++collectives[static_cast<size_t>(it - windows.begin() - 1)];
  }
  const size_t fullest = collectives.empty() ? 0 : *std::max_element(collectives.begin(), collectives.end());
  std::vector<char> whole(windows.size(), 0);
  std::vector<Window> kept;
  for (size_t i = 0; i < windows.size(); ++i)
    if ((whole[i] = windows[i].t1 <= horizon && collectives[i] == fullest)) kept.push_back(windows[i]);
  // Every span of a step left out goes with it (else it would join the step before, as the time between two steps).
  auto in_dropped_step = [&](const KSpan& s) {
    auto it =
        std::upper_bound(windows.begin(), windows.end(), s.t0, [](int64_t t, const Window& w) { return t < w.t0; });
    return it != windows.begin() && !whole[static_cast<size_t>(it - windows.begin() - 1)];
  };
  spans.erase(std::remove_if(spans.begin(), spans.end(), in_dropped_step), spans.end());
  const size_t dropped = windows.size() - kept.size();
  notes.push_back(
      fmt("the trace is cut off: %zu of its %zu steps are whole (all their collectives and main-thread "
          "spans were written before the cut) and are read; %zu are left out as incomplete",
          kept.size(), windows.size(), dropped));
  windows.swap(kept);
}

// Gives every span the step of the ProfilerStep window holding its start (a gap between two windows belongs to the
// earlier one). Host spans outside every window are left out; GPU work after the last window (queued in it, run
// later) belongs to the last step. Returns how many spans were left out.
size_t assign_steps(std::vector<KSpan>& spans, const std::vector<Window>& windows) {
  if (windows.empty()) return 0;
  std::vector<KSpan> kept;
  kept.reserve(spans.size());
  size_t dropped = 0;
  for (KSpan& s : spans) {
    if (s.stage == Stage::step) {
      kept.push_back(s);
      continue;
    }
    auto it =
        std::upper_bound(windows.begin(), windows.end(), s.t0, [](int64_t t, const Window& w) { return t < w.t0; });
    const bool gpu = is_gpu_activity(s.stage);
    if (it == windows.begin() || (std::next(it - 1) == windows.end() && s.t0 >= (it - 1)->t1 && !gpu)) {
      ++dropped;
      continue;
    }
    s.step = (it - 1)->step;
    kept.push_back(s);
  }
  spans.swap(kept);
  return dropped;
}

// On a GPU the host's nccl:all_reduce (or record_param_comms, c10d::allreduce_) only enqueues the collective; its
// transfer is the NCCL AllReduce kernel. When the counts agree, the k-th host allreduce takes the k-th kernel's time
// and stream (keeping the step it was launched in), so allreduce time and bandwidth mean the transfer, as in our runs.
void time_allreduces_by_their_kernels(std::vector<KSpan>& spans, const KFile& f, std::vector<std::string>& notes) {
  std::vector<KSpan*> host, kernels;
  for (KSpan& s : spans) {
    if (s.stage == Stage::allreduce) host.push_back(&s);
    if (s.stage == Stage::nccl && f.names[s.name].find("AllReduce") != std::string::npos) kernels.push_back(&s);
  }
  if (kernels.empty() || host.empty()) return;
  if (kernels.size() != host.size()) {
    notes.push_back(
        fmt("%zu host allreduces but %zu NCCL AllReduce kernels: allreduce spans are the host's enqueue, "
            "not the transfer (see the nccl stage)",
            host.size(), kernels.size()));
    return;
  }
  auto by_t0 = [](const KSpan* a, const KSpan* b) { return a->t0 < b->t0; };
  std::stable_sort(host.begin(), host.end(), by_t0);
  std::stable_sort(kernels.begin(), kernels.end(), by_t0);
  for (size_t k = 0; k < host.size(); ++k) {
    host[k]->t0 = kernels[k]->t0;
    host[k]->t1 = kernels[k]->t1;
    host[k]->thread = kernels[k]->thread;
    if (!host[k]->bytes) host[k]->bytes = kernels[k]->bytes;
  }
  notes.push_back(fmt("allreduce spans are timed by their %zu NCCL AllReduce kernels (the host only enqueues them)",
                      kernels.size()));
}

// DDP launches each bucket's allreduce from inside backward and the main thread then blocks, recording nothing, until
// the last one completes (gloo: the collective runs on a pt_gloo_runloop thread). That gap is our wait_comm: from the
// end of the step's backward to the end of its last collective, cut at the next main-thread stage.
std::vector<KSpan> derive_wait_comm(const std::vector<KSpan>& spans, uint16_t main) {
  std::map<uint32_t, int64_t> backward_end, collective_end;
  std::vector<const KSpan*> main_spans;
  for (const KSpan& s : spans) {
    if (s.stage == Stage::allreduce) {
      int64_t& e = collective_end.try_emplace(s.step, s.t1).first->second;
      e = std::max(e, s.t1);
    }
    if (s.thread != main) continue;
    if (s.stage == Stage::backward) {
      int64_t& e = backward_end.try_emplace(s.step, s.t1).first->second;
      e = std::max(e, s.t1);
    }
    if (stage_has(s.stage, kStageMainThread)) main_spans.push_back(&s);
  }
  std::sort(main_spans.begin(), main_spans.end(), [](const KSpan* a, const KSpan* b) { return a->t0 < b->t0; });
  std::vector<KSpan> waits;
  for (const auto& [step, b] : backward_end) {
    auto c = collective_end.find(step);
    if (c == collective_end.end() || c->second <= b) continue;
    int64_t end = c->second;
    auto next =
        std::lower_bound(main_spans.begin(), main_spans.end(), b, [](const KSpan* s, int64_t t) { return s->t0 < t; });
    if (next != main_spans.end()) end = std::min(end, (*next)->t0);
    if (end <= b) continue;
    KSpan w;
    w.t0 = b;
    w.t1 = end;
    w.step = step;
    w.thread = main;
    w.stage = Stage::wait_comm;
    waits.push_back(w);
  }
  return waits;
}

// An NCCL kernel of a collective every rank of its group runs together; SendRecv (point to point, all_to_all) pairs
// different peers on different ranks and is no common instant.
bool is_group_collective_kernel(const std::string& name) {
  for (const char* k : {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"})
    if (name.find(k) != std::string::npos) return true;
  return false;
}

// The collectives the clock alignment matches: NCCL collective kernels when the trace has them (they end when the
// collective ends on the device), else the host collectives kept.
std::vector<CollectiveAnchor> anchors_of(const KFile& f, const std::vector<KSpan>& spans) {
  auto gpu_anchor = [&](const KSpan& s) {
    return s.stage == Stage::nccl && is_group_collective_kernel(f.names[s.name]);
  };
  const bool gpu = std::any_of(spans.begin(), spans.end(), gpu_anchor);
  std::vector<const KSpan*> picked;
  for (const KSpan& s : spans)
    if (gpu ? gpu_anchor(s) : s.stage == Stage::allreduce) picked.push_back(&s);
  std::stable_sort(picked.begin(), picked.end(), [](const KSpan* a, const KSpan* b) { return a->t0 < b->t0; });
  std::map<std::pair<std::string, uint32_t>, uint32_t> ordinal;
  std::vector<CollectiveAnchor> out;
  for (const KSpan* s : picked) {
    CollectiveAnchor a;
    a.pg = f.process_groups[s->pg];
    a.step = s->step;
    a.ordinal = ordinal[{a.pg, s->step}]++;
    a.bytes = s->bytes;
    a.start_ns = s->t0;
    a.end_ns = s->t1;
    out.push_back(a);
  }
  return out;
}

// Lanes for the threads that have spans, in thread order; names made unique (two GPUs can both have "stream 7").
std::vector<int> assign_lanes(const KFile& f, const std::vector<KSpan>& spans, RankTrace& t,
                              std::vector<std::string>& notes) {
  std::vector<char> used(f.threads.size(), 0);
  for (const KSpan& s : spans) used[s.thread] = 1;
  std::vector<int> lane(f.threads.size(), -1);
  std::map<std::string, int> seen;
  size_t merged = 0;
  for (size_t i = 0; i < f.threads.size(); ++i) {
    if (!used[i]) continue;
    if (t.lanes.size() == kMaxLanes - 1) {
      t.lanes.push_back("other threads");
    }
    if (t.lanes.size() >= kMaxLanes) {
      lane[i] = kMaxLanes - 1;
      ++merged;
      continue;
    }
    std::string name = f.threads[i];
    if (int n = ++seen[name]; n > 1) name += " [" + std::to_string(n) + "]";
    lane[i] = static_cast<int>(t.lanes.size());
    t.lanes.push_back(name);
  }
  if (merged)
    notes.push_back(fmt("%zu threads beyond the first %zu share the lane 'other threads'", merged, kMaxLanes - 1));
  return lane;
}

// The worker name tensorboard_trace_handler puts first in its file names (<worker>.<pid>.<ts>.pt.trace.json; by
// default <host>_<pid>): the closest thing to a host a Kineto trace says.
std::string worker_name(const std::string& file) {
  const size_t dot = file.find('.');
  return dot == std::string::npos || dot == 0 ? file : file.substr(0, dot);
}

}  // namespace

BuiltRank build_rank(const KFile& f, int world) {
  BuiltRank b;
  RankTrace& t = b.trace;
  t.rank = static_cast<uint32_t>(f.rank);
  t.world = static_cast<uint32_t>(world);
  t.created_unix_ns = f.base_ns;
  t.complete = true;
  t.meta["source"] = "kineto";
  t.meta["file"] = f.name;
  t.meta["host"] = worker_name(f.name);
  t.meta["rank_from"] = f.rank_from;

  std::vector<KSpan> spans = keep_outermost(keep_one_collective_source(f.spans));
  std::vector<Window> windows;
  for (const KSpan& s : spans)
    if (s.stage == Stage::step) windows.push_back({s.t0, s.t1, s.step});
  if (windows.empty()) {
    const int loop = main_thread(spans);  // without steps: the thread with most forward/backward spans
    windows = iteration_windows(spans, loop);
    for (const Window& w : windows) spans.push_back(step_span(w, loop));
    b.notes.push_back(
        windows.empty()
            ? "no ProfilerStep#N annotations and no forward pass on any thread: the whole trace is one step "
              "(call prof.step() once per iteration, with torch.profiler's schedule, to get steps)"
            : fmt("no ProfilerStep#N annotations (profiled without prof.step()): %zu steps are the main thread's "
                  "iterations, one per forward pass from the wait for its batch (call prof.step() once per "
                  "iteration to get PyTorch's own steps)",
                  windows.size()));
  }
  std::sort(windows.begin(), windows.end(), [](const Window& x, const Window& y) { return x.t0 < y.t0; });
  if (f.cut_off.error != ChromeError::none) keep_complete_steps(spans, windows, main_thread(spans), b.notes);
  if (!f.not_strict.empty()) b.notes.push_back(f.name + ": " + f.not_strict);
  if (f.negative_durations)
    b.notes.push_back(fmt("%llu stage spans with a negative dur read as 0 long (a damaged or clock-stepped trace)",
                          static_cast<unsigned long long>(f.negative_durations)));
  if (size_t n = assign_steps(spans, windows))
    b.notes.push_back(fmt("%zu stage spans outside every ProfilerStep window left out", n));
  time_allreduces_by_their_kernels(spans, f, b.notes);
  const int main = main_thread(spans);
  if (main >= 0) {
    std::vector<KSpan> waits = derive_wait_comm(spans, static_cast<uint16_t>(main));
    spans.insert(spans.end(), waits.begin(), waits.end());
  }
  b.anchors = anchors_of(f, spans);

  const std::vector<int> lane = assign_lanes(f, spans, t, b.notes);
  std::stable_sort(spans.begin(), spans.end(), [](const KSpan& x, const KSpan& y) { return x.t0 < y.t0; });
  std::vector<char> named(f.names.size(), 0);
  t.events.reserve(spans.size());
  for (const KSpan& s : spans) {
    Event e = make_span(s.stage, static_cast<uint8_t>(lane[s.thread]), s.t0, s.t1);
    e.step = s.step;
    e.value = s.bytes;
    if (is_gpu_activity(s.stage) || is_cuda_host(s.stage)) {
      e.item = s.correlation;
      if (s.name < kNoName) {
        e.bucket = static_cast<uint16_t>(s.name);
        named[s.name] = 1;
      }
    }
    t.events.push_back(e);
  }
  for (size_t i = 0; i < named.size(); ++i)
    if (named[i]) t.meta["gpu_name/" + std::to_string(i)] = f.names[i];
  return b;
}

}  // namespace ddp::kineto_detail
