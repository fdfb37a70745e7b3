// load_kineto_run: which files, whose rank, read in parallel, each built into a RankTrace, then put on one clock.
#include "traces/kineto/kineto_import.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <thread>

#include "traces/base/rank_set.h"
#include "traces/base/stats.h"
#include "traces/base/text_format.h"
#include "traces/kineto/kineto_align.h"
#include "traces/kineto/kineto_build.h"
#include "traces/kineto/kineto_cycles.h"
#include "traces/kineto/kineto_digest.h"
#include "traces/kineto/kineto_file.h"

namespace ddp {
namespace fs = std::filesystem;
using namespace kineto_detail;

namespace {

// A file a folder holds that the importer reads: a profiler trace or a digest of one (kineto_digest.h).
bool is_input_file_name(const std::string& name) {
  return (is_trace_file_name(name) && !is_run_folder_file(name)) || is_digest_file_name(name);
}

}  // namespace

namespace kineto_detail {

// The trace files (and digests) the inputs name, in a stable order.
bool list_trace_files(const std::vector<std::string>& inputs, std::vector<std::string>& files, std::string& error) {
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(in, ec))
        if (e.is_regular_file(ec) && is_input_file_name(e.path().filename().string()))
          found.push_back(e.path().string());
      if (found.empty()) {
        error = in + ": no trace files (*.json, *.json.gz), no digests (*" + kDigestSuffix +
                ") and no rank<R>.ddpt in this folder";
        return false;
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(in, ec)) {
      files.push_back(in);
    } else {
      error = in + ": no such file or folder";
      return false;
    }
  }
  return true;
}

std::vector<KFile> read_trace_files(const std::vector<std::string>& files, const KinetoStageMap& map,
                                    const KinetoFileEvents* each_file) {
  std::vector<KFile> out(files.size());
  // The callers' callbacks are made here, in file order, so that whatever they keep per file is made on one thread.
  std::vector<ChromeEventFn> also(each_file ? files.size() : 0);
  for (size_t i = 0; i < also.size(); ++i) also[i] = (*each_file)(files[i]);
  // One map per reader thread: the map caches its answers and is not shared between threads.
  const size_t n = std::min<size_t>(files.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  auto work = [&] {
    KinetoStageMap mine = map;
    for (size_t i = next++; i < files.size(); i = next++)
      out[i] = is_digest_file_name(files[i])
                   ? read_digest(files[i])
                   : read_kineto_file(files[i], mine, also.empty() || !also[i] ? nullptr : &also[i]);
  };
  std::vector<std::thread> pool;
  for (size_t i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace kineto_detail

namespace {

// Which ranks were read from digests: their numbers are the traces', their other events are not at hand.
std::string digests_note(const std::vector<KFile>& files, int world) {
  std::vector<int> ranks;
  for (const KFile& f : files)
    if (!f.digest.empty() && f.status.ok()) ranks.push_back(f.rank);
  if (ranks.empty()) return {};
  return describe_ranks(ranks, world) + " read from digests (ddp_profile --digest, made where the traces lie)";
}

// "0-33, 35-299"
std::string ranges(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(v[i]) + (j > i ? "-" + std::to_string(v[j]) : "");
    i = j + 1;
  }
  return out;
}

// Checks that every readable file says who it is and that the files agree; damaged files become problems.
bool check_identity(std::vector<KFile>& files, int& world, std::vector<std::string>& problems, std::string& error) {
  std::map<int, const KFile*> by_rank;
  const KFile* world_from = nullptr;
  world = -1;
  for (const KFile& f : files) {
    if (!f.status.ok()) continue;
    if (f.rank < 0) {
      error = f.path +
              ": cannot tell which rank wrote it: the trace has no distributedInfo.rank (PyTorch writes it "
              "when torch.distributed is initialised before profiling) and its name has no rank<R>, "
              "rank-<R> or rank_<R>; rename it, e.g. rank0.pt.trace.json";
      return false;
    }
    auto [it, fresh] = by_rank.emplace(f.rank, &f);
    if (!fresh) {
      error = "two traces claim rank " + std::to_string(f.rank) + ": " + it->second->path + " and " + f.path;
      return false;
    }
    if (f.world > 0) {
      if (world_from && world_from->world != f.world) {
        error = "world sizes disagree: " + world_from->path + " says " + std::to_string(world_from->world) + ", " +
                f.path + " says " + std::to_string(f.world);
        return false;
      }
      world_from = &f;
      world = f.world;
    }
  }
  for (const KFile& f : files) {
    if (f.status.ok()) continue;
    int rank = -1;
    std::string who = rank_from_file_name(f.name, rank) ? "rank " + std::to_string(rank) : std::string("a rank");
    // The message starts with the error's name, and names the file itself when the file could not be read.
    problems.push_back(who + " not loaded: " +
                       (chrome_error_names_file(f.status.error) ? f.status.message : f.path + ": " + f.status.message));
  }
  if (by_rank.empty()) {
    error = "no trace could be read";
    for (const std::string& p : problems) error += "\n  " + p;
    return false;
  }
  if (world < 0) world = by_rank.rbegin()->first + 1;
  // A rank outside the world (a typo in a file name, or a trace from another job) is named, not padded with
  // millions of "missing" ranks.
  if (by_rank.rbegin()->first >= world || world > static_cast<int>(kMaxWorldSize)) {
    const KFile* f = by_rank.rbegin()->second;
    error = f->path + " claims rank " + std::to_string(f->rank) + " of a world of " + std::to_string(world) +
            (world_from ? " (" + world_from->path + ")" : "");
    return false;
  }
  std::vector<int> missing;
  for (int r = 0; r < world; ++r)
    if (!by_rank.count(r)) missing.push_back(r);
  if (!missing.empty())
    problems.push_back(fmt("%s %s missing: no readable trace (world size %d)", missing.size() == 1 ? "rank" : "ranks",
                           ranges(missing).c_str(), world));
  return true;
}

// "kineto schema 1", "kineto" (no schemaVersion) or "legacy array" (PyTorch 1.x's autograd profiler).
std::string format_of(const KFile& f) {
  if (f.array_format) return "legacy array";
  return f.schema_version >= 0 ? "kineto schema " + std::to_string(f.schema_version) : "kineto";
}

// Ranks profiled by different PyTorch versions: the stage names each writes are mapped alike, but what one version
// records and another does not (record_param_comms, distributedInfo, the DataLoader's span) can differ per rank.
std::string mixed_formats_note(const std::map<std::string, std::vector<int>>& formats) {
  std::string list;
  for (const auto& [format, ranks] : formats)
    list += (list.empty() ? "" : "; ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") + ranges(ranks) + ": " +
            format;
  return "the ranks' traces come from different PyTorch profilers (" + list +
         "): each is mapped by its own names, but a stage one version records and another does not (message "
         "sizes, the DataLoader's span) can differ between ranks for that reason alone";
}

records::clock_alignment alignment_record(const ClockEstimate& e) {
  records::clock_alignment a;
  a.rank = e.rank;
  a.offset_ms = e.offset_ns / 1e6;
  a.uncertainty_ms = e.mad_ns / 1e6;
  a.uncertainty = "median absolute deviation of the end-time differences";
  a.collectives = static_cast<int64_t>(e.matched);
  a.measured = e.measured;
  a.clamped_to_bounds = e.clamped;
  if (e.bounded) a.bounds_ms = std::vector<double>{e.min_ns / 1e6, e.max_ns / 1e6};
  return a;
}

// What a CPU-side Kineto trace of the training process cannot show; said, not guessed.
std::vector<std::string> limits_of(const RunTrace& run) {
  bool wait_data = false, wait_comm = false;
  for (const RankTrace& r : run.ranks)
    for (const Event& e : r.events) {
      wait_data |= e.is_span() && e.stage_id() == Stage::wait_data;
      wait_comm |= e.is_span() && e.stage_id() == Stage::wait_comm;
    }
  std::vector<std::string> notes;
  if (wait_data)
    notes.push_back(
        "DataLoader worker processes are not in a trace of the training process: wait_data is how long "
        "the main thread waited for a batch; whether disk reads or transforms inside the workers were slow "
        "cannot be seen (profile the workers, or time the Dataset, to tell)");
  if (wait_comm)
    notes.push_back(
        "wait_comm is derived: the main thread records nothing while it waits for DDP's allreduces; it "
        "is the time from the end of backward to the end of the step's last collective");
  return notes;
}

}  // namespace

bool is_run_folder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  // Ours: native rank traces, or a manifest without profiler traces (a run that ended before writing any). A folder
  // with a manifest and per-rank profiler traces is a user's job recorded by `--record -- LAUNCH` (docs/python.md).
  bool manifest = false, profiler_traces = false;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    if (is_rank_trace_file(name)) return true;
    manifest |= name == kManifestFile;
    profiler_traces |= is_trace_file_name(name) && !is_run_folder_file(name);
  }
  return manifest && !profiler_traces;
}

bool is_kineto_input(const std::vector<std::string>& inputs) {
  if (inputs.size() != 1) return inputs.size() > 1;
  std::error_code ec;
  const std::string& p = inputs.front();
  if (fs::is_regular_file(p, ec)) return true;
  if (!fs::is_directory(p, ec) || is_run_folder(p)) return false;
  for (const auto& e : fs::directory_iterator(p, ec))
    if (is_input_file_name(e.path().filename().string())) return true;
  return false;
}

bool load_kineto_run(const std::vector<std::string>& inputs, const KinetoStageMap& map, RunTrace& run,
                     std::string& error, int cycle, const KinetoFileEvents* each_file) {
  run = RunTrace{};
  run.dir = inputs.empty() ? std::string() : inputs.front();
  std::vector<std::string> paths;
  if (!list_trace_files(inputs, paths, error)) return false;
  if (each_file)  // the viewer's timeline is built from every event: a digest keeps only the stage spans
    for (const std::string& p : paths)
      if (is_digest_file_name(p)) {
        error = p +
                ": a digest (ddp_profile --digest) holds only what --analyze and --summary read; open the "
                "traces it was made from";
        return false;
      }
  std::vector<KFile> files = read_trace_files(paths, map, each_file);
  nlohmann::json cycles;
  std::string cycles_note;
  if (!group_cycles(files, cycle, cycles, cycles_note, error)) return false;
  int world = 0;
  if (!check_identity(files, world, run.problems, error)) return false;

  std::vector<BuiltRank> built;
  KinetoImportReport report;
  std::vector<std::string>& notes = report.notes;
  std::set<std::string> backends;                   // what the files' distributedInfo say; kept when they agree
  std::map<std::string, std::vector<int>> formats;  // format -> the ranks whose files have it
  for (const KFile& f : files) {
    if (!f.status.ok()) continue;
    if (!f.backend.empty()) backends.insert(f.backend);
    built.push_back(build_rank(f, world));
    auto file_entry = [&](const std::string& path, uint64_t events, bool cut_off, int64_t base_ns) {
      report.files.push_back({f.rank, path, base_ns, f.rank_from, format_of(f), events, cut_off, f.digest});
      if (cut_off)
        run.problems.push_back("rank " + std::to_string(f.rank) + ": " + path + " is cut off (" + f.cut_off.message +
                               "): the job was killed while the profiler wrote it? Its events before the cut are "
                               "read, its last step left out");
    };
    const bool cut_off = f.cut_off.error != ChromeError::none;
    if (cycles.empty()) file_entry(f.path, f.events, cut_off, f.base_ns);
    for (const auto& c : cycles)  // a rank's cycles were merged into f: each of its files is listed
      if (c["selected"].get<bool>())
        for (const auto& cf : c["files"])
          if (cf["rank"].get<int>() == f.rank)
            file_entry(cf["file"].get<std::string>(), cf["events"].get<uint64_t>(), cf["cut_off"].get<bool>(),
                       cf["base_ns"].get<int64_t>());
    formats[format_of(f)].push_back(f.rank);
    for (const std::string& n : built.back().notes) notes.push_back("rank " + std::to_string(f.rank) + ": " + n);
  }
  std::sort(built.begin(), built.end(),
            [](const BuiltRank& a, const BuiltRank& b) { return a.trace.rank < b.trace.rank; });

  const BuiltRank& ref = built.front();
  for (BuiltRank& b : built) {
    ClockEstimate e = estimate_offset(static_cast<int>(b.trace.rank), b.anchors, ref.anchors);
    if (&b == &ref) {
      e = ClockEstimate{};
      e.rank = static_cast<int>(b.trace.rank);
      e.matched = b.anchors.size();
      e.measured = e.bounded = true;
    } else if (e.measured && !e.bounded) {
      run.problems.push_back("rank " + std::to_string(e.rank) +
                             ": the collectives' causality bounds contradict each "
                             "other (drifting clocks, or collectives matched wrongly): the offset is less certain "
                             "than its spread says");
    }
    if (!e.measured)
      run.problems.push_back("rank " + std::to_string(e.rank) + ": no collective matched rank " +
                             std::to_string(ref.trace.rank) + "'s: its clock is left as recorded");
    format::ClockPayload c{};
    c.offset_ns = -e.offset_ns;  // RankTrace adds its offset to put a rank on the reference clock
    c.uncertainty_ns = e.mad_ns;
    c.phase = 0;
    c.rounds = static_cast<uint32_t>(e.matched);
    b.trace.clocks.push_back(c);
    report.clock_alignment.push_back(alignment_record(e));
    run.ranks.push_back(std::move(b.trace));
  }
  for (const std::string& n : limits_of(run)) notes.push_back(n);
  if (const std::string n = digests_note(files, world); !n.empty()) notes.push_back(n);
  if (formats.size() > 1) notes.push_back(mixed_formats_note(formats));
  if (!cycles_note.empty())
    notes.insert(notes.begin(), cycles_note +
                                    " (several profiling cycles per rank: steps are the ProfilerStep ids the "
                                    "files carry; the time between cycles is no step's)");
  run.from_kineto = true;
  report.reference_rank = run.ranks.front().rank;
  if (!cycles.empty()) report.cycles = cycles;
  run.kineto = std::move(report);
  run.manifest.emplace();
  run.manifest->fields.source = "kineto";
  run.manifest->fields.world_size = world;
  if (backends.size() == 1) run.manifest->fields.backend = *backends.begin();
  return true;
}

bool is_kineto_run(const RunTrace& run) { return run.from_kineto; }

uint64_t trace_input_bytes(const std::vector<std::string>& inputs) {
  uint64_t total = 0;
  std::error_code ec;
  for (const std::string& p : inputs) {
    if (!fs::is_directory(p, ec)) {
      total += chrome_text_bytes_estimate(p);
      continue;
    }
    for (const auto& e : fs::directory_iterator(p, ec)) {
      const std::string name = e.path().filename().string();
      if (is_rank_trace_file(name) || is_digest_file_name(name))
        total += e.file_size(ec);
      else if (is_trace_file_name(name) && !is_run_folder_file(name))
        total += chrome_text_bytes_estimate(e.path().string());
    }
  }
  return total;
}

std::vector<KinetoRankFile> kineto_rank_files(const RunTrace& run, int64_t origin_ns) {
  std::vector<KinetoRankFile> out;
  if (!run.from_kineto) return out;
  if (!run.kineto) return out;
  const bool windowed = run.step_window.has_value();  // keep_steps (traces/model/step_window.h) ran
  for (const KinetoFileRead& f : run.kineto->files)
    for (const RankTrace& r : run.ranks)
      if (static_cast<int>(r.rank) == f.rank) {
        // A file's ts count from its own baseTimeNanoseconds (each cycle's file may have another).
        const int64_t base = f.base_ns;
        KinetoRankFile k{static_cast<int>(r.rank), f.file, base + r.clock_offset_ns() - origin_ns, f.cut_off};
        if (windowed && !r.events.empty()) {
          k.windowed = true;
          k.keep_from_ns = std::numeric_limits<int64_t>::max();
          k.keep_to_ns = std::numeric_limits<int64_t>::min();
          for (const Event& e : r.events)
            k.keep_from_ns = std::min(k.keep_from_ns, e.t0 - base), k.keep_to_ns = std::max(k.keep_to_ns, e.t1 - base);
        }
        out.push_back(std::move(k));
      }
  return out;
}

nlohmann::json kineto_report_json(const RunTrace& run) {
  if (!is_kineto_run(run) || !run.kineto) return nullptr;
  return run.kineto->to_json();
}

namespace {
// At many ranks the alignment is a distribution and the per-rank notes are grouped by what they say.
std::string clock_alignment_summary(const std::vector<records::clock_alignment>& alignment) {
  std::vector<double> offsets, uncertainties;
  std::vector<int> unmeasured, clamped;
  int far = -1, loose = -1;
  double far_ms = 0, loose_ms = 0;
  for (const records::clock_alignment& a : alignment) {
    const int rank = static_cast<int>(a.rank);
    if (!a.measured) {
      unmeasured.push_back(rank);
      continue;
    }
    const double off = a.offset_ms, unc = a.uncertainty_ms;
    offsets.push_back(std::abs(off));
    uncertainties.push_back(unc);
    if (far < 0 || std::abs(off) > far_ms) far = rank, far_ms = std::abs(off);
    if (loose < 0 || unc > loose_ms) loose = rank, loose_ms = unc;
    if (a.clamped_to_bounds) clamped.push_back(rank);
  }
  // Medians by nearest rank (of an even count the upper middle), as this report has always printed them.
  std::string out =
      fmt("  %zu ranks measured: |offset| median %.2f ms, max %.2f ms (rank %d); uncertainty median %.2f "
          "ms, max %.2f ms (rank %d)\n",
          offsets.size(), percentile(offsets, 0.5), far_ms, far, percentile(uncertainties, 0.5), loose_ms, loose);
  if (!clamped.empty()) out += "  median clamped to the bounds: " + describe_ranks(clamped) + "\n";
  if (!unmeasured.empty()) out += "  not measured (no collective matched): " + describe_ranks(unmeasured) + "\n";
  return out;
}

std::string notes_grouped(const std::vector<std::string>& notes) {
  std::map<std::string, std::vector<int>> by_text;  // "rank R: text" -> text's ranks
  std::vector<std::string> order;
  for (std::string text : notes) {
    int rank = -1;
    if (text.rfind("rank ", 0) == 0 && text.find(": ") != std::string::npos) {
      rank = std::atoi(text.c_str() + 5);
      text = text.substr(text.find(": ") + 2);
    }
    if (!by_text.count(text)) order.push_back(text);
    if (rank >= 0) by_text[text].push_back(rank);
  }
  std::string out;
  for (const std::string& t : order)
    out += clip("  " + (by_text[t].empty() ? "" : describe_ranks(by_text[t]) + ": ") + t, kReportLineMax) + "\n";
  return out;
}
}  // namespace

std::string kineto_report_text(const RunTrace& run) {
  if (!run.kineto) return {};
  const KinetoImportReport& r = *run.kineto;
  const bool many = r.clock_alignment.size() > static_cast<size_t>(kRanksListedInFull);
  std::string out =
      fmt("clock alignment (offset of each rank's clock from rank %d's, median of matched collectives' "
          "end-time differences ± their median absolute deviation%s):\n",
          static_cast<int>(r.reference_rank), many ? "; each rank's in --json" : "");
  if (many) {
    out += clock_alignment_summary(r.clock_alignment);
  } else {
    for (const records::clock_alignment& a : r.clock_alignment) {
      if (!a.measured) {
        out += fmt("  rank %d: not measured (no collective matched)\n", static_cast<int>(a.rank));
        continue;
      }
      std::string bounds;
      if (a.bounds_ms && a.bounds_ms->size() == 2 && a.rank != r.reference_rank)
        bounds = fmt(", certainly within [%+.2f, %+.2f] ms%s", (*a.bounds_ms)[0], (*a.bounds_ms)[1],
                     a.clamped_to_bounds ? " (median clamped)" : "");
      out += fmt("  rank %d: %+.2f ms ± %.2f ms from %zu collectives%s\n", static_cast<int>(a.rank), a.offset_ms,
                 a.uncertainty_ms, static_cast<size_t>(a.collectives), bounds.c_str());
    }
  }
  if (!r.notes.empty()) {
    out += "notes:\n";
    if (many) {
      out += notes_grouped(r.notes);
    } else {
      for (const auto& n : r.notes) out += "  " + n + "\n";
    }
  }
  return out;
}

}  // namespace ddp
