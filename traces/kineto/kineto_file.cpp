#include "traces/kineto/kineto_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <unordered_map>

#include "traces/kineto/start_times.h"

namespace ddp::kineto_detail {
namespace {

uint64_t arg_number(const ChromeEventView& e, std::string_view key) {
  const ChromeValue* v = e.arg(key);
  if (!v) return 0;
  double x = v->num;
  if (v->type == ChromeValue::string) {
    char* end = nullptr;
    std::string s(v->text);
    x = std::strtod(s.c_str(), &end);
    if (end == s.c_str()) return 0;
  } else if (v->type != ChromeValue::number) {
    return 0;
  }
  return std::isfinite(x) && x > 0 && x < 1.8e19 ? static_cast<uint64_t>(x) : 0;
}

std::string_view arg_text(const ChromeEventView& e, std::string_view key) {
  const ChromeValue* v = e.arg(key);
  return v && v->type == ChromeValue::string ? v->text : std::string_view();
}

// Collects the stage spans and the thread names while the Chrome reader streams the file.
class Collector {
 public:
  Collector(KFile& f, const KinetoStageMap& map) : f_(f), map_(map) {}

  bool operator()(const ChromeEventView& e) {
    if (e.ph == 'M') {
      if (e.name == "thread_name")
        if (const ChromeValue* n = e.arg("name"); n && n->type == ChromeValue::string)
          thread_names_[key(e)] = std::string(n->text);  // the last one wins (Kineto renames pool threads)
      return true;
    }
    if (e.ph != 'X' || !e.has_ts) return true;
    if (e.cat == "cpu_op") {
      const uint16_t t = thread(e);
      if (op_starts_.size() <= t) op_starts_.resize(t + 1u);
      op_starts_[t].push_back(e.ts_ns);
    }
    const std::string_view coll = e.name == "record_param_comms" ? arg_text(e, "Collective name") : std::string_view();
    auto m = map_.classify(e.name, e.cat, coll);
    if (!m) return true;
    KSpan s;
    s.t0 = e.ts_ns;
    const int64_t dur = e.has_dur && e.dur_ns > 0 ? e.dur_ns : 0;
    f_.negative_durations += e.has_dur && e.dur_ns < 0;
    if (e.ts_ns > std::numeric_limits<int64_t>::max() - dur) return true;  // a damaged number, not a time
    s.t1 = e.ts_ns + dur;
    s.stage = m->stage;
    s.collective = m->collective;
    s.thread = thread(e);
    if (s.stage == Stage::step && !m->user) parse_profiler_step(e.name, s.step);
    s.wait_until_first_op = s.stage == Stage::wait_data && !m->user;
    // Collectives and NCCL kernels (Kineto copies record_param_comms' arguments onto the kernel) say their size and
    // process group when the trace has them.
    if (s.stage == Stage::allreduce || s.stage == Stage::nccl) {
      const uint64_t n = arg_number(e, "In msg nelems");
      s.bytes = n * dtype_bytes(arg_text(e, "dtype"));
      s.pg = process_group(arg_text(e, "Process Group Name"));
    }
    // Copies and memsets say their size (Kineto's "bytes"), so their bandwidth can be read back.
    if (s.stage == Stage::memcpy_h2d || s.stage == Stage::memcpy_d2h || s.stage == Stage::memcpy_d2d ||
        s.stage == Stage::memset)
      s.bytes = arg_number(e, "bytes");
    if (is_gpu_activity(s.stage) || is_cuda_host(s.stage)) {
      s.correlation = static_cast<uint32_t>(arg_number(e, "correlation"));
      s.name = intern(e.name);
    }
    f_.spans.push_back(std::move(s));
    return true;
  }

  // enumerate(DataLoader)#...__next__ is the main thread's whole time getting a batch: waiting for a worker, then
  // its own work on the batch (rebuilding the tensors from the worker's shared memory and sending the next indices;
  // with num_workers=0 the whole Dataset). The first operator inside it is where the batch has arrived: only the
  // time before it is wait_data, the rest stays untracked main-thread time.
  void cut_data_waits() {
    std::vector<std::vector<KSpan*>> waits(op_starts_.size());  // per thread, the waits to cut
    for (KSpan& s : f_.spans)
      if (s.wait_until_first_op && s.thread < op_starts_.size()) waits[s.thread].push_back(&s);
    for (size_t t = 0; t < waits.size(); ++t) {
      if (waits[t].empty()) continue;
      std::sort(waits[t].begin(), waits[t].end(), [](const KSpan* a, const KSpan* b) { return a->t0 < b->t0; });
      if (op_starts_[t].ordered())
        cut_in_one_walk(waits[t], op_starts_[t]);
      else
        cut_by_search(waits[t], op_starts_[t].sorted());
    }
  }
  // Waits by start against the thread's starts in time order: one walk, the first start after each wait's.
  static void cut_in_one_walk(const std::vector<KSpan*>& waits, const StartTimes& starts) {
    size_t w = 0;
    starts.for_each([&](int64_t t) {
      while (w < waits.size() && waits[w]->t0 < t) {
        if (t < waits[w]->t1) waits[w]->t1 = t;
        ++w;
      }
      return w < waits.size();
    });
  }
  static void cut_by_search(const std::vector<KSpan*>& waits, const std::vector<int64_t>& starts) {
    for (KSpan* s : waits) {
      auto first = std::upper_bound(starts.begin(), starts.end(), s->t0);
      if (first != starts.end() && *first < s->t1) s->t1 = *first;
    }
  }

  // Thread names in index order; a thread without a name record is "pid P tid T".
  void finish() {
    cut_data_waits();
    f_.threads.resize(thread_ids_.size());
    for (const auto& [k, i] : thread_ids_) {
      auto it = thread_names_.find(k);
      f_.threads[i] = it != thread_names_.end() ? it->second : "pid " + k.first + " tid " + k.second;
    }
  }

 private:
  using Key = std::pair<std::string, std::string>;
  static Key key(const ChromeEventView& e) { return {std::string(e.pid.key()), std::string(e.tid.key())}; }
  uint16_t thread(const ChromeEventView& e) {
    // Events come in runs from one thread: the last one's index is reused without building its key.
    if (last_thread_ && e.pid.key() == last_thread_->first.first && e.tid.key() == last_thread_->first.second)
      return last_thread_->second;
    auto [it, fresh] = thread_ids_.try_emplace(key(e), static_cast<uint16_t>(thread_ids_.size()));
    (void)fresh;
    last_thread_ = &*it;
    return it->second;
  }
  uint16_t process_group(std::string_view name) {
    if (name.empty()) return 0;
    auto& groups = f_.process_groups;
    for (size_t i = 1; i < groups.size(); ++i)  // a job has a handful
      if (groups[i] == name) return static_cast<uint16_t>(i);
    if (groups.size() >= 0xFFFF) return 0;  // more than any job has: not said
    groups.emplace_back(name);
    return static_cast<uint16_t>(groups.size() - 1);
  }
  uint32_t intern(std::string_view name) {
    auto [it, fresh] = name_ids_.try_emplace(std::string(name), static_cast<uint32_t>(f_.names.size()));
    if (fresh) f_.names.emplace_back(name);
    return it->second;
  }

  KFile& f_;
  const KinetoStageMap& map_;
  std::map<Key, uint16_t> thread_ids_;
  const std::pair<const Key, uint16_t>* last_thread_ = nullptr;  // std::map nodes do not move
  std::map<Key, std::string> thread_names_;
  std::unordered_map<std::string, uint32_t> name_ids_;
  std::vector<StartTimes> op_starts_;  // start of every cpu_op, per thread index
};

// distributedInfo.rank / world_size when the trace has them.
void read_identity(const nlohmann::json& top, KFile& f) {
  auto di = top.find("distributedInfo");
  if (di != top.end() && di->is_object()) {
    auto r = di->find("rank");
    if (r != di->end() && r->is_number_integer() && r->get<int64_t>() >= 0 && r->get<int64_t>() < (1 << 24)) {
      f.rank = r->get<int>();
      f.rank_from = "distributedInfo";
    }
    auto be = di->find("backend");
    if (be != di->end() && be->is_string() && be->get<std::string>().size() < 64) f.backend = be->get<std::string>();
    auto w = di->find("world_size");
    if (w != di->end() && w->is_number_integer() && w->get<int64_t>() > 0 && w->get<int64_t>() <= (1 << 24))
      f.world = w->get<int>();
  }
  auto v = top.find("schemaVersion");
  if (v != top.end() && v->is_number_integer() && v->get<int64_t>() >= 0 && v->get<int64_t>() < 1000)
    f.schema_version = v->get<int>();
  auto b = top.find("baseTimeNanoseconds");
  if (b != top.end() && b->is_number_integer()) f.base_ns = b->get<int64_t>();
}

}  // namespace

bool rank_from_file_name(const std::string& name, int& rank) {
  for (size_t at = name.find("rank"); at != std::string::npos; at = name.find("rank", at + 1)) {
    size_t i = at + 4;
    if (i < name.size() && (name[i] == '-' || name[i] == '_')) ++i;
    size_t j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j])) && j - i < 8) ++j;
    if (j == i || (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j])))) continue;
    rank = std::stoi(name.substr(i, j - i));
    return true;
  }
  return false;
}

KFile read_kineto_file(const std::string& path, const KinetoStageMap& map, const ChromeEventFn* also) {
  KFile f;
  f.path = path;
  f.name = std::filesystem::path(path).filename().string();
  ChromeDocInfo info;
  Collector c(f, map);
  // Streamed: a big trace is never in memory whole.
  if (also)
    f.status = parse_chrome_file(
        path, [&](const ChromeEventView& e) { return c(e) && (*also)(e); }, info);
  else
    f.status = parse_chrome_file(path, std::ref(c), info);
  // A job killed while the profiler wrote its trace leaves the JSON cut off inside traceEvents: every event handed on
  // before the cut is whole, so they are kept (the caller leaves the incomplete last step out).
  if (f.status.error == ChromeError::truncated && info.events > 0) {
    f.cut_off = f.status;
    f.status = ChromeStatus{};
  }
  f.not_strict = info.not_strict;
  if (info.closed_by_reader) {  // the same for the Array Format (legacy traces), closed by the reader
    f.cut_off = ChromeStatus{ChromeError::truncated, info.not_strict, 0};
  }
  if (!f.status.ok()) {
    f.spans.clear();
    return f;
  }
  c.finish();
  f.events = info.events;
  if (f.events == 0) {
    f.status.error = ChromeError::empty;
    f.status.message = std::string(chrome_error_name(ChromeError::empty)) +  // as the reader's own messages start
                       ": no events (an empty traceEvents: the profiler recorded nothing; did its schedule reach an "
                       "active step before the profiler stopped?)";
    return f;
  }
  f.array_format = info.array_format;
  read_identity(info.top, f);
  if (f.rank < 0 && rank_from_file_name(f.name, f.rank)) f.rank_from = "file name";
  // Times far outside any clock (damaged numbers) would overflow the differences later: such spans are dropped.
  constexpr int64_t kLimit = int64_t{1} << 61;  // ~73 years of nanoseconds
  if (f.base_ns < -kLimit || f.base_ns > kLimit) f.base_ns = 0;
  std::vector<KSpan> kept;
  kept.reserve(f.spans.size());
  for (KSpan& s : f.spans) {
    if (s.t0 < -kLimit || s.t0 > kLimit || s.t1 - s.t0 > kLimit) continue;
    s.t0 += f.base_ns, s.t1 += f.base_ns;
    kept.push_back(std::move(s));
  }
  f.spans.swap(kept);
  return f;
}

}  // namespace ddp::kineto_detail
