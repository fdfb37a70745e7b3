// export_kineto_merged: the run's own Chrome export, with every rank file's original events appended, rewritten onto
// one clock with pids and flow ids that cannot collide across ranks.
#include "traces/kineto/kineto_merge.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "traces/base/json_out.h"
#include "traces/base/parse_int.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/kineto/kineto_import.h"

namespace ddp {
namespace {

// A file's processes get pids above every rank's stage process (pid = rank), grouped by rank.
constexpr uint64_t kFilePidBase = uint64_t{1} << 20;
constexpr uint64_t kPidsPerRank = 1000;  // processes in one rank's file beyond this share the last pid
// Flow ids of the files: rank << 32 | id above 2^52, so distinct per rank and from the stage export's own
// (rank << 32 | correlation, below 2^48 as ranks are below 2^16), and below 2^53: chrome://tracing reads ids as
// JavaScript numbers, which hold integers exactly only that far.
constexpr uint64_t kFlowIdBase = uint64_t{1} << 52;

bool is_flow(char ph) { return ph == 's' || ph == 't' || ph == 'f'; }

// --steps: which of a file's events fall in the window's time. A flow is kept only when both its ends are (an arrow
// with one end drawn nowhere), which takes a first reading of the file to learn.
class FlowFilter {
 public:
  explicit FlowFilter(const KinetoRankFile& file) : file_(file) {}

  ChromeStatus learn_flows(const std::string& path) {
    std::unordered_map<std::string, uint8_t> ends;  // flow id -> 1 start inside, 2 finish inside
    ChromeDocInfo info;
    ChromeStatus st = parse_chrome_file(
        path,
        [&](const ChromeEventView& e) {
          if (is_flow(e.ph) && e.has_ts && file_.keeps_time(e.ts_ns, 0))
            ends[std::string(e.id.text)] |= e.ph == 'f' ? 2 : 1;
          return true;
        },
        info);
    for (const auto& [id, mask] : ends)
      if (mask == 3) both_.insert(id);
    return st;
  }

  bool keeps(const ChromeEventView& e) const {
    if (e.ph == 'M' || !e.has_ts) return true;  // names and sort orders, and whatever has no time
    if (is_flow(e.ph)) return both_.count(std::string(e.id.text)) > 0;
    return file_.keeps_time(e.ts_ns, e.has_dur ? e.dur_ns : 0);
  }

 private:
  const KinetoRankFile& file_;
  std::unordered_set<std::string> both_;
};

// One rank's file, event by event, onto the merged document.
class RankRewriter {
 public:
  RankRewriter(JsonOut& o, ExportStats& stats, int rank, int64_t shift_ns, const FlowFilter* window)
      : o_(o), stats_(stats), rank_(rank), shift_ns_(shift_ns), window_(window) {}

  bool operator()(const ChromeEventView& e) {
    if (e.ph == 0) return true;  // not an event any viewer draws
    if (window_ && !window_->keeps(e)) return true;
    const uint64_t pid = pid_of(e);
    if (e.ph == 'M' && e.name == "process_sort_index") return true;  // ours replaces it (pid_of wrote it)
    o_.raw(",\n{");
    field("ph", true);
    o_.str(std::string_view(&e.ph, 1));
    if (!e.name.empty()) {
      field("name");
      o_.str(e.name);
    }
    if (!e.cat.empty()) {
      field("cat");
      o_.str(e.cat);
    }
    field("pid");
    o_.unum(pid);
    if (e.tid.type != ChromeValue::absent) {
      field("tid");
      value(e.tid);
    }
    if (e.has_ts) {
      field("ts");
      o_.micros(e.ts_ns + shift_ns_);
    }
    if (e.has_dur) {
      field("dur");
      o_.micros(e.dur_ns);
    }
    if (e.id.type != ChromeValue::absent) {
      field("id");
      flow_id(e.id);
    }
    if (!e.bp.empty()) {
      field("bp");
      o_.str(e.bp);
    }
    if (!e.scope.empty()) {
      field("s");
      o_.str(e.scope);
    }
    if (e.arg_count) {
      field("args");
      o_.ch('{');
      for (size_t i = 0; i < e.arg_count; ++i) {
        if (i) o_.ch(',');
        o_.str(e.args[i].key);
        o_.ch(':');
        if (e.ph == 'M' && e.name == "process_name" && e.args[i].key == "name")
          o_.str("rank " + std::to_string(rank_) + " · " + std::string(e.args[i].value.text));
        else
          value(e.args[i].value);
      }
      o_.ch('}');
    }
    o_.ch('}');
    if (e.ph != 'M') ++stats_.events;
    if (e.ph == 'f') ++stats_.flows;
    return true;
  }

 private:
  // Keys and separators as every export writes them (traces/base/json_out.h); the values are the file's own.
  void field(std::string_view k, bool first = false) { event_key(o_, EventLayout::chrome, k, first); }

  void value(const ChromeValue& v) {
    if (v.type == ChromeValue::string)
      o_.str(v.text);
    else if (v.type == ChromeValue::absent)
      o_.raw("null");
    else
      o_.raw(v.text);  // numbers, booleans, null and nested JSON as their source text
  }

  // Flow and async ids tie events of one file together; two ranks' files reuse the same small ids (correlation ids).
  void flow_id(const ChromeValue& id) {
    int64_t n = 0;
    if (id.type == ChromeValue::number && parse_decimal(id.text, n) && n >= 0 && n < (int64_t{1} << 32)) {
      o_.unum(kFlowIdBase | (static_cast<uint64_t>(rank_) << 32) | static_cast<uint64_t>(n));
    } else {
      o_.str("rank" + std::to_string(rank_) + ":" + std::string(id.text));
    }
  }

  // The merged pid of the file's process; on first sight, its sort index (and a name, in case the file has none).
  uint64_t pid_of(const ChromeEventView& e) {
    // Events of one process come in runs: the last answer saves a string and a hash lookup per event.
    if (last_pid_ && e.pid.key() == last_key_) return last_pid_;
    last_key_.assign(e.pid.key());
    last_pid_ = lookup_pid(e);
    return last_pid_;
  }

  uint64_t lookup_pid(const ChromeEventView& e) {
    const std::string& key = last_key_;
    auto it = pids_.find(key);
    if (it != pids_.end()) return it->second;
    const uint64_t k = std::min<uint64_t>(pids_.size(), kPidsPerRank - 1);
    const uint64_t pid = kFilePidBase + static_cast<uint64_t>(rank_) * kPidsPerRank + k;
    pids_.emplace(key, pid);
    o_.raw(",\n");
    metadata_event(o_, EventLayout::chrome, "process_sort_index", static_cast<int64_t>(pid), kNoTid, "sort_index",
                   static_cast<int64_t>(pid));
    if (!(e.ph == 'M' && e.name == "process_name")) {
      o_.raw(",\n");
      metadata_event(o_, EventLayout::chrome, "process_name", static_cast<int64_t>(pid), kNoTid, "name",
                     std::string_view("rank " + std::to_string(rank_) + " · process " + key));
    }
    return pid;
  }

  JsonOut& o_;
  ExportStats& stats_;
  const int rank_;
  const int64_t shift_ns_;
  const FlowFilter* window_;  // null: every event
  std::unordered_map<std::string, uint64_t> pids_;
  std::string last_key_;
  uint64_t last_pid_ = 0;  // 0: none yet (merged pids start at kFilePidBase)
};

}  // namespace

bool export_kineto_merged(const RunTrace& run, const std::string& path, ExportStats& stats, std::string& error) {
  if (!is_kineto_run(run)) {
    error = "not a run loaded from PyTorch profiler traces";
    return false;
  }
  std::string reread_error;
  auto append_files = [&](JsonOut& o) {
    for (const KinetoRankFile& f : kineto_rank_files(run, run.origin_ns())) {
      std::optional<FlowFilter> window;
      if (f.windowed) window.emplace(f);
      ChromeStatus st = window ? window->learn_flows(f.path) : ChromeStatus{};
      RankRewriter rewrite(o, stats, f.rank, f.shift_ns, window ? &*window : nullptr);
      ChromeDocInfo info;
      if (st.ok() || st.error == ChromeError::truncated) st = parse_chrome_file(f.path, std::ref(rewrite), info);
      const bool as_loaded = st.error == ChromeError::truncated && f.cut_off;  // its events up to the cut
      if (!st.ok() && !as_loaded) {  // it was read once already: the file changed or vanished since
        reread_error = f.path + ": " + st.message;
        return false;
      }
    }
    return true;
  };
  const bool written = export_chrome(run, path, stats, error, append_files);
  if (!reread_error.empty()) error = reread_error;  // the cause, not the abandoned write it led to
  return written && reread_error.empty();
}

}  // namespace ddp
