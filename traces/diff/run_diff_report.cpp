// The run diff as JSON (`ddp_profile --diff A B --json`, docs/diff.md) and as the text report.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "traces/base/text_format.h"
#include "traces/diff/run_diff.h"

namespace ddp {
namespace {

nlohmann::json opt_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json delta_json(const Delta& d) {
  nlohmann::json j = {{"a", opt_json(d.a)}, {"b", opt_json(d.b)}, {"delta", nullptr}, {"delta_pct", nullptr}};
  if (d.a && d.b) {
    j["delta"] = *d.b - *d.a;
    if (*d.a != 0) j["delta_pct"] = 100.0 * (*d.b - *d.a) / *d.a;
  }
  return j;
}

std::string short_json(const nlohmann::json& j) {
  if (j.is_null()) return "(absent)";
  std::string s = j.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string opt_ms(const std::optional<double>& v) {
  if (!v) return "         -";
  return fmt("%10.3f", *v);
}

std::string delta_cells(const Delta& d) {
  if (!d.a || !d.b) return "          -        -";
  double dd = *d.b - *d.a;
  std::string pct = *d.a != 0 ? fmt("%+7.1f%%", 100.0 * dd / *d.a) : std::string("       -");
  return fmt("%+10.3f", dd) + " " + pct;
}

std::string tensor_where(const TensorDivergence& d) {
  std::string s = "step " + std::to_string(d.step) + ", " + d.kind;
  if (d.micro >= 0 && d.kind == "activation") s += " (micro " + std::to_string(d.micro) + ")";
  return s + " " + d.name;
}

std::string stats_line(const nlohmann::json& s) {
  std::string out;
  for (const char* k : {"count", "mean", "std", "l2"}) {
    auto it = s.find(k);
    out += std::string(out.empty() ? "" : " ") + k + "=";
    if (it == s.end() || it->is_null())
      out += (it == s.end() ? "-" : "nan");
    else if (std::string(k) == "count")
      out += it->dump();
    else
      out += fmt("%.6g", it->get<double>());
  }
  return out;
}

// Manifest/config differences and the distributed-variable verdict.
void config_text(const RunDiff& d, std::string& out) {
  out += "\nmanifest/config: ";
  if (d.config.empty()) {
    out += "no differences\n";
  } else {
    out += std::to_string(d.config.size()) + " difference(s)\n";
    size_t w = 0;
    for (const auto& c : d.config) w = std::max(w, c.key.size());
    for (const auto& c : d.config) {
      std::string line =
          "  " + c.key + std::string(w - c.key.size(), ' ') + "  " + short_json(c.a) + " -> " + short_json(c.b);
      if (!c.variable.empty()) line += "   [" + c.variable + "]";
      out += line + "\n";
    }
  }
  if (!d.warning.empty())
    out += "WARNING: " + d.warning + "\n";
  else if (d.distributed_changed.size() == 1)
    out += "one distributed variable changed: " + d.distributed_changed[0] + "\n";
  else
    out += "no distributed variable changed\n";
}

// The step-time table: mean over ranks, by stage, and per-rank medians.
void timing_text(const RunDiff& d, std::string& out) {
  const char* source = d.timing.source == "traces"     ? "from the rank traces"
                       : d.timing.source == "manifest" ? "from the manifests"
                                                       : "not available";
  out += "\nstep time (" + std::string(source) + ")\n";
  if (!d.timing.note.empty()) out += "  " + d.timing.note + "\n";
  if (d.timing.source != "none") {
    char line[256];
    std::snprintf(line, sizeof(line), "  %-20s %10s %10s %10s %8s\n", "mean over ranks", "A", "B", "B-A", "B-A %");
    out += line;
    auto row = [&](const std::string& label, const Delta& v) {
      std::snprintf(line, sizeof(line), "  %-20s %s %s %s\n", label.c_str(), opt_ms(v.a).c_str(), opt_ms(v.b).c_str(),
                    delta_cells(v).c_str());
      out += line;
    };
    row("steps", d.timing.mean.steps);
    row("step median ms", d.timing.mean.step_median_ms);
    if (!d.timing.mean.stages.empty()) out += "  ms per step, by stage:\n";
    for (const auto& s : d.timing.mean.stages) row("  " + s.stage, s.per_step_ms);
    if (d.timing.ranks.size() > 0) {
      out += "  per rank, step median ms:\n";
      for (const auto& [r, b] : d.timing.ranks) row("  rank " + std::to_string(r), b.step_median_ms);
    }
  }
}

// Tensor summary comparison per rank and the run's first divergence.
void tensors_text(const RunDiff& d, std::string& out) {
  out += "\ntensor summaries";
  if (!d.tensors.compared) {
    out += ": not compared (" + d.tensors.note + ")\n";
  } else {
    out += " (rtol " + fmt("%g", d.tensors.rtol) + " on mean/std/l2; equal hashes are identical)\n";
    for (const auto& r : d.tensors.ranks) {
      out += "  rank " + std::to_string(r.rank) + ": " + std::to_string(r.compared) + " compared, " +
             std::to_string(r.identical) + " identical, " + std::to_string(r.within_tolerance) + " within tolerance, " +
             std::to_string(r.diverged) + " diverged";
      if (r.only_a || r.only_b)
        out += "; " + std::to_string(r.only_a) + " only in A, " + std::to_string(r.only_b) + " only in B";
      out += "\n";
      if (r.first_divergence) {
        const auto& t = *r.first_divergence;
        out += "    first divergence: " + tensor_where(t) + " (" + t.reason + ")\n";
        out += "      A: " + stats_line(t.a) + "\n      B: " + stats_line(t.b) + "\n";
        if (t.reason != "count")
          out += "      relative difference: mean " + fmt("%.3g", t.rel_mean) + ", std " + fmt("%.3g", t.rel_std) +
                 ", l2 " + fmt("%.3g", t.rel_l2) + "\n";
        if (!t.hint.empty()) out += "      likely: " + t.hint + "\n";
      } else if (r.first_hash_difference) {
        out +=
            "    no divergence beyond tolerance; first bitwise difference: " + tensor_where(*r.first_hash_difference) +
            "\n";
      } else if (r.compared) {
        out += "    every matched record bitwise identical\n";
      }
    }
    if (d.tensors.first)
      out += "  => the runs first diverge at " + tensor_where(*d.tensors.first) + " (rank " +
             std::to_string(d.tensors.first->rank) + ")\n";
    else
      out += "  => no divergence beyond tolerance\n";
  }
}

// Parameter hash comparison per rank.
void replicas_text(const RunDiff& d, std::string& out) {
  out += "\nparameter hashes";
  if (!d.replicas.compared) {
    out += ": not compared (" + d.replicas.note + ")\n";
  } else {
    out += " (after each optimizer step; step -1 = after the initial broadcast)\n";
    for (const auto& r : d.replicas.ranks) {
      out += "  rank " + std::to_string(r.rank) + ": " + std::to_string(r.compared) + " steps compared, ";
      out += r.first_step ? "first differ after step " + std::to_string(*r.first_step) + " (A " + r.hash_a + ", B " +
                                r.hash_b + ")\n"
                          : std::string("identical\n");
    }
  }
}

}  // namespace

nlohmann::json run_diff_json(const RunDiff& d) {
  auto div_json = [](const std::optional<TensorDivergence>& t) -> nlohmann::json {
    if (!t) return nullptr;
    auto rel = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
    return {{"rank", t->rank},
            {"step", t->step},
            {"kind", t->kind},
            {"micro", t->micro >= 0 ? nlohmann::json(t->micro) : nlohmann::json(nullptr)},
            {"name", t->name},
            {"reason", t->reason},
            {"a", t->a},
            {"b", t->b},
            {"rel", {{"mean", rel(t->rel_mean)}, {"std", rel(t->rel_std)}, {"l2", rel(t->rel_l2)}}},
            {"hint", t->hint.empty() ? nlohmann::json(nullptr) : nlohmann::json(t->hint)}};
  };
  auto block_json = [](const TimingBlock& b) {
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& s : b.stages) {
      nlohmann::json row = delta_json(s.per_step_ms);
      row["stage"] = s.stage;
      stages.push_back(row);
    }
    return nlohmann::json{{"step_median_ms", delta_json(b.step_median_ms)},
                          {"steps", delta_json(b.steps)},
                          {"stages_ms_per_step", stages}};
  };
  nlohmann::json config = nlohmann::json::array();
  for (const auto& c : d.config)
    config.push_back({{"key", c.key},
                      {"a", c.a},
                      {"b", c.b},
                      {"variable", c.variable.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.variable)}});
  nlohmann::json ranks_timing = nlohmann::json::array();
  for (const auto& [r, b] : d.timing.ranks) {
    nlohmann::json j = block_json(b);
    j["rank"] = r;
    ranks_timing.push_back(j);
  }
  nlohmann::json tranks = nlohmann::json::array();
  for (const auto& r : d.tensors.ranks)
    tranks.push_back({{"rank", r.rank},
                      {"compared", r.compared},
                      {"identical", r.identical},
                      {"within_tolerance", r.within_tolerance},
                      {"diverged", r.diverged},
                      {"only_a", r.only_a},
                      {"only_b", r.only_b},
                      {"first_divergence", div_json(r.first_divergence)},
                      {"first_hash_difference", div_json(r.first_hash_difference)}});
  nlohmann::json rranks = nlohmann::json::array();
  for (const auto& r : d.replicas.ranks)
    rranks.push_back({{"rank", r.rank},
                      {"compared", r.compared},
                      {"first_step", r.first_step ? nlohmann::json(*r.first_step) : nlohmann::json(nullptr)},
                      {"hash_a", r.first_step ? nlohmann::json(r.hash_a) : nlohmann::json(nullptr)},
                      {"hash_b", r.first_step ? nlohmann::json(r.hash_b) : nlohmann::json(nullptr)}});
  return {
      {"a", {{"dir", d.dir_a}, {"problems", d.problems_a}}},
      {"b", {{"dir", d.dir_b}, {"problems", d.problems_b}}},
      {"config",
       {{"differences", config},
        {"distributed_changed", d.distributed_changed},
        {"warning", d.warning.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.warning)}}},
      {"timing",
       {{"source", d.timing.source},
        {"note", d.timing.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.timing.note)},
        {"mean", block_json(d.timing.mean)},
        {"ranks", ranks_timing}}},
      {"tensors",
       {{"compared", d.tensors.compared},
        {"note", d.tensors.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.tensors.note)},
        {"rtol", d.tensors.rtol},
        {"first_divergence", div_json(d.tensors.first)},
        {"ranks", tranks}}},
      {"replicas",
       {{"compared", d.replicas.compared},
        {"note", d.replicas.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.replicas.note)},
        {"first_step", d.replicas.first_step ? nlohmann::json(*d.replicas.first_step) : nlohmann::json(nullptr)},
        {"ranks", rranks}}},
  };
}

std::string run_diff_text(const RunDiff& d) {
  std::string out;
  out += "A: " + d.dir_a + "\nB: " + d.dir_b + "\n";
  for (const auto& p : d.problems_a) out += "  A: " + p + "\n";
  for (const auto& p : d.problems_b) out += "  B: " + p + "\n";

  config_text(d, out);
  timing_text(d, out);
  tensors_text(d, out);
  replicas_text(d, out);
  return out;
}

}  // namespace ddp
