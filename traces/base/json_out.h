#pragma once
// Writing big JSON trace files fast and whole: an append-only text buffer flushed to a FILE* in large blocks, and
// the temp-file-and-rename that makes a file appear complete or not at all. The Chrome export and the Kineto export
// both write through here (millions of events per second; nlohmann builds a tree per event and is ~10x slower).
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace ddp {

// A plain char array with a cursor (no per-append capacity bookkeeping of std::string), numbers with to_chars.
class JsonOut {
 public:
  explicit JsonOut(FILE* f);
  ~JsonOut() { flush(); }
  JsonOut(const JsonOut&) = delete;
  JsonOut& operator=(const JsonOut&) = delete;

  void raw(std::string_view s);
  void ch(char c);
  void num(int64_t v);
  void unum(uint64_t v);
  // Nanoseconds as microseconds with three decimals, the unit Chrome and Kineto traces use.
  void micros(int64_t ns);
  // A quoted, escaped JSON string.
  void str(std::string_view s);
  void flush();
  // Marks the output as not to be kept (the writer found its input bad half way): write_json_file_atomically then
  // leaves the target as it was.
  void abandon() { failed_ = true; }
  bool failed() const { return failed_; }
  uint64_t written() const { return written_; }

 private:
  void ensure(size_t k);
  static constexpr size_t kCap = 1 << 20;
  FILE* f_;
  std::unique_ptr<char[]> buf_;
  size_t n_ = 0;
  bool failed_ = false;
  uint64_t written_ = 0;
};

// One sample of the counter `name` as a Chrome counter event ("ph":"C") under process `pid`: the Chrome export and
// the Kineto export both write counters this way.
void counter_event(JsonOut& o, std::string_view name, int64_t pid, int64_t ts_ns, uint64_t value);

// The trace events every export writes, in the two layouts their readers were tested on: Chrome's compact one
// (`{"ph":"M","name":...}`: our Chrome export and the merged export of users' files) and Kineto's spaced one with
// PyTorch's key order (`{"name": ..., "ph": "M", ...}`: our runs as Kineto traces). The separator before an event is
// the caller's.
enum class EventLayout { chrome, kineto };
inline constexpr int64_t kNoTid = -1;  // a process's metadata event: no "tid" (the Chrome layout omits it)
// `"key":` (`"key": ` in Kineto's layout), after the separator unless it opens the event: what every event field
// starts with, also in the merged export's pass-through of users' events.
void event_key(JsonOut& o, EventLayout l, std::string_view k, bool first = false);
// "M" metadata: `name` (process_name, thread_sort_index, ...) with args {key: text} or {key: number}.
void metadata_event(JsonOut& o, EventLayout l, std::string_view name, int64_t pid, int64_t tid, std::string_view key,
                    std::string_view text);
void metadata_event(JsonOut& o, EventLayout l, std::string_view name, int64_t pid, int64_t tid, std::string_view key,
                    int64_t number);
// An "X" complete event up to and including `"args": {`: the caller writes the args and closes with "}}".
void complete_event_head(JsonOut& o, EventLayout l, std::string_view name, std::string_view cat, int64_t pid,
                         int64_t tid, int64_t ts_ns, int64_t dur_ns);
// One end of a launch arrow: 's' on the runtime call, 'f' (bound to the enclosing slice) on the GPU work; `name`
// and `cat` as each layout's readers expect them.
void flow_event(JsonOut& o, EventLayout l, char ph, std::string_view name, uint64_t id, int64_t pid, int64_t tid,
                int64_t ts_ns);

// Writes `path` through `body` into a temp file beside it, renamed over `path` when whole: a full disk or a failed
// write leaves the previous file (or none), never a truncated one. A path ending in ".gz" is written gzip-compressed.
// `bytes` is the JSON text's size (before compression). False with `error` naming the path.
bool write_json_file_atomically(const std::string& path, const std::function<void(JsonOut&)>& body, uint64_t& bytes,
                                std::string& error);

}  // namespace ddp
