#include "traces/native/datapath_import.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

#include "traces/model/records.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;
namespace {

// A process's files, as its header names it.
struct Process {
  records::datapath_process header;
  std::string events_path;
};

// rank<R>.p<pid>.json -> (R, pid); false for any other name.
bool parse_header_name(const std::string& name, int& rank, int64_t& pid) {
  if (name.rfind("rank", 0) != 0) return false;
  const size_t dot = name.find(".p", 4);
  if (dot == std::string::npos || name.size() < 5 || name.substr(name.size() - 5) != ".json") return false;
  try {
    size_t used = 0;
    rank = std::stoi(name.substr(4, dot - 4), &used);
    if (used != dot - 4) return false;
    const std::string p = name.substr(dot + 2, name.size() - 5 - dot - 2);
    pid = std::stoll(p, &used);
    return used == p.size() && rank >= 0;
  } catch (const std::exception&) {
    return false;
  }
}

// The events of one file, lanes renumbered into the rank's table; damage is noted and dropped.
void read_events(const Process& p, const std::vector<uint8_t>& lane_map, std::vector<Event>& out,
                 std::vector<std::string>& notes) {
  std::ifstream in(p.events_path, std::ios::binary);
  if (!in) {
    notes.push_back(p.events_path + ": missing (the process wrote its header only)");
    return;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t n = bytes.size() / sizeof(Event);
  if (bytes.size() % sizeof(Event))
    notes.push_back(p.events_path + ": ends inside an event (the process was killed mid-write); the last " +
                    std::to_string(bytes.size() % sizeof(Event)) + " bytes dropped");
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    Event e;
    std::memcpy(&e, bytes.data() + i * sizeof(Event), sizeof(Event));
    const bool known = e.kind == static_cast<uint8_t>(EventKind::counter)
                           ? e.stage < kCounterCount
                           : e.kind <= static_cast<uint8_t>(EventKind::cpu) && e.stage < kStageCount;
    if (!known || e.lane >= lane_map.size() || e.t1 < e.t0) {
      ++bad;
      continue;
    }
    e.lane = lane_map[e.lane];
    out.push_back(e);
  }
  if (bad) notes.push_back(p.events_path + ": " + std::to_string(bad) + " damaged event(s) dropped");
}

uint8_t lane_of(RankTrace& t, const std::string& name) {
  auto it = std::find(t.lanes.begin(), t.lanes.end(), name);
  if (it != t.lanes.end()) return static_cast<uint8_t>(it - t.lanes.begin());
  t.lanes.push_back(name);
  return static_cast<uint8_t>(t.lanes.size() - 1);
}

uint64_t batch_key(uint32_t pass, uint32_t batch) { return (static_cast<uint64_t>(pass) << 32) | batch; }

// Every loader span takes the step that consumed its batch (the main thread's wait_data for the same pass and
// batch); a batch never consumed takes the step running when it began.
void assign_loader_steps(RankTrace& t, uint8_t main_lane) {
  std::map<uint64_t, uint32_t> consumed;
  std::vector<std::pair<int64_t, uint32_t>> step_starts;
  for (const Event& e : t.events) {
    if (!e.is_span() || e.lane != main_lane) continue;
    if (e.stage_id() == Stage::wait_data) consumed.emplace(batch_key(e.epoch, e.item), e.step);
    if (e.stage_id() == Stage::step) step_starts.push_back({e.t0, e.step});
  }
  std::sort(step_starts.begin(), step_starts.end());
  for (Event& e : t.events) {
    if (!e.is_span() || !(stage_has(e.stage_id(), kStageLoaderThread) || e.stage_id() == Stage::worker_start)) continue;
    auto it = consumed.find(batch_key(e.epoch, e.item));
    if (it != consumed.end()) {
      e.step = it->second;
      continue;
    }
    auto s = std::upper_bound(step_starts.begin(), step_starts.end(), std::make_pair(e.t0, UINT32_MAX));
    e.step = s == step_starts.begin() ? 0 : std::prev(s)->second;
  }
}

bool read_headers(const std::string& run_dir, std::map<int, std::vector<Process>>& by_rank, std::string& error) {
  std::error_code ec;
  const std::string dir = in_run(run_dir, kDatapathDir);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int rank = 0;
    int64_t pid = 0;
    if (!parse_header_name(name, rank, pid)) continue;
    Process p;
    if (!read_record_file(entry.path().string(), p.header, error)) return false;
    if (p.header.rank != rank || p.header.pid != pid) {
      error = entry.path().string() + ": its rank and pid (" + std::to_string(p.header.rank) + ", " +
              std::to_string(p.header.pid) + ") are not its name's";
      return false;
    }
    if (p.header.lanes.size() > 255) {
      error = entry.path().string() + ": more than 255 lanes";
      return false;
    }
    p.events_path = in_run(run_dir, datapath_events_file(rank, pid));
    by_rank[rank].push_back(std::move(p));
  }
  if (ec) {
    error = "cannot read " + dir + ": " + ec.message();
    return false;
  }
  return true;
}

// The rank's training process: the one that found the training loader, else the one with a clock, else the first.
const Process* training_process(const std::vector<Process>& procs) {
  const Process* best = nullptr;
  int best_score = -1;
  for (const Process& p : procs) {
    if (p.header.role != "main") continue;
    const int score = (p.header.train_loader ? 2 : 0) + (p.header.clock_offset_ns ? 1 : 0);
    if (score > best_score) best = &p, best_score = score;
  }
  return best;
}

// The Compose steps' totals of the rank's processes (the training process, the training loader's workers), as meta
// "transform_step/<class>" = ns: the analysis says which step of a slow transform costs what.
void add_transform_steps(RankTrace& t, const Process& main, const std::vector<Process>& procs,
                         const std::optional<int64_t>& train) {
  std::map<std::string, int64_t> ns;
  for (const Process& p : procs) {
    const bool mine = &p == &main || (train && p.header.role == "worker" && p.header.loader == train);
    if (!mine || !p.header.transform_steps) continue;
    for (const auto& [name, v] : *p.header.transform_steps)
      if (v > 0) ns[name] += v;
  }
  for (const auto& [name, total] : ns) t.meta[std::string(kTransformStepMeta) + name] = std::to_string(total);
}

// The rank's events by start time (its processes' files read one after another), each split following its span.
void sort_by_start(RankTrace& t) {
  std::vector<uint32_t> order(t.events.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return t.events[a].t0 < t.events[b].t0; });
  std::vector<Event> sorted(t.events.size());
  std::vector<uint32_t> moved_to(t.events.size());
  for (uint32_t k = 0; k < order.size(); ++k) {
    sorted[k] = t.events[order[k]];
    moved_to[order[k]] = k;
  }
  t.events = std::move(sorted);
  for (SpanCpu& c : t.cpu) c.event = moved_to[c.event];
  std::sort(t.cpu.begin(), t.cpu.end(), [](const SpanCpu& a, const SpanCpu& b) { return a.event < b.event; });
}

bool build_rank(int rank, const std::vector<Process>& procs, RankTrace& t, std::vector<std::string>& notes) {
  const Process* main = training_process(procs);
  if (main == nullptr) return false;
  t.rank = static_cast<uint32_t>(rank);
  t.complete = true;
  t.meta["source"] = "companion";
  std::vector<uint8_t> map;
  for (const auto& l : main->header.lanes) map.push_back(lane_of(t, l));
  read_events(*main, map, t.events, notes);
  const std::optional<int64_t> train = main->header.train_loader;
  size_t other_loaders = 0;
  for (const Process& p : procs) {
    if (&p == main) continue;
    if (p.header.role != "worker") {
      notes.push_back("rank " + std::to_string(rank) + ": another training process (pid " +
                      std::to_string(p.header.pid) + ") left out");
      continue;
    }
    if (!train || p.header.loader != train) {
      ++other_loaders;
      continue;
    }
    map.clear();
    for (const auto& l : p.header.lanes) map.push_back(lane_of(t, l));
    read_events(p, map, t.events, notes);
  }
  add_transform_steps(t, *main, procs, train);
  if (other_loaders)
    notes.push_back("rank " + std::to_string(rank) + ": " + std::to_string(other_loaders) +
                    " worker process(es) of loaders other than the training loader left out");
  t.cpu = take_cpu_events(t.events);  // each process's cpu events follow their spans in its own file
  assign_loader_steps(t, lane_of(t, "main"));
  sort_by_start(t);
  if (main->header.clock_offset_ns) {
    format::ClockPayload c{};
    c.offset_ns = *main->header.clock_offset_ns;
    c.uncertainty_ns = main->header.clock_uncertainty_ns.value_or(0);
    c.phase = 0;
    c.rounds = static_cast<uint32_t>(main->header.clock_rounds.value_or(0));
    t.clocks.push_back(c);
  }
  return true;
}

}  // namespace

bool has_datapath(const std::string& run_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(in_run(run_dir, kDatapathDir), ec)) {
    int rank = 0;
    int64_t pid = 0;
    if (parse_header_name(e.path().filename().string(), rank, pid)) return true;
  }
  return false;
}

bool import_datapath(const std::string& run_dir, DatapathRun& out, std::string& error) {
  out = DatapathRun{};
  std::map<int, std::vector<Process>> by_rank;
  if (!read_headers(run_dir, by_rank, error)) return false;
  for (const auto& [rank, procs] : by_rank) {
    RankTrace t;
    if (build_rank(rank, procs, t, out.notes))
      out.ranks.push_back(std::move(t));
    else
      out.notes.push_back("rank " + std::to_string(rank) + ": only DataLoader workers recorded (no training process)");
  }
  if (out.ranks.empty()) {
    error = in_run(run_dir, kDatapathDir) + ": no rank's training process recorded its data path";
    return false;
  }
  return true;
}

}  // namespace ddp
