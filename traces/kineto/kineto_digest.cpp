// The digest file: a KFile written and read back whole (kineto_digest.h says the layout), and --digest's making of
// them from a node's traces.
#include "traces/kineto/kineto_digest.h"

#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "traces/base/atomic_file.h"
#include "traces/base/varint.h"

namespace ddp {
namespace fs = std::filesystem;
using kineto_detail::KFile;
using kineto_detail::KSpan;

namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'D', 'G', 'S', 'T', '1'};
constexpr int kFormatVersion = 1;
// A digest is ~1 % of its trace: a payload above this is damage, not a digest (and would be allocated whole).
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 32;
constexpr uint8_t kWaitUntilFirstOp = 1;

// a + b wrapping around instead of overflowing: damaged deltas give wrong numbers, which are checked, not UB.
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

nlohmann::json status_json(const ChromeStatus& s) {
  return {{"error", static_cast<int>(s.error)}, {"message", s.message}, {"offset", s.offset}};
}

bool status_from_json(const nlohmann::json& j, ChromeStatus& s) {
  const int e = j.at("error").get<int>();
  if (e < 0 || e > static_cast<int>(ChromeError::too_large)) return false;
  s.error = static_cast<ChromeError>(e);
  s.message = j.at("message").get<std::string>();
  s.offset = j.at("offset").get<uint64_t>();
  return true;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// The operators in the untracked time as the header keeps them: {steps, untracked_ns, operators: [[name, ns, calls]]};
// null when they were not looked for (a digest made before they were).
nlohmann::json operators_json(const std::optional<KinetoUntrackedOperators>& u) {
  if (!u) return nullptr;
  nlohmann::json ops = nlohmann::json::array();
  for (const KinetoOperatorTime& o : u->operators) ops.push_back({o.name, o.untracked_ns, o.calls});
  return {{"steps", u->steps}, {"untracked_ns", u->untracked_ns}, {"operators", ops}};
}

std::optional<KinetoUntrackedOperators> operators_from_json(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  KinetoUntrackedOperators u;
  u.steps = j.at("steps").get<uint32_t>();
  u.untracked_ns = j.at("untracked_ns").get<int64_t>();
  for (const auto& o : j.at("operators"))
    u.operators.push_back({o.at(0).get<std::string>(), o.at(1).get<int64_t>(), o.at(2).get<uint32_t>()});
  return u;
}

nlohmann::json header_of(const KFile& f, uint64_t source_bytes) {
  return {{"format_version", kFormatVersion},
          {"host", host_name()},
          {"path", f.path},
          {"name", f.name},
          {"source_bytes", source_bytes},
          {"rank", f.rank},
          {"world", f.world},
          {"rank_from", f.rank_from},
          {"backend", f.backend},
          {"base_ns", f.base_ns},
          {"array_format", f.array_format},
          {"schema_version", f.schema_version},
          {"threads", f.threads},
          {"names", f.names},
          {"process_groups", f.process_groups},
          {"spans", f.spans.size()},
          {"events", f.events},
          {"negative_durations", f.negative_durations},
          {"status", status_json(f.status)},
          {"cut_off", status_json(f.cut_off)},
          {"not_strict", f.not_strict},
          {"untracked_operators", operators_json(f.untracked_operators)}};
}

// Column by column (every span's start, then every duration, ...): each column's values are alike, which zstd
// packs several times better than the fields of a span side by side. Starts and correlations as deltas.
void put_spans(std::string& out, const std::vector<KSpan>& spans) {
  int64_t prev = 0;
  for (const KSpan& s : spans) put_varint(out, zigzag(s.t0 - std::exchange(prev, s.t0)));
  for (const KSpan& s : spans) put_varint(out, zigzag(s.t1 - s.t0));
  for (const KSpan& s : spans) put_varint(out, s.bytes);
  for (const KSpan& s : spans) put_varint(out, s.step);
  int64_t prev_corr = 0;
  for (const KSpan& s : spans)
    put_varint(out, zigzag(int64_t{s.correlation} - std::exchange(prev_corr, s.correlation)));
  for (const KSpan& s : spans) put_varint(out, s.name);
  for (const KSpan& s : spans) put_varint(out, s.thread);
  for (const KSpan& s : spans) put_varint(out, s.pg);
  for (const KSpan& s : spans) out.push_back(static_cast<char>(s.stage));
  for (const KSpan& s : spans) out.push_back(static_cast<char>(s.collective));
  for (const KSpan& s : spans) out.push_back(static_cast<char>(s.wait_until_first_op ? kWaitUntilFirstOp : 0));
}

// A column of `n` varints, each checked to fit `max`.
template <typename T>
void get_column(VarintReader& c, std::vector<KSpan>& spans, T KSpan::*field, uint64_t max) {
  for (KSpan& s : spans) {
    const uint64_t v = c.varint();
    if (v > max) c.ok = false;
    s.*field = static_cast<T>(v);
  }
}

// The spans, each checked against the header's tables: an index out of range is damage.
bool get_spans(VarintReader& c, const KFile& f, size_t n, std::vector<KSpan>& spans, std::string& why) {
  spans.resize(n);
  int64_t prev = 0;
  for (KSpan& s : spans) s.t0 = prev = wrap_add(prev, unzigzag(c.varint()));
  for (KSpan& s : spans) s.t1 = wrap_add(s.t0, unzigzag(c.varint()));
  get_column(c, spans, &KSpan::bytes, std::numeric_limits<uint64_t>::max());
  get_column(c, spans, &KSpan::step, std::numeric_limits<uint32_t>::max());
  int64_t corr = 0;
  for (KSpan& s : spans) {
    corr = wrap_add(corr, unzigzag(c.varint()));
    if (corr < 0 || corr > std::numeric_limits<uint32_t>::max()) c.ok = false;
    s.correlation = static_cast<uint32_t>(corr);
  }
  get_column(c, spans, &KSpan::name, std::numeric_limits<uint32_t>::max());
  get_column(c, spans, &KSpan::thread, std::numeric_limits<uint16_t>::max());
  get_column(c, spans, &KSpan::pg, std::numeric_limits<uint16_t>::max());
  std::vector<uint8_t> stage(n), coll(n);
  for (uint8_t& b : stage) b = c.byte();
  for (uint8_t& b : coll) b = c.byte();
  for (KSpan& s : spans) s.wait_until_first_op = c.byte() & kWaitUntilFirstOp;
  if (!c.ok) {
    why = "the spans end early or hold a number out of range";
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    KSpan& s = spans[i];
    // The importer indexes its tables with these: CUDA records name one, other spans none; every span a thread.
    const bool cuda = stage[i] < kStageCount &&
                      (is_gpu_activity(static_cast<Stage>(stage[i])) || is_cuda_host(static_cast<Stage>(stage[i])));
    if ((cuda ? s.name >= f.names.size() : s.name != 0) || s.thread >= f.threads.size() ||
        s.pg >= f.process_groups.size() || stage[i] >= kStageCount ||
        coll[i] > static_cast<uint8_t>(CollectiveSource::none)) {
      why = "span " + std::to_string(i) + " names a table entry, stage or source that does not exist";
      return false;
    }
    s.stage = static_cast<Stage>(stage[i]);
    s.collective = static_cast<CollectiveSource>(coll[i]);
  }
  return true;
}

void header_into(const nlohmann::json& h, KFile& f) {
  f.path = h.at("path").get<std::string>();
  f.name = h.at("name").get<std::string>();
  f.rank = h.at("rank").get<int>();
  f.world = h.at("world").get<int>();
  f.rank_from = h.at("rank_from").get<std::string>();
  f.backend = h.at("backend").get<std::string>();
  f.base_ns = h.at("base_ns").get<int64_t>();
  f.array_format = h.at("array_format").get<bool>();
  f.schema_version = h.at("schema_version").get<int>();
  f.threads = h.at("threads").get<std::vector<std::string>>();
  f.names = h.at("names").get<std::vector<std::string>>();
  f.process_groups = h.at("process_groups").get<std::vector<std::string>>();
  f.events = h.at("events").get<uint64_t>();
  f.negative_durations = h.at("negative_durations").get<uint64_t>();
  f.not_strict = h.at("not_strict").get<std::string>();
  if (h.contains("untracked_operators")) f.untracked_operators = operators_from_json(h["untracked_operators"]);
}

// The payload of the digest at `path`, decompressed; false with `why` set.
bool read_payload(const std::string& path, std::string& payload, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot open it";
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 16 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    why = "not a ddp_profile digest (made by ddp_profile --digest)";
    return false;
  }
  uint64_t raw = 0;
  for (int i = 0; i < 8; ++i) raw |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  const unsigned long long framed = ZSTD_getFrameContentSize(bytes.data() + 16, bytes.size() - 16);
  if (raw > kMaxPayloadBytes || framed != raw) {
    why = "its size fields disagree (the file is damaged or cut off)";
    return false;
  }
  payload.resize(raw);
  const size_t n = ZSTD_decompress(payload.data(), payload.size(), bytes.data() + 16, bytes.size() - 16);
  if (ZSTD_isError(n) || n != raw) {
    why = std::string("its compressed data is damaged (") + (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short") + ")";
    return false;
  }
  return true;
}

// The payload's JSON header; the cursor is left at the spans.
bool read_header(VarintReader& c, nlohmann::json& h, std::string& why) {
  const uint64_t len = c.varint();
  if (!c.ok || len > static_cast<uint64_t>(c.end - c.p)) {
    why = "its header is cut off";
    return false;
  }
  h = nlohmann::json::parse(c.p, c.p + len, nullptr, false);
  c.p += len;
  if (!h.is_object() || !h.contains("format_version")) {
    why = "its header is not the JSON object a digest starts with";
    return false;
  }
  if (h["format_version"] != kFormatVersion) {
    why = "format version " + h["format_version"].dump() + " (this ddp_profile reads " +
          std::to_string(kFormatVersion) + "): make the digests with the ddp_profile that analyses them";
    return false;
  }
  return true;
}

bool decode(const std::string& payload, KFile& f, std::string& why) {
  VarintReader c{reinterpret_cast<const uint8_t*>(payload.data()),
                 reinterpret_cast<const uint8_t*>(payload.data()) + payload.size()};
  nlohmann::json h;
  if (!read_header(c, h, why)) return false;
  try {
    header_into(h, f);
    if (!status_from_json(h.at("status"), f.status) || !status_from_json(h.at("cut_off"), f.cut_off)) {
      why = "its header names a reader status that does not exist";
      return false;
    }
    const uint64_t n = h.at("spans").get<uint64_t>();
    // Each span takes at least 11 bytes: a count beyond that is damage, not a size to allocate.
    if (n > static_cast<uint64_t>(c.end - c.p) / 11) {
      why = "its header claims more spans than it holds";
      return false;
    }
    if (f.process_groups.empty()) f.process_groups = {""};
    return get_spans(c, f, static_cast<size_t>(n), f.spans, why);
  } catch (const nlohmann::json::exception& e) {
    why = std::string("its header lacks a field or has one of the wrong type (") + e.what() + ")";
    return false;
  }
}

// A digest of this name already in the folder may be replaced only by the same trace's (a node digesting again).
bool may_replace(const std::string& target, const std::string& host, const KFile& f, std::string& error) {
  std::error_code ec;
  if (!fs::exists(target, ec)) return true;
  DigestOrigin o;
  std::string why;
  if (!read_digest_origin(target, o, why)) {
    error = target + " exists and is not a digest this ddp_profile reads (" + why + "): not replaced";
    return false;
  }
  if (o.host == host && o.path == f.path) return true;
  error = target + " already holds the digest of " + o.host + ":" + o.path + "; " + f.path +
          " would replace it (two traces of rank " + std::to_string(f.rank) + " with one file name?)";
  return false;
}

}  // namespace

bool is_digest_file_name(const std::string& name) {
  const size_t n = std::strlen(kDigestSuffix);
  return name.size() > n && name.compare(name.size() - n, n, kDigestSuffix) == 0;
}

bool names_digests(const std::vector<std::string>& inputs) {
  std::error_code ec;
  for (const std::string& in : inputs) {
    if (is_digest_file_name(fs::path(in).filename().string())) return true;
    if (!fs::is_directory(in, ec)) continue;
    for (const auto& e : fs::directory_iterator(in, ec))
      if (is_digest_file_name(e.path().filename().string())) return true;
  }
  return false;
}

std::string digest_file_name(const KFile& f) {
  std::string stem = f.name.empty() ? fs::path(f.path).filename().string() : f.name;
  for (const char* ext : {".json.gz", ".json"})
    if (stem.size() > std::strlen(ext) && stem.compare(stem.size() - std::strlen(ext), std::string::npos, ext) == 0) {
      stem.resize(stem.size() - std::strlen(ext));
      break;
    }
  const std::string rank = "rank" + (f.rank >= 0 ? std::to_string(f.rank) : std::string("unknown")) + ".";
  // torch's trace handler names files rank<R>.<time>.pt.trace.json: the rank is said once.
  return (stem.rfind(rank, 0) == 0 ? stem : rank + stem) + kDigestSuffix;
}

bool write_digest(const KFile& f, uint64_t source_bytes, const std::string& path, std::string& error) {
  std::string payload;
  const std::string header = header_of(f, source_bytes).dump();
  put_varint(payload, header.size());
  payload += header;
  put_spans(payload, f.spans);
  std::string out(16, '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<char>(static_cast<uint64_t>(payload.size()) >> (8 * i));
  const size_t bound = ZSTD_compressBound(payload.size());
  out.resize(16 + bound);
  const size_t n = ZSTD_compress(out.data() + 16, bound, payload.data(), payload.size(), 19);
  if (ZSTD_isError(n)) {
    error = path + ": zstd: " + ZSTD_getErrorName(n);
    return false;
  }
  out.resize(16 + n);
  return write_file_atomically(path, out, error);
}

KFile read_digest(const std::string& path) {
  KFile f;
  std::string payload, why;
  if (read_payload(path, payload, why) && decode(payload, f, why)) {
    f.digest = path;
    return f;
  }
  KFile bad;
  bad.path = path;
  bad.name = fs::path(path).filename().string();
  bad.status.error = ChromeError::not_a_trace;
  bad.status.message = "damaged digest: " + why;
  return bad;
}

bool read_digest_origin(const std::string& path, DigestOrigin& origin, std::string& error) {
  std::string payload, why;
  nlohmann::json h;
  if (read_payload(path, payload, why)) {
    VarintReader c{reinterpret_cast<const uint8_t*>(payload.data()),
                   reinterpret_cast<const uint8_t*>(payload.data()) + payload.size()};
    if (read_header(c, h, why)) try {
        origin.host = h.at("host").get<std::string>();
        origin.path = h.at("path").get<std::string>();
        origin.source_bytes = h.at("source_bytes").get<uint64_t>();
        origin.rank = h.at("rank").get<int>();
        return true;
      } catch (const nlohmann::json::exception& e) {
        why = std::string("its header lacks a field or has one of the wrong type (") + e.what() + ")";
      }
  }
  error = path + ": " + why;
  return false;
}

bool make_digests(const std::vector<std::string>& inputs, const KinetoStageMap& map, const std::string& out_dir,
                  std::vector<DigestMade>& made, std::string& error) {
  std::vector<std::string> paths;
  if (!kineto_detail::list_trace_files(inputs, paths, error)) return false;
  for (const std::string& p : paths)
    if (is_digest_file_name(p)) {
      error = p + ": already a digest (--digest reads profiler traces: *.json, *.json.gz)";
      return false;
    }
  // The operators in each trace's untracked time, found in the same reading (kineto_operators.h).
  std::map<std::string, std::shared_ptr<UntrackedOperatorReader>> operators;
  const std::function<ChromeEventFn(const std::string&)> each_file = [&](const std::string& path) -> ChromeEventFn {
    auto reader = std::make_shared<UntrackedOperatorReader>(map);
    operators[path] = reader;
    return [reader](const ChromeEventView& e) { return (*reader)(e); };
  };
  std::vector<KFile> files = kineto_detail::read_trace_files(paths, map, &each_file);
  for (KFile& f : files)
    if (f.status.ok()) f.untracked_operators = operators.at(f.path)->finish();
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir, ec)) {
    error = out_dir + ": cannot create the folder for the digests";
    return false;
  }
  // Every target is checked before the first is written: a refused call leaves the folder as it was.
  const std::string host = host_name();
  std::map<std::string, const KFile*> targets;
  for (const KFile& f : files) {
    const std::string target = out_dir + "/" + digest_file_name(f);
    if (auto [it, fresh] = targets.emplace(target, &f); !fresh) {
      error = f.path + " and " + it->second->path + " would both be " + target + " (one rank, one file name)";
      return false;
    }
    if (!may_replace(target, host, f, error)) return false;
  }
  for (const auto& [target, f] : targets) {
    DigestMade d;
    d.trace = f->path;
    d.digest = target;
    d.rank = f->rank;
    d.trace_bytes = fs::file_size(f->path, ec);
    if (ec) d.trace_bytes = 0;
    d.json_bytes = f->status.ok() ? chrome_text_bytes_estimate(f->path) : 0;
    if (!f->status.ok()) d.problem = f->status.message;
    if (!write_digest(*f, d.trace_bytes, target, error)) return false;
    d.digest_bytes = fs::file_size(target, ec);
    made.push_back(std::move(d));
  }
  return true;
}

}  // namespace ddp
