// A span of a plain JSON file keeps its event's place in the file, not its args text (ExtraTexts::add_place): the
// text read back from the file must be what the same trace held in memory gives, across the reader's windows and
// pieces, and a file changed since must say so instead of showing another event's args.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "traces/chrome/chrome_reader.h"
#include "traces/timeline/timeline.h"

namespace fs = std::filesystem;
using namespace ddp;

namespace {

// ~6 MB of events on three interleaved threads, B/E pairs and complete events, args with escapes, braces inside
// strings, nested values, unicode, and events without args: larger than the file reader's window (4 MiB).
std::string big_trace() {
  std::mt19937 rng(7);
  std::string out = "{\"traceEvents\": [\n";
  int64_t ts = 1'000'000;
  for (int i = 0; i < 30'000; ++i) {
    const int tid = static_cast<int>(rng() % 3);
    ts += 3;
    if (i) out += ",\n";
    out += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op" + std::to_string(rng() % 40) +
           "\", \"pid\": 7, \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ".5, \"dur\": 2";
    switch (i % 5) {
      case 0:
        break;  // no args
      case 1:
        out += ", \"args\": {\"External id\": " + std::to_string(i) + ", \"Ev Idx\": " + std::to_string(i % 17) + "}";
        break;
      case 2:
        out += ", \"args\": {\"Input Dims\": [[2, 3], [4]], \"note\": \"a \\\"quoted\\\" } brace {\", \"step\": 3}";
        break;
      case 3:
        out += ", \"args\": {\"x\": {\"y\": [1, {\"z\": \"\\u00e9\"}]}, \"bytes\": 64, \"s\": \"back\\\\slash\"}";
        break;
      default:
        out += ", \"args\": {\"long\": \"" + std::string(300, 'q') + "\"}";
        break;
    }
    out += "}";
  }
  out += ",\n{\"ph\": \"B\", \"name\": \"outer\", \"pid\": 7, \"tid\": 9, \"ts\": 10, \"args\": {\"k\": \"v\"}}";
  out += ",\n{\"ph\": \"E\", \"pid\": 7, \"tid\": 9, \"ts\": 20}";
  out += "\n]}\n";
  return out;
}

// Every span as a line (process, lane, row, times, name, args text), sorted.
std::vector<std::string> span_lines(const Timeline& tl) {
  std::vector<std::string> lines;
  for (const Process& p : tl.processes)
    for (const Lane& l : p.lanes)
      for (size_t d = 0; d < l.rows.size(); ++d)
        for (const Span& s : l.rows[d].spans)
          lines.push_back(p.key + " " + l.key + " " + std::to_string(d) + " " + std::to_string(s.t0) + " " +
                          std::to_string(s.t1()) + " " + std::string(tl.name(s)) + " | " + tl.extra(s));
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace

TEST(TimelinePlaces, ArgsReadBackFromTheFileEqualTheTextKeptInMemory) {
  const std::string text = big_trace();
  const fs::path path = fs::temp_directory_path() / ("ddp_places_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path, std::ios::binary) << text;
  Timeline from_file, from_text;
  std::string err;
  ASSERT_TRUE(timeline_from_chrome_file(path.string(), from_file, err)) << err;
  ASSERT_TRUE(timeline_from_chrome_text(text, from_text, err)) << err;
  const std::vector<std::string> a = span_lines(from_file), b = span_lines(from_text);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), 30'001u);
  size_t with_args = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i], b[i]) << "span line " << i;  // line by line: one huge string compare would hide where
    with_args += a[i].size() > a[i].find(" | ") + 3;
  }
  EXPECT_EQ(with_args, 24'001u);  // four events in five carry args, the B/E pair too
  // A place is a varint gap between offsets: under three bytes a span here, whatever its args' length.
  EXPECT_LT(from_file.extras.memory_bytes(), 3 * from_file.extras.size());

  // The file changed after loading: a span's args say so (not another event's text, not a crash).
  std::ofstream(path, std::ios::binary | std::ios::app) << " ";
  const Span* shown = nullptr;
  for (const Lane& l : from_file.processes[0].lanes)
    for (const Row& r : l.rows)
      for (const Span& s : r.spans)
        if (!shown && from_text.extras.size() && s.detail) shown = &s;
  ASSERT_NE(shown, nullptr);
  EXPECT_NE(from_file.extra(*shown).find("changed since it was loaded"), std::string::npos) << from_file.extra(*shown);
  fs::remove(path);
}

TEST(TimelinePlaces, AnEventIsReadOnlyWhereOneStarts) {
  const fs::path path = fs::temp_directory_path() / ("ddp_places_at_" + std::to_string(::getpid()) + ".json");
  const std::string text = R"([{"ph": "X", "name": "a", "args": {"s": "} {"}}, {"ph": "X", "name": "b"}])";
  std::ofstream(path, std::ios::binary) << text;
  std::string name, err;
  auto keep_name = [&](const ChromeEventView& e) {
    name = std::string(e.name);
    return true;
  };
  EXPECT_TRUE(read_chrome_event_at(path.string(), 1, keep_name, err)) << err;
  EXPECT_EQ(name, "a");
  EXPECT_TRUE(read_chrome_event_at(path.string(), text.find("{\"ph\": \"X\", \"name\": \"b\""), keep_name, err)) << err;
  EXPECT_EQ(name, "b");
  for (uint64_t wrong : {uint64_t{0}, uint64_t{2}, uint64_t{text.size()}, uint64_t{1} << 40}) {
    err.clear();
    EXPECT_FALSE(read_chrome_event_at(path.string(), wrong, keep_name, err)) << wrong;
    EXPECT_NE(err.find("no event at byte " + std::to_string(wrong)), std::string::npos) << err;
  }
  fs::remove(path);
}
