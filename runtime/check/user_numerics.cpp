#include "runtime/check/user_numerics.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "runtime/check/judges.h"
#include "runtime/data/sampler.h"
#include "traces/base/safetensors.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;
namespace {

// The companion's tensor files are flat {"grads/<param>": t, "acts/<micro>/<layer>": t, ...} in the safetensors
// layout (traces/base/safetensors.h, docs/python.md): the tensors under `prefix`, in the file's order (the module's
// forward order), named without it.
using Named = std::vector<std::pair<std::string, const PlainTensor*>>;
Named under(const PlainTensors& d, const std::string& prefix) {
  Named out;
  for (const PlainTensor& t : d)
    if (t.name.rfind(prefix, 0) == 0) out.emplace_back(t.name.substr(prefix.size()), &t);
  return out;
}
const PlainTensor* find(const Named& v, const std::string& name) {
  for (const auto& [k, t] : v)
    if (k == name) return t;
  return nullptr;
}
// Micro-step ids present under acts/, in order.
std::vector<std::string> micros_of(const PlainTensors& d) {
  std::vector<std::string> out;
  for (const auto& [k, t] : under(d, "acts/")) {
    std::string m = k.substr(0, k.find('/'));
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  }
  return out;
}
PlainTensors load(const std::string& path) {
  PlainTensors out;
  std::string error;
  if (!read_safetensors(path, out, error)) throw std::runtime_error(error);
  return out;
}

}  // namespace

std::vector<int64_t> distributed_sampler_indices(int64_t n, int world, int rank, bool shuffle, uint64_t seed, int epoch,
                                                 bool drop_last) {
  return shard_indices(epoch_order(n, seed, epoch, shuffle), rank, world, drop_last);
}

NumericsOutcome user_numerics_evidence(const std::string& dir, int world, bool shard_ok,
                                       const records::companion_meta& meta0, int64_t verify_steps) {
  NumericsOutcome out;
  out.world = world;
  // Found by ddp_profile.auto in a script with no ddp_profile line: no loss function is known unless a framework
  // gave one (Lightning's training_step).
  if (!meta0.loss_fn) {
    out.skipped =
        "not run: no loss function is known (ddp_profile found the model by itself, in a script with no "
        "ddp_profile line): add `ddp_profile.attach(model, optimizer, loss_fn=lambda model, batch: ...)` after "
        "DDP(...) to compare the synced gradients with a single-process reference (docs/python.md)";
    return out;
  }
  if (meta0.reference_error) {
    out.not_compared = "not compared: the single-process reference could not run the loss: " + *meta0.reference_error;
    return out;
  }
  std::vector<NumericsEvidence>& evidence = out.steps;
  const std::vector<std::string> outside = meta0.params_outside_optimizer.value_or(std::vector<std::string>{});
  std::vector<PlainTensors>
      previous;  // the ranks' dumps of the step before: a gradient that piles up is this plus that
  for (int64_t step = 0; step < verify_steps; ++step) {
    const std::string ref_file = in_run(dir, reference_step_file(step));
    if (!fs::exists(ref_file)) break;
    std::vector<PlainTensors> dumps;
    for (int r = 0; r < world; ++r) dumps.push_back(load(in_run(dir, companion_verify_step_file(r, step))));
    const PlainTensors ref = load(ref_file);
    records::reference_meta ref_meta;
    std::string meta_error;
    if (!read_record_file(in_run(dir, reference_meta_file(step)), ref_meta, meta_error)) {
      out.failure = meta_error;
      return out;
    }
    const records::StringMap& kind_of = ref_meta.kinds;
    // Activations: the ranks' outputs of each layer, concatenated in rank order, against the reference's on the
    // union batch; per layer the worst micro-step is kept.
    std::vector<TensorCompare> act_cmp;
    std::vector<std::string> kinds;
    for (const std::string& micro : micros_of(ref)) {
      const std::string prefix = "acts/" + micro + "/";
      std::vector<Named> rank_acts;
      for (int r = 0; r < world; ++r) rank_acts.push_back(under(dumps[r], prefix));
      size_t l = 0;
      for (const auto& [layer, want] : under(ref, prefix)) {
        std::vector<double> mine;  // the ranks' outputs concatenated along the batch, as torch.cat does
        for (int r = 0; r < world; ++r) {
          const PlainTensor* t = find(rank_acts[r], layer);
          if (!t)
            throw std::runtime_error(companion_verify_step_file(r, step) + " lacks micro-step " + micro +
                                     "'s output of " + layer);
          mine.insert(mine.end(), t->values.begin(), t->values.end());
        }
        if (mine.size() != want->values.size()) continue;  // an output that is not per sample (e.g. a reduced loss)
        TensorCompare c = compare_values(layer, mine, want->values, kFloat32Rtol, kFloat32Atol);
        if (l >= act_cmp.size()) {
          act_cmp.push_back(c);
          kinds.push_back(kind_of.count(layer) ? kind_of.at(layer) : "");
        } else if (!c.ok && act_cmp[l].ok) {
          act_cmp[l] = c;
        }
        ++l;
      }
    }
    const Named ref_grads = under(ref, "grads/");
    for (int r = 0; r < world; ++r) {
      NumericsEvidence ev = numerics_step(step, r, act_cmp, kinds, shard_ok);
      if (!ref_meta.batch_sizes.empty()) ev.micro_batches = static_cast<int>(ref_meta.batch_sizes.size());
      const Named grads = under(dumps[r], "grads/");
      for (const auto& [name, want] : ref_grads) {
        const PlainTensor* g = find(grads, name);
        if (!g) throw std::runtime_error(companion_verify_step_file(r, step) + " lacks the gradient of " + name);
        TensorCompare c = compare_values(name, g->values, want->values, kFloat32Rtol, kFloat32Atol);
        if (!c.ok) {
          c.outside_optimizer = std::find(outside.begin(), outside.end(), name) != outside.end();
          const PlainTensor* before = previous.empty() ? nullptr : find(under(previous[r], "grads/"), name);
          if (before && before->shape == g->shape) {  // this step's gradient less the last one's
            std::vector<double> added(g->values.size());
            for (size_t i = 0; i < added.size(); ++i) added[i] = g->values[i] - before->values[i];
            c.piles_up = compare_values(name, added, want->values, kFloat32Rtol, kFloat32Atol).ok;
          }
        }
        ev.grads.push_back(c);
      }
      evidence.push_back(ev);
    }
    previous = std::move(dumps);
  }
  if (evidence.empty()) {
    out.failure = "no reference dumps in " + in_run(dir, kVerifyDir) +
                  " (the script ran no optimizer step with the companion attached?)";
    return out;
  }
  if (meta0.forward_random_beyond_dropout)
    out.not_compared =
        "not compared: the model's forward draws random numbers outside Dropout modules (two forwards of one "
        "batch differ even with dropout off), so the ranks and a single-process reference cannot see the "
        "same values; check this model with its randomness removed";
  out.dropout_off_modules = static_cast<int>(meta0.dropout_off_modules);
  return out;
}

}  // namespace ddp
