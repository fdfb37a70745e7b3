// The Chrome trace reader on big and compressed input: documents read in pieces (with and without line breaks
// between events), gzip members, files streamed through a window, and the fuzzer's regressions among them.
#include <gtest/gtest.h>
#include <libdeflate.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "traces/chrome/chrome_reader.h"
#include "traces/chrome/chrome_status.h"

namespace fs = std::filesystem;
using namespace ddp;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ddp_chrome_big_input_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

}  // namespace

namespace {

// A Kineto-like trace big enough to be read in pieces: one event per line, every 7th with args holding objects on
// their own lines ("},\n{" inside an event: a place where a piece may not be cut).
std::string big_trace(size_t events) {
  std::string t = "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n";
  for (size_t i = 0; i < events; ++i) {
    if (i) t += ",\n";
    t += "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op" + std::to_string(i % 13) +
         "\", \"pid\": 1, \"tid\": 2, " + "\"ts\": " + std::to_string(1000 + i * 10) +
         ".5, \"dur\": 3, \"args\": {\"External id\": " + std::to_string(i);
    if (i % 7 == 0) t += ", \"nested\": [{\"a\": 1},\n    {\"b\": 2},\n  {\"c\": \"x\\ny\"}]";
    t += "}}";
  }
  t += "\n  ],\n  \"displayTimeUnit\": \"ms\"\n}\n";
  return t;
}

}  // namespace

// Big documents are read in pieces: the same events, once each and in order, the members before and after the events,
// and the same typed errors at the same byte offsets as a document read whole.
TEST(ChromeReader, BigDocumentsReadInPiecesLikeWhole) {
  const size_t n = 30000;
  const std::string text = big_trace(n);
  ASSERT_GT(text.size(), 2u << 20);
  std::vector<int64_t> ids;
  ChromeDocInfo info;
  ChromeStatus s = parse_chrome_json(
      text,
      [&](const ChromeEventView& e) {
        const ChromeValue* id = e.arg("External id");
        ids.push_back(id ? static_cast<int64_t>(id->num) : -1);
        return true;
      },
      info);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(ids.size(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(ids[i], static_cast<int64_t>(i));
  EXPECT_EQ(info.events, n);
  EXPECT_EQ(info.top.value("schemaVersion", 0), 1);
  EXPECT_EQ(info.top.value("displayTimeUnit", ""), "ms");

  // The callback can stop the reading in any piece.
  size_t seen = 0;
  ChromeDocInfo stop_info;
  EXPECT_TRUE(parse_chrome_json(
                  text, [&](const ChromeEventView&) { return ++seen < 20000; }, stop_info)
                  .ok());
  EXPECT_EQ(seen, 20000u);

  // Cut anywhere: truncated, also deep inside the document.
  for (size_t cut : {text.size() / 3, text.size() / 2 + 17, text.size() - 40, text.size() - 3}) {
    ChromeDocInfo i2;
    ChromeStatus t = parse_chrome_json(std::string_view(text.data(), cut), nullptr, i2);
    EXPECT_EQ(t.error, ChromeError::truncated) << cut << ": " << t.message;
  }
  // A syntax error in a middle piece is named at its byte, with its line.
  std::string bad = text;
  const size_t at = bad.find("\"dur\": 3", bad.size() / 2) + 7;
  bad[at] = '-';  // "dur": -,
  ChromeDocInfo i3;
  ChromeStatus b = parse_chrome_json(bad, nullptr, i3);
  EXPECT_EQ(b.error, ChromeError::syntax) << b.message;
  EXPECT_EQ(b.offset, at) << b.message;
  const size_t line = 1 + static_cast<size_t>(std::count(bad.begin(), bad.begin() + static_cast<long>(at), '\n'));
  EXPECT_NE(b.message.find("(line " + std::to_string(line) + ")"), std::string::npos) << b.message;
}

// Events not separated by line breaks (JSON written on one line, as json.dump and many tools write it, or with the
// commas first) are still read in pieces, cut by following the nesting: strings holding "},{" and quotes do not cut
// them; the same events in order, the members after them, errors at their byte. Read whole before, such a document
// needed several times its size in memory, and one over 4 GiB could not be read.
TEST(ChromeReader, DocumentsWithoutLineBreaksBetweenEventsAreReadInPiecesToo) {
  const size_t n = 60000;  // over the 4 MiB a cut is looked for in
  // Strings that look like the end of an event, with escaped quotes and brackets, in every 11th event.
  const std::string looks_like_an_end = "\"text\": \"a},{\\\"b\\\": [1,2]}, \\\" ]\\\\\", ";
  const std::string plain = big_trace(n), key = "\"External id\": ";
  std::string lined;
  size_t at = 0;
  for (size_t k = 0, id; (id = plain.find(key, at)) != std::string::npos; ++k, at = id + key.size()) {
    lined.append(plain, at, id - at);
    if (k % 11 == 0) lined += looks_like_an_end;
    lined += key;
  }
  lined.append(plain, at, std::string::npos);
  std::string one_line, comma_first;
  for (char c : lined)
    if (c != '\n') one_line += c;
  const std::string between = ",\n  {\"ph\"";
  for (size_t from = 0, sep; from < lined.size(); from = sep + 4) {
    sep = std::min(lined.find(between, from), lined.size());
    comma_first.append(lined, from, sep - from);
    if (sep < lined.size()) comma_first += "\n  , ";
  }
  const std::string dir = temp_dir("one_line");
  for (const std::string* text : {&lined, &one_line, &comma_first}) {
    ASSERT_GT(text->size(), 6u << 20);
    const std::string path = dir + "/t.json";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << *text;
    for (bool from_file : {false, true}) {
      SCOPED_TRACE(std::string(text == &lined      ? "lines"
                               : text == &one_line ? "one line"
                                                   : "commas first") +
                   (from_file ? ", file" : ", text"));
      uint64_t next = 0, texts = 0;
      bool in_order = true;
      ChromeDocInfo info;
      auto each = [&](const ChromeEventView& e) {
        const ChromeValue* id = e.arg("External id");
        in_order &= id && static_cast<uint64_t>(id->num) == next++;
        const ChromeValue* t = e.arg("text");
        texts += t && t->text == "a},{\"b\": [1,2]}, \" ]\\";
        return true;
      };
      const ChromeStatus s = from_file ? parse_chrome_file(path, each, info) : parse_chrome_json(*text, each, info);
      ASSERT_TRUE(s.ok()) << s.message;
      EXPECT_TRUE(in_order);
      EXPECT_EQ(next, n);
      EXPECT_EQ(texts, (n + 10) / 11);
      EXPECT_EQ(info.top.value("displayTimeUnit", ""), "ms");
      EXPECT_LT(info.largest_piece, 1u << 20) << "read whole: " << text->size() << " bytes";
    }
  }
  // A syntax error in a middle piece of the one-line document is named at its byte, as when read whole.
  std::string bad = one_line;
  const size_t bad_at = bad.find("\"dur\": 3", bad.size() / 2) + 7;
  bad[bad_at] = '-';
  ChromeDocInfo i2;
  const ChromeStatus b = parse_chrome_json(bad, nullptr, i2);
  EXPECT_EQ(b.error, ChromeError::syntax) << b.message;
  EXPECT_EQ(b.offset, bad_at) << b.message;
  fs::remove_all(dir);
}

namespace {

std::string gzip_of(std::string_view text) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(6);
  std::string gz(libdeflate_gzip_compress_bound(c, text.size()), '\0');
  gz.resize(libdeflate_gzip_compress(c, text.data(), text.size(), gz.data(), gz.size()));
  libdeflate_free_compressor(c);
  return gz;
}

}  // namespace

// gunzip sizes its output from the last member's ISIZE: several members (the last one small, so the first guess is
// far too short) inflate whole; a damaged or truncated member is a decompress error; bytes after the last member are
// ignored, as gzip(1) does.
TEST(ChromeReader, GzipMembersLargerThanTheTrailerSays) {
  std::string big;
  for (int i = 0; big.size() < (3u << 20); ++i) big += "{\"ph\": \"X\", \"name\": \"op" + std::to_string(i) + "\"},\n";
  const std::string small = "{\"ph\": \"X\"}\n";
  const std::string gz = gzip_of(big) + gzip_of(big.substr(0, 1000)) + gzip_of(small);
  ASSERT_LT(gzip_first_size_guess(gz), big.size());  // the trailer speaks for the last member only
  std::string out;
  ChromeStatus s = gunzip(gz, out);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(out == big + big.substr(0, 1000) + small);
  EXPECT_GE(out.capacity(), out.size() + 64);  // simdjson's padding

  std::string rest;
  EXPECT_TRUE(gunzip(gzip_of(small) + "trailing garbage", rest).ok());
  EXPECT_EQ(rest, small);
  EXPECT_EQ(gunzip(gz.substr(0, gz.size() - 5), out).error, ChromeError::decompress);  // last member cut
  EXPECT_EQ(gunzip(gz.substr(0, gz.size() / 2), out).error, ChromeError::decompress);  // first member cut
  std::string wrong_isize = gzip_of(small);
  wrong_isize[wrong_isize.size() - 4] ^= 1;
  EXPECT_EQ(gunzip(wrong_isize, out).error, ChromeError::decompress);
  EXPECT_EQ(gunzip("", out).error, ChromeError::decompress);
}

// The next room after a member did not fit: a single member over 4 GiB is ISIZE + k * 4 GiB (one retry, not a
// doubling series); a small last member's ISIZE cannot be the rest, so the room doubles.
TEST(ChromeReader, GzipRoomFollowsIsizeModulo4GiB) {
  std::string fake(100, '\0');
  const uint32_t isize = 1u << 30;  // a 5 GiB text's ISIZE
  for (int i = 0; i < 4; ++i) fake[fake.size() - 4 + i] = static_cast<char>((isize >> (8 * i)) & 0xFF);
  EXPECT_EQ(gzip_grown_size(1ull << 30, 0, 300u << 20, fake), 5ull << 30);
  EXPECT_EQ(gzip_grown_size(1ull << 20, 0, 1000, fake), 2ull << 20);
  EXPECT_EQ(gzip_grown_size(0, 0, 0, fake), 4096u);
}

// A plain JSON file is streamed through a window of a few megabytes: every event once and in order, and errors at the
// file's byte and line, the same as the text read from memory.
TEST(ChromeReader, BigFilesStreamLikeText) {
  const std::string dir = temp_dir("stream");
  const std::string text = big_trace(80000);
  ASSERT_GT(text.size(), 10u << 20);  // several windows
  std::ofstream(dir + "/big.json", std::ios::binary) << text;
  uint64_t next = 0;
  bool in_order = true;
  ChromeDocInfo info;
  ChromeStatus s = parse_chrome_file(
      dir + "/big.json",
      [&](const ChromeEventView& e) {
        const ChromeValue* id = e.arg("External id");
        in_order &= id && static_cast<uint64_t>(id->num) == next++;
        return true;
      },
      info);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(in_order);
  EXPECT_EQ(next, 80000u);
  EXPECT_EQ(info.events, 80000u);
  EXPECT_EQ(info.top.value("displayTimeUnit", ""), "ms");

  std::string bad = text;
  const size_t at = bad.find("\"dur\": 3", bad.size() * 3 / 4) + 7;
  bad[at] = '-';
  std::ofstream(dir + "/bad.json", std::ios::binary) << bad;
  ChromeDocInfo i2, i3;
  ChromeStatus from_file = parse_chrome_file(dir + "/bad.json", nullptr, i2);
  ChromeStatus from_text = parse_chrome_json(bad, nullptr, i3);
  EXPECT_EQ(from_file.error, ChromeError::syntax) << from_file.message;
  EXPECT_EQ(from_file.offset, at);
  EXPECT_EQ(from_file.message, from_text.message);

  std::ofstream(dir + "/cut.json", std::ios::binary) << text.substr(0, text.size() * 2 / 3);
  ChromeDocInfo i4;
  EXPECT_EQ(parse_chrome_file(dir + "/cut.json", nullptr, i4).error, ChromeError::truncated);
  ChromeDocInfo i5;
  EXPECT_EQ(parse_chrome_file(dir + "/missing.json", nullptr, i5).error, ChromeError::cannot_open);
  fs::remove_all(dir);
}

// A fuzzer's input (tests/data/fuzz/regressions): a real gzip'd trace with damaged data and trailer. It is a decompress
// error found in a small buffer; the first guess never trusts an ISIZE far beyond what trace JSON compresses to.
TEST(ChromeReader, ADamagedGzipTrailerIsNotTrustedForTheBufferSize) {
  const std::string path =
      std::string(DDP_SOURCE_DIR) + "/tests/data/fuzz/regressions/fuzz_chrome_json/damaged_gzip_trailer.json.gz";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_LE(gzip_first_size_guess(gz), gz.size() * 64);
  std::string out;
  EXPECT_EQ(gunzip(gz, out).error, ChromeError::decompress);
}

// A fuzzer's input (tests/data/fuzz/regressions/fuzz_kineto_file): "[" and binary bytes, 36 KB, read in pieces. Each
// failed piece counted its error's line in a fresh 4 MiB block (zeroed: seconds under ASan); the block is now no
// bigger than the bytes counted. The reading ends in one syntax error that names its line.
TEST(ChromeReader, AFuzzersManyFailedPiecesEndInOneNamedError) {
  const std::string path =
      std::string(DDP_SOURCE_DIR) + "/tests/data/fuzz/regressions/fuzz_kineto_file/error_lines_of_many_pieces.json";
  ChromeDocInfo info;
  const ChromeStatus s = parse_chrome_file(
      path, [](const ChromeEventView&) { return true; }, info);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("line"), std::string::npos) << s.message;
}
