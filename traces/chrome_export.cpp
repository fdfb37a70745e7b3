#include "traces/chrome_export.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <memory>
#include <unordered_map>
#include <vector>

#include "traces/cuda_names.h"

namespace ddp {
namespace {

// An append-only text buffer flushed to a FILE* in large blocks: a plain char array with a cursor (no per-append
// capacity bookkeeping of std::string), formatting with to_chars; export runs at millions of events per second.
class Out {
 public:
  explicit Out(FILE* f) : f_(f), buf_(new char[kCap]) {}
  ~Out() { flush(); }
  void raw(std::string_view s) {
    ensure(s.size());
    std::memcpy(buf_.get() + n_, s.data(), s.size());
    n_ += s.size();
  }
  void ch(char c) {
    ensure(1);
    buf_[n_++] = c;
  }
  void num(int64_t v) {
    ensure(24);
    n_ = static_cast<size_t>(std::to_chars(buf_.get() + n_, buf_.get() + n_ + 24, v).ptr - buf_.get());
  }
  void unum(uint64_t v) {
    ensure(24);
    n_ = static_cast<size_t>(std::to_chars(buf_.get() + n_, buf_.get() + n_ + 24, v).ptr - buf_.get());
  }
  // Nanoseconds as microseconds with three decimals, the unit Chrome traces use.
  void micros(int64_t ns) {
    if (ns < 0) {
      ch('-');
      ns = -ns;
    }
    num(ns / 1000);
    const int64_t frac = ns % 1000;
    ensure(4);
    char* p = buf_.get() + n_;
    p[0] = '.';
    p[1] = static_cast<char>('0' + frac / 100);
    p[2] = static_cast<char>('0' + frac / 10 % 10);
    p[3] = static_cast<char>('0' + frac % 10);
    n_ += 4;
  }
  void str(std::string_view s) {
    ch('"');
    for (char c : s) {
      if (c == '"' || c == '\\') {
        ch('\\');
        ch(c);
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char tmp[8];
        std::snprintf(tmp, sizeof(tmp), "\\u%04x", c);
        raw(tmp);
      } else {
        ch(c);
      }
    }
    ch('"');
  }
  void flush() {
    if (n_ > 0) {
      if (std::fwrite(buf_.get(), 1, n_, f_) != n_) failed_ = true;
      written_ += n_;
      n_ = 0;
    }
  }
  bool failed() const { return failed_; }
  uint64_t written() const { return written_; }

 private:
  void ensure(size_t k) {
    if (n_ + k > kCap) {
      flush();
      if (k > kCap) failed_ = true;  // never happens: no single piece is megabytes long
    }
  }
  static constexpr size_t kCap = 1 << 20;
  FILE* f_;
  std::unique_ptr<char[]> buf_;
  size_t n_ = 0;
  bool failed_ = false;
  uint64_t written_ = 0;
};

const char* category(Stage s) {
  if (is_data_stage(s)) return "data";
  if (is_wait(s)) return "stall";
  if (s == Stage::allreduce || s == Stage::nccl) return "comm";
  if (is_gpu_activity(s)) return "gpu";
  if (s == Stage::step || s == Stage::checkpoint) return "step";
  return "compute";
}

// Kineto's categories for CUDA activity, so tools that know PyTorch profiler traces read ours the same way.
const char* cuda_category(Stage s) {
  switch (s) {
    case Stage::kernel:
    case Stage::nccl: return "kernel";
    case Stage::memcpy_h2d:
    case Stage::memcpy_d2h:
    case Stage::memcpy_d2d: return "gpu_memcpy";
    case Stage::memset: return "gpu_memset";
    case Stage::sync: return "cuda_sync";
    default: return "cuda_runtime";
  }
}

void flow(Out& o, char ph, uint32_t pid, uint8_t tid, int64_t ts_ns, uint64_t id) {
  o.raw(",\n{\"ph\":\"");
  o.raw(std::string_view(&ph, 1));
  o.raw("\",\"name\":\"launch\",\"cat\":\"ac2g\",\"id\":");
  o.unum(id);
  o.raw(",\"pid\":");
  o.unum(pid);
  o.raw(",\"tid\":");
  o.unum(tid);
  o.raw(",\"ts\":");
  o.micros(ts_ns);
  if (ph == 'f') o.raw(",\"bp\":\"e\"");
  o.raw("}");
}

void metadata(Out& o, bool& first, const char* name, uint32_t pid, int tid, std::string_view key,
              const std::string& value, bool is_number) {
  o.raw(first ? "\n" : ",\n");
  first = false;
  o.raw("{\"ph\":\"M\",\"name\":\"");
  o.raw(name);
  o.raw("\",\"pid\":");
  o.unum(pid);
  if (tid >= 0) {
    o.raw(",\"tid\":");
    o.num(tid);
  }
  o.raw(",\"args\":{\"");
  o.raw(key);
  o.raw("\":");
  if (is_number)
    o.raw(value);
  else
    o.str(value);
  o.raw("}}");
}
}  // namespace

bool export_chrome(const RunTrace& run, const std::string& path, ExportStats& stats, std::string& error) {
  // Written beside the target and renamed over it when whole: a full disk leaves the previous trace.json (or none),
  // never a truncated one.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!f) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const int64_t origin = run.origin_ns();
  Out o(f.get());
  o.raw("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"ddp_profile\"");
  if (run.manifest.is_object()) {
    o.raw(",\"manifest\":");
    o.raw(run.manifest.dump());
  }
  o.raw("},\n\"traceEvents\":[");
  bool first = true;
  for (const RankTrace& r : run.ranks) {
    std::string host = r.meta.count("host") ? r.meta.at("host") : std::string();
    std::string pname = "rank " + std::to_string(r.rank) + (host.empty() ? "" : " (" + host + ")");
    if (!r.complete) pname += " [ended early]";
    metadata(o, first, "process_name", r.rank, -1, "name", pname, false);
    metadata(o, first, "process_sort_index", r.rank, -1, "sort_index", std::to_string(r.rank), true);
    for (size_t lane = 0; lane < r.lanes.size(); ++lane) {
      metadata(o, first, "thread_name", r.rank, static_cast<int>(lane), "name", r.lanes[lane], false);
      metadata(o, first, "thread_sort_index", r.rank, static_cast<int>(lane), "sort_index", std::to_string(lane),
               true);
    }
    const int64_t shift = r.clock_offset_ns() - origin;
    const std::vector<std::string> names = cuda_event_names(r);
    std::unordered_map<uint32_t, const Event*> launches;  // correlation -> the API call
    for (const Event& e : r.events)
      if (e.is_span() && e.stage_id() == Stage::cuda_api && e.correlation_id())
        launches.emplace(e.correlation_id(), &e);
    for (const Event& e : r.events) {
      o.raw(first ? "\n" : ",\n");
      first = false;
      if (e.is_span()) {
        Stage s = e.stage_id();
        const bool cuda = e.is_cuda();
        if (cuda) {
          o.raw("{\"ph\":\"X\",\"name\":");
          o.str(cuda_event_name(e, names));
          o.raw(",\"cat\":\"");
          o.raw(cuda_category(s));
        } else {
          o.raw("{\"ph\":\"X\",\"name\":\"");
          o.raw(stage_name(s));
          o.raw("\",\"cat\":\"");
          o.raw(category(s));
        }
        o.raw("\",\"pid\":");
        o.unum(r.rank);
        o.raw(",\"tid\":");
        o.unum(e.lane);
        o.raw(",\"ts\":");
        o.micros(e.t0 + shift);
        o.raw(",\"dur\":");
        o.micros(e.t1 - e.t0);
        o.raw(",\"args\":{\"step\":");
        o.unum(e.step);
        o.raw(",\"epoch\":");
        o.unum(e.epoch);
        o.raw(",\"micro\":");
        o.unum(e.micro);
        if (!cuda && e.bucket_index() != kNoBucket) {
          o.raw(",\"bucket\":");
          o.unum(e.bucket_index());
        }
        if (e.value) {
          o.raw(",\"bytes\":");
          o.unum(e.value);
        }
        if (cuda) {
          o.raw(",\"stage\":\"");
          o.raw(stage_name(s));
          o.raw("\",\"correlation\":");
          o.unum(e.correlation_id());
        } else if (is_data_stage(s)) {
          o.raw(",\"batch\":");
          o.unum(e.batch_index());
        } else {
          o.raw(",\"samples\":");
          o.unum(e.samples());
        }
        o.raw("}}");
        if (is_gpu_activity(s) && e.correlation_id()) {
          auto it = launches.find(e.correlation_id());
          if (it != launches.end()) {
            const uint64_t id = (static_cast<uint64_t>(r.rank) << 32) | e.correlation_id();
            flow(o, 's', r.rank, it->second->lane, it->second->t0 + shift, id);
            flow(o, 'f', r.rank, e.lane, e.t0 + shift, id);
            ++stats.flows;
          }
        }
      } else {
        o.raw("{\"ph\":\"C\",\"name\":\"");
        o.raw(counter_name(e.counter_id()));
        o.raw("\",\"pid\":");
        o.unum(r.rank);
        o.raw(",\"ts\":");
        o.micros(e.t0 + shift);
        o.raw(",\"args\":{\"value\":");
        o.unum(e.value);
        o.raw("}}");
      }
      ++stats.events;
    }
  }
  o.raw("\n]}\n");
  o.flush();
  stats.bytes = o.written();
  bool ok = !o.failed() && std::fflush(f.get()) == 0;
  const int write_errno = errno;
  ok = std::fclose(f.release()) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "write to " + path + " failed: " + std::strerror(ok ? errno : write_errno) +
            (ok ? "" : " (the previous file, if any, is left as it was)");
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace ddp
