// Reading Flight Recorder dumps: bytes -> JSON value (nlohmann, or the plain-pickle reader) -> FrDump. Fields are
// read by name with their types checked, so a dump of a newer torch with fields added still reads, and one with a
// field of another type is refused naming the field.
#include "traces/flight_recorder/fr_dump.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "traces/flight_recorder/plain_pickle.h"

namespace ddp {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A dump holds at most the ring buffer (TORCH_FR_BUFFER_SIZE entries, ~1 KB each with frames): past this it is not one.
constexpr uintmax_t kMaxDumpBytes = uintmax_t{1} << 30;

bool read_file(const std::string& path, std::string& bytes, std::string& error) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) {
    error = path + ": " + ec.message();
    return false;
  }
  if (size > kMaxDumpBytes) {
    error = path + ": " + std::to_string(size) + " bytes is larger than any Flight Recorder dump";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  bytes.resize(static_cast<size_t>(size));
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    error = path + ": cannot be read";
    return false;
  }
  return true;
}

// torch names a dump `<prefix><rank>` (TORCH_FR_DUMP_TEMP_FILE); ours are rank<R>.json: the trailing number of the
// name without its extension.
int rank_of_name(const std::string& path) {
  std::string stem = fs::path(path).filename().string();
  for (const char* ext : {".json", ".pkl", ".pickle"})
    if (stem.size() > std::strlen(ext) && stem.compare(stem.size() - std::strlen(ext), std::string::npos, ext) == 0)
      stem.resize(stem.size() - std::strlen(ext));
  size_t k = stem.size();
  while (k > 0 && std::isdigit(static_cast<unsigned char>(stem[k - 1]))) --k;
  if (k == stem.size() || stem.size() - k > 6) return -1;
  return std::stoi(stem.substr(k));
}

// The field `key` of `j` as T, or `fallback` when absent or null; a value of another type is an error naming it.
class Fields {
 public:
  Fields(const json& j, std::string where, std::string& error) : j_(j), where_(std::move(where)), error_(error) {}
  bool ok() const { return error_.empty(); }

  std::string text(const char* key) {
    const json* v = find(key);
    if (!v) return {};
    if (v->is_string()) return v->get<std::string>();
    if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
    return bad(key, "a string");
  }
  int64_t integer(const char* key, int64_t fallback = 0) {
    const json* v = find(key);
    if (!v) return fallback;
    if (v->is_number_integer()) return v->get<int64_t>();
    if (v->is_string()) {  // pg_status writes its sequence ids as text
      try {
        return std::stoll(v->get<std::string>());
      } catch (...) {
      }
    }
    bad(key, "an integer");
    return fallback;
  }
  double real(const char* key, double fallback) {
    const json* v = find(key);
    if (!v) return fallback;
    if (v->is_number()) return v->get<double>();
    bad(key, "a number");
    return fallback;
  }
  bool flag(const char* key) {
    const json* v = find(key);
    if (!v) return false;
    if (v->is_boolean()) return v->get<bool>();
    bad(key, "true or false");
    return false;
  }
  std::vector<std::string> texts(const char* key) {
    std::vector<std::string> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) return bad(key, "a list"), out;
    for (const json& e : *v) {
      if (!e.is_string()) return bad(key, "a list of strings"), out;
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  std::vector<std::vector<int64_t>> shapes(const char* key) {
    std::vector<std::vector<int64_t>> out;
    const json* v = find(key);
    if (!v) return out;
    if (!v->is_array()) return bad(key, "a list of shapes"), out;
    for (const json& s : *v) {
      if (!s.is_array()) return bad(key, "a list of shapes"), out;
      std::vector<int64_t> dims;
      for (const json& d : s) {
        if (!d.is_number_integer()) return bad(key, "a list of shapes"), out;
        dims.push_back(d.get<int64_t>());
      }
      out.push_back(std::move(dims));
    }
    return out;
  }
  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

 private:
  std::string bad(const char* key, const char* what) {
    if (error_.empty()) error_ = where_ + ": \"" + key + "\" is not " + what;
    return {};
  }
  const json& j_;
  std::string where_;
  std::string& error_;
};

// "[0, 1, 2]" (pg_config writes a group's ranks as the text of a list) -> {0, 1, 2}.
std::vector<int> parse_rank_list(const std::string& text) {
  std::vector<int> out;
  std::string digits;
  for (char c : text + ",") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
    } else if (!digits.empty()) {
      if (digits.size() <= 6) out.push_back(std::stoi(digits));
      digits.clear();
    }
  }
  return out;
}

// Frames of torch's own package (torch.distributed's wrappers are the innermost of every collective) and of our
// companion's (its gradient hook under --check) are not where the user's code enqueued a collective.
bool library_frame(const std::string& file) {
  if (file.find("/torch/") != std::string::npos) return true;
  const fs::path parent = fs::path(file).parent_path();
  return parent.filename() == "ddp_profile";  // the companion's package, wherever it was installed
}

// The frame a user recognises: the innermost one outside torch and the companion, else the innermost.
std::string user_frame(const json& e) {
  auto it = e.find("frames");
  if (it == e.end() || !it->is_array()) return {};
  const json* pick = nullptr;
  for (const json& f : *it) {
    if (!f.is_object()) continue;
    if (!pick) pick = &f;
    auto file = f.find("filename");
    if (file != f.end() && file->is_string() && !library_frame(file->get<std::string>())) {
      pick = &f;
      break;
    }
  }
  if (!pick) return {};
  auto str = [&](const char* k) {
    auto v = pick->find(k);
    return v != pick->end() && v->is_string() ? v->get<std::string>() : std::string();
  };
  auto line = pick->find("line");
  std::string where = str("filename");
  if (line != pick->end() && line->is_number_integer()) where += ":" + std::to_string(line->get<int64_t>());
  const std::string name = str("name");
  return name.empty() ? where : where + " (" + name + ")";
}

bool read_entry(const json& e, size_t index, const std::string& path, FrEntry& out, std::string& error) {
  if (!e.is_object()) {
    error = path + ": entry " + std::to_string(index) + " is not an object";
    return false;
  }
  Fields f(e, path + ": entry " + std::to_string(index), error);
  out.record_id = f.integer("record_id", -1);
  out.collective_seq = f.integer("collective_seq_id");
  out.p2p_seq = f.integer("p2p_seq_id");
  out.is_p2p = f.flag("is_p2p");
  const std::string profiling = f.text("profiling_name");
  const size_t colon = profiling.find(':');
  out.backend = colon == std::string::npos ? std::string() : profiling.substr(0, colon);
  out.op = colon == std::string::npos ? profiling : profiling.substr(colon + 1);
  out.input_sizes = f.shapes("input_sizes");
  out.output_sizes = f.shapes("output_sizes");
  out.input_dtypes = f.texts("input_dtypes");
  out.output_dtypes = f.texts("output_dtypes");
  out.state = f.text("state");
  out.retired = f.flag("retired");
  out.created_ns = f.integer("time_created_ns");
  out.started_ns = f.integer("time_discovered_started_ns");
  out.completed_ns = f.integer("time_discovered_completed_ns");
  out.duration_ms = f.real("duration_ms", -1);
  out.timeout_ms = f.integer("timeout_ms");
  out.frame = user_frame(e);
  // process_group: [id, description]; older dumps have pg_id alone.
  const json* pg = f.find("process_group");
  if (pg && pg->is_array() && !pg->empty() && (*pg)[0].is_string()) {
    out.group = (*pg)[0].get<std::string>();
    if (pg->size() > 1 && (*pg)[1].is_string()) out.group_name = (*pg)[1].get<std::string>();
  } else {
    out.group = std::to_string(f.integer("pg_id"));
  }
  if (out.op.empty() && error.empty()) error = path + ": entry " + std::to_string(index) + " has no profiling_name";
  return error.empty();
}

bool read_dump_value(const json& j, FrDump& out, std::string& error) {
  const std::string& path = out.path;
  if (!j.is_object() || !j.contains("entries") || !j.contains("version")) {
    error = path + ": not a Flight Recorder dump (no \"version\" and \"entries\")";
    return false;
  }
  Fields top(j, path, error);
  out.version = top.text("version");
  const json& entries = j["entries"];
  if (!entries.is_array()) {
    error = path + ": \"entries\" is not a list";
    return false;
  }
  out.entries.resize(entries.size());
  for (size_t k = 0; k < entries.size(); ++k)
    if (!read_entry(entries[k], k, path, out.entries[k], error)) return false;
  if (const json* cfg = top.find("pg_config"); cfg && cfg->is_object()) {
    for (const auto& [key, g] : cfg->items()) {
      if (!g.is_object()) continue;
      Fields gf(g, path + ": pg_config", error);
      FrGroup group{gf.text("name"), gf.text("name"), gf.text("desc"), parse_rank_list(gf.text("ranks"))};
      if (group.id.empty()) group.id = key;
      // Gloo's default group in torch 2.11 is configured under "" while its entries say "0" (what makes torch's own
      // fr_trace fail with KeyError ('0', 0)).
      if (group.id.empty()) {
        out.notes.push_back("pg_config names a group with no id (Gloo's default group): taken as group 0");
        group.id = "0";
      }
      out.groups[group.id] = group;
    }
  }
  if (const json* st = top.find("pg_status"); st && st->is_object()) {
    for (const auto& [key, s] : st->items()) {
      if (!s.is_object()) continue;
      Fields sf(s, path + ": pg_status", error);
      out.status[key] = {sf.integer("last_enqueued_collective", -1), sf.integer("last_started_collective", -1),
                         sf.integer("last_completed_collective", -1)};
    }
  }
  return error.empty();
}

}  // namespace

bool looks_like_fr_dump(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[4096];
  in.read(head, sizeof head);
  const std::string_view h(head, static_cast<size_t>(in.gcount()));
  if (looks_like_pickle(h))
    return h.find("entries") != std::string_view::npos || h.find("version") != std::string_view::npos;
  const size_t first = h.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || h[first] != '{') return false;
  // JSON: torch writes its keys sorted, "comm_lib_version" and "entries" first; a Chrome trace has "traceEvents".
  return h.find("\"entries\"") != std::string_view::npos && h.find("\"traceEvents\"") == std::string_view::npos;
}

bool read_fr_dump(const std::string& path, int rank, FrDump& out, std::string& error) {
  out = FrDump{};
  out.path = path;
  out.rank = rank >= 0 ? rank : rank_of_name(path);
  if (out.rank < 0) {
    error = path + ": the file name ends in no rank number (torch names dumps <prefix><rank>)";
    return false;
  }
  std::string bytes;
  if (!read_file(path, bytes, error)) return false;
  json j;
  if (looks_like_pickle(bytes)) {
    if (!read_plain_pickle(bytes, j, error)) {
      error = path + ": " + error;
      return false;
    }
  } else {
    j = json::parse(bytes, nullptr, false);
    if (j.is_discarded()) {
      error = path + ": neither a pickle nor valid JSON";
      return false;
    }
  }
  return read_dump_value(j, out, error);
}

bool read_fr_dumps(const std::vector<std::string>& inputs, std::vector<FrDump>& out, std::string& error) {
  out.clear();
  std::error_code ec;
  std::vector<std::string> paths;
  for (const std::string& in : inputs) {
    if (!fs::is_directory(in, ec)) {
      paths.push_back(in);
      continue;
    }
    std::vector<std::string> here;
    for (const auto& e : fs::directory_iterator(in, ec))
      if (e.is_regular_file(ec) && looks_like_fr_dump(e.path().string())) here.push_back(e.path().string());
    if (ec) {
      error = in + ": " + ec.message();
      return false;
    }
    std::sort(here.begin(), here.end());
    paths.insert(paths.end(), here.begin(), here.end());
  }
  if (paths.empty()) {
    error = "no Flight Recorder dump among the inputs";
    return false;
  }
  std::map<int, std::string> by_rank;
  for (const std::string& p : paths) {
    FrDump d;
    if (!read_fr_dump(p, -1, d, error)) return false;
    auto [it, fresh] = by_rank.emplace(d.rank, p);
    if (!fresh) {
      error = "rank " + std::to_string(d.rank) + " has two dumps: " + it->second + " and " + p +
              " (one per rank: torch's JSON and pickle of one moment are the same dump)";
      return false;
    }
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const FrDump& a, const FrDump& b) { return a.rank < b.rank; });
  return true;
}

bool is_fr_input(const std::vector<std::string>& inputs) {
  std::error_code ec;
  for (const std::string& p : inputs) {
    if (fs::is_regular_file(p, ec)) {
      if (!looks_like_fr_dump(p)) return false;
      continue;
    }
    if (!fs::is_directory(p, ec)) return false;
    bool any = false;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (e.is_regular_file(ec) && looks_like_fr_dump(e.path().string())) {
        any = true;
        break;
      }
    if (!any) return false;
  }
  return !inputs.empty();
}

}  // namespace ddp
