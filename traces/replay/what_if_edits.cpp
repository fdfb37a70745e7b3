// --what-if's edits read from the command line (what_if_edits.h).
#include "traces/replay/what_if_edits.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

namespace ddp {

const char* const kEditForms =
    "rank<R>.<stage>=median, workers=N, prefetch=N, bandwidth=X[GB/s|Gb/s|MB/s], bucket_cap_mb=X, accum=K, "
    "ranks=N, nodes=M, cores=N";

namespace {

using Kind = ReplayEdit::Kind;

bool number(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(v);
}

bool count(const std::string& s, double lo, double hi, double& v) {
  return number(s, v) && v == std::floor(v) && v >= lo && v <= hi;
}

// A link's bandwidth in bytes/s: GB/s (a bare number too), Gb/s or Gbit/s, MB/s.
bool bandwidth(std::string s, double& bytes_per_s) {
  const std::pair<const char*, double> units[] = {{"GB/s", 1e9}, {"Gbit/s", 1e9 / 8}, {"Gb/s", 1e9 / 8}, {"MB/s", 1e6}};
  double scale = 1e9;
  for (const auto& [unit, factor] : units) {
    const std::string u(unit);
    if (s.size() > u.size() && s.compare(s.size() - u.size(), u.size(), u) == 0) {
      s.resize(s.size() - u.size());
      scale = factor;
      break;
    }
  }
  double v = 0;
  if (!number(s, v) || v <= 0) return false;
  bytes_per_s = v * scale;
  return true;
}

// rank<R>.<stage>=median, its key `rank<R>.<stage>`: a rank's stage set as on the median rank, where the replay runs
// that stage (editable()).
bool parse_stage_edit(const std::string& key, const std::string& val, ReplayEdit& e, std::string& err) {
  const size_t dot = key.find('.');
  const std::string stage = key.substr(dot + 1);
  double v = 0;
  if (!count(key.substr(4, dot - 4), 0, 1 << 20, v)) {
    err = "--what-if: \"" + key + "\" names no rank (rank<R>.<stage>, e.g. rank1.forward)";
    return false;
  }
  e.kind = Kind::stage_as_median;
  e.rank = static_cast<int>(v);
  if (val != "median") {
    err = "--what-if: " + key + " can be set to the median rank's (" + key + "=median), not to \"" + val + "\"";
    return false;
  }
  if (stage == "other") {
    e.other = true;
    return true;
  }
  const std::optional<Stage> s = stage_from_name(stage);
  if (!s) {
    err = "--what-if: no stage \"" + stage + "\" (editable: " + editable_stage_names() + ")";
    return false;
  }
  if (is_wait(*s) || stage_has(*s, kStageCommunication)) {
    err = "--what-if: " + stage +
          " is time spent waiting for another stage or rank: edit that one (or the link: "
          "bandwidth=X)";
    return false;
  }
  if (!editable(*s)) {
    err = "--what-if: the replay does not run " + stage +
          " as time of its own: setting it would change nothing (editable: " + editable_stage_names() + ")";
    return false;
  }
  e.stage = *s;
  return true;
}

bool parse_one(const std::string& part, WhatIfEdit& out, std::string& err) {
  out.text = part;
  const size_t eq = part.find('=');
  if (eq == std::string::npos) {
    err = "--what-if: \"" + part + "\" is not an edit (" + kEditForms + ")";
    return false;
  }
  const std::string key = part.substr(0, eq), val = part.substr(eq + 1);
  ReplayEdit& e = out.edit;
  double v = 0;
  if (key.rfind("rank", 0) == 0 && key.find('.') != std::string::npos) return parse_stage_edit(key, val, e, err);
  if (key == "workers" && count(val, 0, 1024, v)) {
    e.kind = Kind::workers, e.value = v;
  } else if (key == "prefetch" && count(val, 1, 1024, v)) {
    e.kind = Kind::prefetch, e.value = v;
  } else if (key == "bandwidth" && bandwidth(val, v)) {
    e.kind = Kind::bandwidth, e.value = v;
  } else if (key == "bucket_cap_mb" && number(val, v) && v > 0 && v <= 1e6) {
    e.kind = Kind::bucket_cap, e.value = v * 1024 * 1024;  // DDP: int(bucket_cap_mb * 1024 * 1024)
  } else if (key == "accum" && count(val, 1, 255, v)) {
    e.kind = Kind::accumulate, e.value = v;
  } else if (key == "ranks" && count(val, 2, 1 << 20, v)) {
    e.kind = Kind::ranks, e.value = v;
  } else if (key == "nodes" && count(val, 1, 1 << 16, v)) {
    e.kind = Kind::nodes, e.value = v;
  } else if (key == "cores" && number(val, v) && v > 0 && v <= 1 << 16) {
    e.kind = Kind::cores, e.value = v;
  } else if (key == "workers" || key == "prefetch" || key == "bandwidth" || key == "bucket_cap_mb" || key == "accum" ||
             key == "ranks" || key == "nodes" || key == "cores") {
    const std::map<std::string, const char*> takes = {
        {"workers", "a count from 0 to 1024"},
        {"prefetch", "a count from 1 to 1024"},
        {"bandwidth", "a positive number with GB/s, Gb/s or MB/s (bare: GB/s), the link's bus bandwidth"},
        {"bucket_cap_mb", "a positive number of MB"},
        {"accum", "a count of micro-steps from 1 to 255"},
        {"ranks", "a count of ranks from 2"},
        {"nodes", "a count of machines from 1"},
        {"cores", "a positive number of cores (a cgroup's share may be fractional)"}};
    err = "--what-if: " + part + ": " + key + " takes " + takes.at(key);
    return false;
  } else {
    err = "--what-if: no edit \"" + key + "\" (" + kEditForms + ")";
    return false;
  }
  return true;
}

}  // namespace

bool editable(Stage s) { return !is_wait(s) && (stage_has(s, kStageMainThread) || stage_has(s, kStageLoaderThread)); }

std::string editable_stage_names() {
  std::string out;
  for (int i = 0; i < kStageCount; ++i)
    if (editable(static_cast<Stage>(i))) out += std::string(stage_name(static_cast<Stage>(i))) + ", ";
  return out + "other";
}

bool parse_what_if(const std::string& text, std::vector<WhatIfEdit>& out, std::string& err) {
  out.clear();
  std::set<std::string> seen;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    WhatIfEdit e;
    if (!parse_one(text.substr(at, comma - at), e, err)) return false;
    const std::string kind = e.edit.kind == Kind::stage_as_median ? e.text : e.text.substr(0, e.text.find('='));
    if (!seen.insert(kind).second) {
      err = "--what-if: " + kind + " is given twice";
      return false;
    }
    out.push_back(e);
    at = comma + 1;
  }
  return true;
}

}  // namespace ddp
