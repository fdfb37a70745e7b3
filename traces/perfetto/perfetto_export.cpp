#include "traces/perfetto/perfetto_export.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "traces/base/atomic_file.h"
#include "traces/model/batch_handoffs.h"
#include "traces/model/cuda_names.h"
#include "traces/perfetto/proto_writer.h"

namespace ddp {
namespace {

// Field numbers of perfetto/trace/perfetto_trace.proto (the published schema the tests decode with).
namespace f {
constexpr uint32_t kTracePacket = 1;  // Trace.packet
// TracePacket
constexpr uint32_t kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInternedData = 12, kSequenceFlags = 13,
                   kTrackDescriptor = 60;
constexpr uint32_t kIncrementalStateCleared = 1, kNeedsIncrementalState = 2;  // sequence_flags
// TrackDescriptor
constexpr uint32_t kUuid = 1, kName = 2, kProcess = 3, kThread = 4, kParentUuid = 5, kCounter = 8;
// ProcessDescriptor / ThreadDescriptor
constexpr uint32_t kPid = 1, kProcessName = 6, kTid = 2, kThreadName = 5;
// CounterDescriptor
constexpr uint32_t kUnit = 3, kUnitCount = 2, kUnitSizeBytes = 3;
// TrackEvent
constexpr uint32_t kDebugAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11, kCounterValue = 30, kFlowIds = 47,
                   kTerminatingFlowIds = 48;
constexpr uint32_t kSliceBegin = 1, kSliceEnd = 2, kCounterType = 4;
// DebugAnnotation
constexpr uint32_t kAnnotationNameIid = 1, kUintValue = 3;
// InternedData
constexpr uint32_t kEventNames = 2, kDebugAnnotationNames = 3;
constexpr uint32_t kIid = 1, kInternedName = 2;  // EventName and DebugAnnotationName
}  // namespace f

// Debug annotation names, interned in each sequence's first packet.
constexpr uint64_t kStepIid = 1, kBucketIid = 2, kOnCpuIid = 3, kWaitingIid = 4, kBlockedIid = 5;

// Track uuids: unique across ranks, so one rank per file merges with the others into one trace.
// Small numbers: every slice's begin and end carry one (a varint of 2 bytes up to rank 31, 3 up to rank 4095).
uint64_t process_uuid(uint32_t rank) { return (uint64_t{rank} + 1) << 9; }
uint64_t lane_uuid(uint32_t rank, uint8_t lane) { return process_uuid(rank) + 1 + lane; }
uint64_t counter_uuid(uint32_t rank, uint32_t counter) { return process_uuid(rank) + 257 + counter; }

// Flow ids: launch arrows as the Chrome export numbers them; gradient arrows in their own range.
uint64_t launch_flow(uint32_t rank, uint32_t correlation) { return (uint64_t{rank} << 32) | correlation; }
uint64_t bucket_flow(uint32_t rank, size_t event) { return (uint64_t{1} << 63) | (uint64_t{rank} << 40) | event; }
uint64_t batch_flow(uint32_t rank, size_t event) { return (uint64_t{1} << 62) | (uint64_t{rank} << 40) | event; }

class RankWriter {
 public:
  RankWriter(const RankTrace& r, int64_t shift, uint32_t seq, PerfettoExportStats& stats)
      : r_(r), shift_(shift), seq_(seq), stats_(stats), names_(cuda_event_names(r)) {}

  std::string run() {
    describe_tracks();
    link_flows();
    for (uint8_t lane = 0; lane < r_.lanes.size() || (lane == 0 && r_.lanes.empty()); ++lane) {
      emit_lane(lane);
      if (lane == 255) break;
    }
    for (size_t i = 0; i < r_.events.size(); ++i)
      if (!r_.events[i].is_span()) emit_counter(r_.events[i]);
    return std::move(out_);
  }

 private:
  // One packet: fills its body with `fill`, adds the names first used in it as interned data.
  template <typename Fill>
  void packet(int64_t ts, bool with_ts, uint32_t flags, Fill&& fill) {
    proto::Nested p(out_, f::kTracePacket);
    std::string& b = p.body();
    if (with_ts) proto::uint_field(b, f::kTimestamp, static_cast<uint64_t>(std::max<int64_t>(ts, 0)));
    proto::uint_field(b, f::kSequenceId, seq_);
    fresh_.clear();
    fill(b);
    if (!fresh_.empty()) {
      proto::Nested interned(b, f::kInternedData);
      for (const auto& [iid, name] : fresh_) {
        proto::Nested n(interned.body(), f::kEventNames);
        proto::uint_field(n.body(), f::kIid, iid);
        proto::bytes_field(n.body(), f::kInternedName, name);
      }
    }
    if (flags) proto::uint_field(b, f::kSequenceFlags, flags);  // an end or a counter depends on no interned state
  }

  uint64_t name_iid(std::string_view name) {
    auto it = iids_.find(std::string(name));
    if (it != iids_.end()) return it->second;
    const uint64_t iid = iids_.size() + 1;
    iids_.emplace(std::string(name), iid);
    fresh_.emplace_back(iid, std::string(name));
    return iid;
  }

  void describe_tracks() {
    const std::string host = r_.meta.count("host") ? r_.meta.at("host") : std::string();
    std::string pname = "rank " + std::to_string(r_.rank) + (host.empty() ? "" : " (" + host + ")");
    if (!r_.complete) pname += " [ended early]";
    // The first packet clears the sequence's interned state and names the annotations every slice uses.
    packet(0, false, f::kIncrementalStateCleared, [&](std::string& b) {
      proto::Nested td(b, f::kTrackDescriptor);
      proto::uint_field(td.body(), f::kUuid, process_uuid(r_.rank));
      proto::Nested pd(td.body(), f::kProcess);
      proto::int_field(pd.body(), f::kPid, r_.rank);
      proto::bytes_field(pd.body(), f::kProcessName, pname);
      pd.close();
      td.close();
      proto::Nested interned(b, f::kInternedData);
      std::vector<std::pair<uint64_t, const char*>> names = {{kStepIid, "step"}, {kBucketIid, "bucket"}};
      if (!r_.cpu.empty())  // the CPU split's names, for a rank whose spans carry one
        names.insert(names.end(),
                     {{kOnCpuIid, kOnCpuArg}, {kWaitingIid, kWaitingForCpuArg}, {kBlockedIid, kBlockedArg}});
      for (auto [iid, name] : names) {
        proto::Nested n(interned.body(), f::kDebugAnnotationNames);
        proto::uint_field(n.body(), f::kIid, iid);
        proto::bytes_field(n.body(), f::kInternedName, name);
      }
    });
    for (size_t lane = 0; lane < r_.lanes.size() && lane < 256; ++lane)
      packet(0, false, f::kNeedsIncrementalState, [&](std::string& b) {
        proto::Nested td(b, f::kTrackDescriptor);
        proto::uint_field(td.body(), f::kUuid, lane_uuid(r_.rank, static_cast<uint8_t>(lane)));
        proto::uint_field(td.body(), f::kParentUuid, process_uuid(r_.rank));
        proto::Nested t(td.body(), f::kThread);
        proto::int_field(t.body(), f::kPid, r_.rank);
        proto::int_field(t.body(), f::kTid, static_cast<int64_t>(r_.rank) * 1000 + static_cast<int64_t>(lane) + 1);
        proto::bytes_field(t.body(), f::kThreadName, r_.lanes[lane]);
      });
  }

  // Which event each flow leaves from and arrives at: a CUDA launch's API call -> its GPU work; the backward span
  // that produced a gradient bucket -> that bucket's allreduce (the latest backward of the same step started before
  // it); the loader span that finished a batch -> the main thread's wait for it.
  void link_flows() {
    for (const auto& [from, to] : batch_handoffs(r_)) {
      const uint64_t id = batch_flow(r_.rank, to);
      out_flows_[from].push_back(id);
      in_flows_[to].push_back(id);
      ++stats_.flows;
    }
    const CudaLaunches launches = cuda_launches(r_);
    std::unordered_map<const Event*, size_t> index;
    for (size_t i = 0; i < r_.events.size(); ++i) index[&r_.events[i]] = i;
    std::vector<size_t> backwards;
    for (size_t i = 0; i < r_.events.size(); ++i)
      if (r_.events[i].is_span() && r_.events[i].stage_id() == Stage::backward && !r_.events[i].is_cuda())
        backwards.push_back(i);
    std::sort(backwards.begin(), backwards.end(),
              [&](size_t a, size_t b) { return r_.events[a].t0 < r_.events[b].t0; });
    for (size_t i = 0; i < r_.events.size(); ++i) {
      const Event& e = r_.events[i];
      if (!e.is_span()) continue;
      if (is_gpu_activity(e.stage_id()) && e.correlation_id()) {
        auto it = launches.find(e.correlation_id());
        if (it == launches.end()) continue;
        const uint64_t id = launch_flow(r_.rank, e.correlation_id());
        out_flows_[index[it->second]].push_back(id);
        in_flows_[i].push_back(id);
        ++stats_.flows;
      } else if (e.stage_id() == Stage::allreduce && !e.is_cuda() && e.bucket_index() != kNoBucket) {
        auto after = std::upper_bound(backwards.begin(), backwards.end(), e.t0,
                                      [&](int64_t t, size_t b) { return t < r_.events[b].t0; });
        if (after == backwards.begin()) continue;
        const size_t from = *std::prev(after);
        if (r_.events[from].step != e.step) continue;
        const uint64_t id = bucket_flow(r_.rank, i);
        out_flows_[from].push_back(id);
        in_flows_[i].push_back(id);
        ++stats_.flows;
      }
    }
  }

  std::string_view name_of(const Event& e) const {
    return e.is_cuda() ? cuda_event_name(e, names_) : stage_name(e.stage_id());
  }

  void begin(const Event& e, size_t i, int64_t t0) {
    packet(t0 + shift_, true, f::kNeedsIncrementalState, [&](std::string& b) {
      proto::Nested te(b, f::kTrackEvent);
      std::string& t = te.body();
      proto::uint_field(t, f::kType, f::kSliceBegin);
      proto::uint_field(t, f::kTrackUuid, lane_uuid(r_.rank, e.lane));
      proto::uint_field(t, f::kNameIid, name_iid(name_of(e)));
      if (e.stage_id() == Stage::step) {  // the spans inside a step are nested in its slice: its number is said once
        proto::Nested a(t, f::kDebugAnnotations);
        proto::uint_field(a.body(), f::kAnnotationNameIid, kStepIid);
        proto::uint_field(a.body(), f::kUintValue, e.step);
      }
      if (!e.is_cuda() && e.stage_id() == Stage::allreduce && e.bucket_index() != kNoBucket) {
        proto::Nested a(t, f::kDebugAnnotations);
        proto::uint_field(a.body(), f::kAnnotationNameIid, kBucketIid);
        proto::uint_field(a.body(), f::kUintValue, e.bucket_index());
      }
      if (const SpanCpu* c = r_.cpu_of(i)) {  // where the slice's wall time went (traces/model/span_cpu.h)
        auto annotate = [&](uint64_t iid, uint64_t us) {
          proto::Nested a(t, f::kDebugAnnotations);
          proto::uint_field(a.body(), f::kAnnotationNameIid, iid);
          proto::uint_field(a.body(), f::kUintValue, us);
        };
        annotate(kOnCpuIid, c->cpu_us);
        if (c->wait_known()) annotate(kWaitingIid, c->wait_us);
        annotate(kBlockedIid, blocked_us(*c, e.duration()));
      }
      if (auto it = out_flows_.find(i); it != out_flows_.end())
        for (uint64_t id : it->second) proto::fixed64_field(t, f::kFlowIds, id);
      if (auto it = in_flows_.find(i); it != in_flows_.end())
        for (uint64_t id : it->second) proto::fixed64_field(t, f::kTerminatingFlowIds, id);
    });
    ++stats_.slices;
  }

  void end(uint8_t lane, int64_t t1) {
    packet(t1 + shift_, true, 0, [&](std::string& b) {
      proto::Nested te(b, f::kTrackEvent);
      proto::uint_field(te.body(), f::kType, f::kSliceEnd);
      proto::uint_field(te.body(), f::kTrackUuid, lane_uuid(r_.rank, lane));
    });
  }

  // A thread track is a stack: its spans in start order (the longer first at a tie), each ended before the next
  // one that starts after it, and one that outlasts its enclosing span ended with it (counted as clipped).
  void emit_lane(uint8_t lane) {
    std::vector<size_t> spans;
    for (size_t i = 0; i < r_.events.size(); ++i)
      if (r_.events[i].is_span() && r_.events[i].lane == lane) spans.push_back(i);
    std::stable_sort(spans.begin(), spans.end(), [&](size_t a, size_t b) {
      const Event &x = r_.events[a], &y = r_.events[b];
      return x.t0 != y.t0 ? x.t0 < y.t0 : x.t1 > y.t1;
    });
    std::vector<int64_t> open;  // end times, innermost last
    for (size_t i : spans) {
      const Event& e = r_.events[i];
      while (!open.empty() && open.back() <= e.t0) {
        end(lane, open.back());
        open.pop_back();
      }
      int64_t t1 = std::max(e.t1, e.t0);
      if (!open.empty() && t1 > open.back()) {
        t1 = open.back();
        ++stats_.clipped;
      }
      begin(e, i, e.t0);
      open.push_back(t1);
    }
    while (!open.empty()) {
      end(lane, open.back());
      open.pop_back();
    }
  }

  void emit_counter(const Event& e) {
    const uint32_t id = static_cast<uint32_t>(e.counter_id());
    const std::string_view name = counter_name(e.counter_id());
    if (counters_.emplace(id).second)
      packet(0, false, f::kNeedsIncrementalState, [&](std::string& b) {
        proto::Nested td(b, f::kTrackDescriptor);
        proto::uint_field(td.body(), f::kUuid, counter_uuid(r_.rank, id));
        proto::uint_field(td.body(), f::kParentUuid, process_uuid(r_.rank));
        proto::bytes_field(td.body(), f::kName, name);
        proto::Nested c(td.body(), f::kCounter);
        const bool bytes = name.size() > 6 && name.substr(name.size() - 6) == "_bytes";
        proto::uint_field(c.body(), f::kUnit, bytes ? f::kUnitSizeBytes : f::kUnitCount);
      });
    packet(e.t0 + shift_, true, 0, [&](std::string& b) {
      proto::Nested te(b, f::kTrackEvent);
      proto::uint_field(te.body(), f::kType, f::kCounterType);
      proto::uint_field(te.body(), f::kTrackUuid, counter_uuid(r_.rank, id));
      proto::int_field(te.body(), f::kCounterValue, static_cast<int64_t>(e.value));
    });
    ++stats_.counters;
  }

  const RankTrace& r_;
  int64_t shift_;
  uint32_t seq_;
  PerfettoExportStats& stats_;
  std::vector<std::string> names_;
  std::string out_;
  std::unordered_map<std::string, uint64_t> iids_;
  std::vector<std::pair<uint64_t, std::string>> fresh_;  // names interned by the packet being written
  std::unordered_map<size_t, std::vector<uint64_t>> out_flows_, in_flows_;
  std::set<uint32_t> counters_;
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A ustar member header for `size` bytes named `name` (under 100 bytes): what tar(1) and Perfetto read.
std::string tar_header(const std::string& name, uint64_t size) {
  std::string h(512, '\0');
  auto put = [&](size_t at, size_t width, const std::string& s) {
    h.replace(at, std::min(width, s.size()), s.substr(0, width));
  };
  auto octal = [](uint64_t v, size_t width) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(width - 1), static_cast<unsigned long long>(v));
    return std::string(buf);
  };
  put(0, 100, name);
  put(100, 8, octal(0644, 8));
  put(108, 8, octal(0, 8));
  put(116, 8, octal(0, 8));
  put(124, 12, octal(size, 12));
  put(136, 12, octal(0, 12));
  put(148, 8, std::string(8, ' '));  // the checksum counts its own field as spaces
  h[156] = '0';
  put(257, 6, std::string("ustar\0", 6));
  put(263, 2, "00");
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  put(148, 8, octal(sum, 7) + std::string(1, '\0'));
  return h;
}

bool write_all(FILE* f, const std::string& bytes) {
  return std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
}

}  // namespace

bool is_perfetto_archive_path(const std::string& path) { return ends_with(path, ".tar"); }

std::string perfetto_rank_packets(const RankTrace& rank, int64_t shift, uint32_t sequence, PerfettoExportStats& stats) {
  return RankWriter(rank, shift, sequence, stats).run();
}

bool export_perfetto(const RunTrace& run, const std::string& path, PerfettoExportStats& stats, std::string& error) {
  AtomicFile out(path);
  if (!out.is_open()) {
    error = out.open_error();
    return false;
  }
  const int64_t origin = run.origin_ns();
  const bool archive = is_perfetto_archive_path(path);
  nlohmann::json files = nlohmann::json::array();
  bool ok = true;
  for (const RankTrace& r : run.ranks) {
    const std::string packets = perfetto_rank_packets(r, r.clock_offset_ns() - origin, r.rank + 1, stats);
    if (!archive) {
      ok = ok && write_all(out.file(), packets);
      continue;
    }
    const std::string name = "rank" + std::to_string(r.rank) + ".pftrace";
    files.push_back({{"path", name}});
    ok = ok && write_all(out.file(), tar_header(name, packets.size())) && write_all(out.file(), packets) &&
         write_all(out.file(), std::string((512 - packets.size() % 512) % 512, '\0'));
    stats.files.push_back(path + ":" + name);
  }
  if (archive) {
    // Every rank's file is already on rank 0's clock: the manifest only lists them (docs/viewer.md).
    const std::string manifest =
        nlohmann::json{{"perfetto_manifest", {{"version", 1}, {"files", files}}}}.dump(2) + "\n";
    ok = ok && write_all(out.file(), tar_header("perfetto_manifest.json", manifest.size())) &&
         write_all(out.file(), manifest) &&
         write_all(out.file(), std::string((512 - manifest.size() % 512) % 512, '\0')) &&
         write_all(out.file(), std::string(1024, '\0'));
  } else {
    stats.files.push_back(path);
  }
  if (!ok) {
    error = path + ": write failed";
    return false;
  }
  if (!out.commit(error)) return false;
  std::error_code ec;
  stats.bytes = std::filesystem::file_size(path, ec);
  return true;
}

}  // namespace ddp
