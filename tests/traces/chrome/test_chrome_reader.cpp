// The Chrome trace reader: our own export read back, real PyTorch profiler (Kineto) traces, and damaged input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "traces/chrome/chrome_export.h"
#include "traces/chrome/chrome_reader.h"
#include "traces/chrome/chrome_status.h"
#include "traces/native/load_run.h"
#include "traces/native/trace_writer.h"
#include "traces/timeline/timeline.h"

namespace fs = std::filesystem;
using namespace ddp;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ddp_chrome_reader_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

Event span(Stage s, uint8_t lane, int64_t t0, int64_t t1, uint32_t step, uint16_t bucket = kNoBucket,
           uint64_t bytes = 0) {
  Event e = make_span(s, lane, t0, t1);
  e.step = step;
  e.bucket = bucket;
  e.value = bytes;
  return e;
}

// Two ranks, three steps; rank 1's clock is 3 ms behind (offset +3 ms puts it on rank 0's clock).
void write_small_run(const std::string& dir) {
  for (uint32_t rank = 0; rank < 2; ++rank) {
    TraceWriter w;
    std::string err;
    ASSERT_TRUE(w.open(dir + "/" + rank_trace_file(static_cast<int>(rank)), rank, 2, err)) << err;
    w.write_lane(0, "main");
    w.write_lane(1, "comm \"allreduce\"");
    w.write_meta("host", "host" + std::to_string(rank));
    format::ClockPayload c{};
    c.offset_ns = rank == 1 ? 3'000'000 : 0;
    w.write_clock(c);
    const int64_t base = 10'000'000'000 + (rank == 1 ? -3'000'000 : 0);
    std::vector<Event> main, comm;
    for (uint32_t step = 0; step < 3; ++step) {
      int64_t t = base + step * 50'000'000;
      main.push_back(span(Stage::forward, 0, t + 1'000'000, t + 11'000'123, step));
      main.push_back(span(Stage::backward, 0, t + 11'000'123, t + 31'000'000, step));
      main.push_back(span(Stage::step, 0, t, t + 40'000'000, step));
      comm.push_back(span(Stage::allreduce, 1, t + 20'000'000, t + 25'000'000, step, 0, 4'000'000));
      Event m;
      m.t0 = m.t1 = t;
      m.kind = static_cast<uint8_t>(EventKind::counter);
      m.stage = static_cast<uint8_t>(Counter::host_rss_bytes);
      m.value = 1000000 + step;
      main.push_back(m);
    }
    w.write_events(0, main.data(), main.size());
    w.write_events(1, comm.data(), comm.size());
    w.write_end(main.size() + comm.size(), 0);
    w.close();
  }
  std::ofstream(dir + "/manifest.json") << R"({"world": 2})";
}

std::string export_small_run(const std::string& dir) {
  write_small_run(dir);
  RunTrace run;
  std::string err;
  EXPECT_TRUE(load_run(dir, run, err)) << err;
  ExportStats stats;
  std::string out = dir + "/trace.json";
  EXPECT_TRUE(export_chrome(run, out, stats, err)) << err;
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST(ChromeReader, ReadsOwnExportBack) {
  std::string dir = temp_dir("own");
  std::string path = export_small_run(dir);
  ChromeTrace t = read_chrome_file(path);
  ASSERT_TRUE(t.ok()) << t.status.message;
  EXPECT_EQ(t.info.producer(), "ddp_profile");
  size_t x = 0, c = 0, m = 0;
  std::set<std::string> names;
  for (const auto& e : t.events) {
    if (e.ph == 'X') {
      ++x;
      names.insert(e.name);
      ASSERT_NE(e.arg("step"), nullptr);
    }
    if (e.ph == 'C') ++c;
    if (e.ph == 'M') ++m;
  }
  EXPECT_EQ(x, 2u * 3u * 4u);
  EXPECT_EQ(c, 2u * 3u);
  EXPECT_GE(m, 4u);
  EXPECT_EQ(names, (std::set<std::string>{"forward", "backward", "step", "allreduce"}));

  // Timestamps survive to the nanosecond, on one clock: both ranks' step 0 starts at 0.
  Timeline from_json, from_run;
  std::string err;
  ASSERT_TRUE(timeline_from_chrome_file(path, from_json, err)) << err;
  RunTrace run;
  ASSERT_TRUE(load_run(dir, run, err));
  from_run = timeline_from_run(run);
  ASSERT_EQ(from_json.processes.size(), 2u);
  ASSERT_EQ(from_run.processes.size(), 2u);
  EXPECT_EQ(from_json.span_count, from_run.span_count);
  EXPECT_EQ(from_json.counter_samples, from_run.counter_samples);
  for (size_t p = 0; p < 2; ++p) {
    const Process& a = from_json.processes[p];
    const Process& b = from_run.processes[p];
    EXPECT_EQ(a.rank, static_cast<int>(p));
    EXPECT_EQ(a.name, b.name);
    ASSERT_EQ(a.lanes.size(), b.lanes.size());
    EXPECT_EQ(a.lanes[1].name, "comm \"allreduce\"");
    for (size_t l = 0; l < a.lanes.size(); ++l) {
      ASSERT_EQ(a.lanes[l].rows.size(), b.lanes[l].rows.size());
      for (size_t r = 0; r < a.lanes[l].rows.size(); ++r) {
        const auto& sa = a.lanes[l].rows[r].spans;
        const auto& sb = b.lanes[l].rows[r].spans;
        ASSERT_EQ(sa.size(), sb.size());
        for (size_t i = 0; i < sa.size(); ++i) {
          EXPECT_EQ(sa[i].t0, sb[i].t0);
          EXPECT_EQ(sa[i].t1(), sb[i].t1());
          EXPECT_EQ(sa[i].stage, sb[i].stage);
          EXPECT_EQ(sa[i].step, sb[i].step);
          EXPECT_EQ(from_json.bucket(sa[i]), from_run.bucket(sb[i]));
          EXPECT_EQ(from_json.bytes(sa[i]), from_run.bytes(sb[i]));
        }
      }
    }
    ASSERT_EQ(a.steps.size(), 3u);
    EXPECT_EQ(a.steps[0].t0, 0);
    EXPECT_EQ(a.steps[1].t0, 50'000'000);
  }
  fs::remove_all(dir);
}

TEST(ChromeReader, ReadsKinetoFixtures) {
  const std::string base = std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/";
  {
    ChromeTrace t = read_chrome_file(base + "alexnet_1gpu_kineto.json.gz");
    ASSERT_TRUE(t.ok()) << t.status.message;
    EXPECT_EQ(t.info.producer(), "kineto");
    EXPECT_EQ(t.events.size(), 1408u);
    size_t x = 0, kernels = 0;
    bool launch = false;
    for (const auto& e : t.events) {
      x += e.ph == 'X';
      kernels += e.cat == "kernel";
      launch |= e.name == "cudaLaunchKernel";
    }
    EXPECT_EQ(x, 868u);
    EXPECT_EQ(kernels, 79u);
    EXPECT_TRUE(launch);
    Timeline tl;
    std::string err;
    ASSERT_TRUE(timeline_from_chrome_file(base + "alexnet_1gpu_kineto.json.gz", tl, err)) << err;
    EXPECT_EQ(tl.span_count, 868u + 2u);  // and Kineto's two global instants, on the global track
    // the GPU process's kernels map to the vocabulary
    uint64_t kernel_spans = 0;
    for (const auto& p : tl.processes) kernel_spans += p.stages[static_cast<int>(Stage::kernel)].count;
    EXPECT_EQ(kernel_spans, 79u);
    EXPECT_TRUE(tl.names.find("aten::empty").has_value());
  }
  {
    ChromeTrace t = read_chrome_file(base + "cpu_only_kineto.json.gz");
    ASSERT_TRUE(t.ok()) << t.status.message;
    EXPECT_EQ(t.events.size(), 30u);
    Timeline tl;
    std::string err;
    ASSERT_TRUE(timeline_from_chrome_file(base + "cpu_only_kineto.json.gz", tl, err)) << err;
    EXPECT_EQ(tl.span_count, 16u + 2u);  // and Kineto's two global instants, on the global track
    ASSERT_TRUE(tl.names.find("gloo:all_reduce").has_value());
    int64_t t0 = 0, t1 = 0;
    EXPECT_TRUE(tl.step_range(551, t0, t1));  // "ProfilerStep#551"
    EXPECT_LT(t0, t1);
    // thread names from metadata, fractional microsecond timestamps
    bool named = false;
    for (const auto& p : tl.processes)
      for (const auto& l : p.lanes) named |= l.name == "thread 3554 (pt_main_thread)";
    EXPECT_TRUE(named);
  }
}

// Flows and instants keep what ties them together: the merged export re-writes them.
TEST(ChromeReader, KeepsFlowIdsBindingPointsAndScopes) {
  ChromeTrace t = read_chrome_text(R"({"traceEvents": [
    {"ph": "s", "id": 17, "pid": 1, "tid": 2, "ts": 1.5, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": "0x2a", "bp": "e", "pid": 1, "tid": 3, "ts": 2.5, "cat": "ac2g", "name": "ac2g"},
    {"ph": "i", "s": "g", "pid": 1, "tid": 2, "ts": 3, "name": "mark"},
    {"ph": "X", "pid": 1, "tid": 2, "ts": 4, "dur": 1, "name": "plain"}]})");
  ASSERT_TRUE(t.ok()) << t.status.message;
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.events[0].id, "17");
  EXPECT_EQ(t.events[1].id, "0x2a");
  EXPECT_EQ(t.events[1].bp, "e");
  EXPECT_EQ(t.events[2].scope, "g");
  EXPECT_TRUE(t.events[3].id.empty());
  EXPECT_TRUE(t.events[3].bp.empty());
}

TEST(ChromeReader, EveryTruncationIsATypedError) {
  std::string dir = temp_dir("trunc");
  std::string text = slurp(export_small_run(dir));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  ASSERT_GT(text.size(), 1000u);
  for (size_t n = 0; n < text.size(); ++n) {
    ChromeDocInfo info;
    ChromeStatus s = parse_chrome_json(std::string_view(text.data(), n), nullptr, info);
    ASSERT_FALSE(s.ok()) << "prefix of " << n << " bytes accepted";
    ASSERT_TRUE(s.error == ChromeError::truncated || (n == 0 && s.error == ChromeError::empty))
        << n << ": " << s.message;
    Timeline tl;
    std::string err;
    ASSERT_FALSE(timeline_from_chrome_text(std::string_view(text.data(), n), tl, err));
    ASSERT_FALSE(err.empty());
  }
  ChromeDocInfo info;
  EXPECT_TRUE(parse_chrome_json(text, nullptr, info).ok());
  fs::remove_all(dir);
}

TEST(ChromeReader, MalformedInputGivesTypedErrors) {
  struct Case {
    std::string text;
    ChromeError want;
  };
  std::vector<Case> cases = {
      {"", ChromeError::empty},
      {"   \n", ChromeError::empty},
      {"{", ChromeError::truncated},
      {"[{\"ph\":\"X\",\"ts\":1", ChromeError::truncated},
      {"{\"traceEvents\": 5}", ChromeError::not_a_trace},
      {"{\"foo\": []}", ChromeError::not_a_trace},
      {"42", ChromeError::not_a_trace},
      {"nul", ChromeError::truncated},
      {"nope", ChromeError::syntax},
      {"[{\"ph\":\"X\",,}]", ChromeError::syntax},
      {"[,]", ChromeError::syntax},  // one trailing comma is read, two not
      {"[{\"ph\":\"X\" \"ts\":1}]", ChromeError::syntax},
      {"[{\"name\":\"a\\qb\"}]", ChromeError::syntax},
      {"[{\"name\":\"a\nb\"}]", ChromeError::syntax},
      {"[1,2] x", ChromeError::syntax},
      {"[01]", ChromeError::syntax},
      {"[-]", ChromeError::syntax},
      {"[1.]", ChromeError::syntax},
      {std::string(100000, '['), ChromeError::too_deep},
      {"{\"traceEvents\":[" + std::string(5000, '[') + "]}", ChromeError::too_deep},
  };
  for (const auto& c : cases) {
    ChromeDocInfo info;
    ChromeStatus s = parse_chrome_json(c.text, nullptr, info);
    EXPECT_EQ(s.error, c.want) << c.text.substr(0, 40) << " -> " << s.message;
    EXPECT_TRUE(!s.message.empty() && info.not_strict.empty()) << c.text.substr(0, 40);
  }
  // Read as Perfetto does, with a note: a trailing comma, an Array Format document never closed.
  for (std::string text :
       {"[{\"ph\":\"X\",\"ts\":1,}]", "[{\"ph\":\"X\",\"ts\":1},\n", "[{\"ph\":\"X\",\"ts\":1}, {\"ph\":\"X\",\"t"}) {
    ChromeDocInfo info;
    size_t events = 0;
    ChromeStatus s = parse_chrome_json(
        text, [&](const ChromeEventView&) { return ++events, true; }, info);
    EXPECT_TRUE(s.ok()) << text << " -> " << s.message;
    EXPECT_EQ(events, 1u) << text;
    EXPECT_NE(info.not_strict.find("not strictly JSON"), std::string::npos) << text;
  }
  // Accepted oddities: bare arrays, escapes, string pids, B/E pairs, missing fields.
  Timeline tl;
  std::string err;
  ASSERT_TRUE(timeline_from_chrome_text(
      R"([{"ph":"B","name":"outer \u00e9\ud83d\ude00","pid":"p","tid":1,"ts":10},
          {"ph":"B","name":"inner","pid":"p","tid":1,"ts":"12.5"},
          {"ph":"E","pid":"p","tid":1,"ts":20},{"ph":"E","pid":"p","tid":1,"ts":30},
          {"ph":"X","name":"forward","pid":"p","tid":2,"ts":1e1,"dur":5,"args":{"step":7,"bytes":64,"x":[1,{"y":2}]}},
          {"ph":"X"}, 3, "str", null, {"ph":"C","name":"mem","pid":"p","ts":11,"args":{"a":1,"b":2}}])",
      tl, err))
      << err;
  ASSERT_EQ(tl.processes.size(), 1u);
  EXPECT_EQ(tl.span_count, 3u);
  const Lane& l1 = tl.processes[0].lanes[0];
  ASSERT_EQ(l1.rows.size(), 2u);
  EXPECT_EQ(tl.name(l1.rows[0].spans[0]), "outer \xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(l1.rows[0].spans[0].duration(), 20'000);
  EXPECT_EQ(l1.rows[1].spans[0].duration(), 7'500);
  const Span& fwd = tl.processes[0].lanes[1].rows[0].spans[0];
  EXPECT_EQ(fwd.stage, static_cast<uint8_t>(Stage::forward));
  EXPECT_EQ(fwd.step, 7u);
  EXPECT_EQ(tl.bytes(fwd), 64u);
  EXPECT_NE(tl.extra(fwd).find("x: [1,{\"y\":2}]"), std::string_view::npos);
  EXPECT_EQ(tl.processes[0].counters.size(), 2u);
}

TEST(ChromeReader, FuzzedMutationsNeverCrash) {
  std::string dir = temp_dir("fuzz");
  std::string text = slurp(export_small_run(dir));
  std::mt19937 rng(1234);
  const char alphabet[] = "{}[],:\"\\0123456789.eE-+ tfnuX\x01\xff";
  size_t accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string m = text;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t pos = rng() % m.size();
      switch (rng() % 3) {
        case 0:
          m[pos] = alphabet[rng() % (sizeof(alphabet) - 1)];
          break;
        case 1:
          m.erase(pos, 1 + rng() % 8);
          break;
        default:
          m.insert(pos, 1, alphabet[rng() % (sizeof(alphabet) - 1)]);
          break;
      }
      if (m.empty()) m = "x";
    }
    Timeline tl;
    std::string err;
    bool ok = timeline_from_chrome_text(m, tl, err);
    if (ok) {
      ++accepted;
    } else {
      ASSERT_FALSE(err.empty());
    }
  }
  EXPECT_LT(accepted, 3000u);
  fs::remove_all(dir);
}

TEST(ChromeReader, DamagedFiles) {
  std::string dir = temp_dir("files");
  EXPECT_EQ(read_chrome_file(dir + "/missing.json").status.error, ChromeError::cannot_open);
  EXPECT_EQ(read_chrome_file(dir).status.error, ChromeError::cannot_open);
  std::ofstream(dir + "/garbage.json") << "\x89PNG garbage";
  EXPECT_EQ(read_chrome_file(dir + "/garbage.json").status.error, ChromeError::syntax);
  std::string gz = slurp(std::string(DDP_SOURCE_DIR) + "/tests/data/kineto/alexnet_1gpu_kineto.json.gz");
  ASSERT_GT(gz.size(), 1000u);
  for (size_t cut : {size_t(2), size_t(10), gz.size() / 2, gz.size() - 9}) {
    std::ofstream(dir + "/cut.json.gz", std::ios::binary) << gz.substr(0, cut);
    ChromeTrace t = read_chrome_file(dir + "/cut.json.gz");
    EXPECT_EQ(t.status.error, ChromeError::decompress) << cut << ": " << t.status.message;
  }
  std::string bad = gz;
  for (size_t i = 100; i < 200; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5A);
  std::ofstream(dir + "/bad.json.gz", std::ios::binary) << bad;
  ChromeTrace t = read_chrome_file(dir + "/bad.json.gz");
  EXPECT_FALSE(t.ok());
  fs::remove_all(dir);
}
