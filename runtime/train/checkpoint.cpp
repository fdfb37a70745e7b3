#include "runtime/train/checkpoint.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "runtime/common/host_info.h"
#include "runtime/common/json_file.h"
#include "runtime/train/cuda_path.h"
#include "runtime/train/pickle_file.h"
#include "runtime/train/torch_compat.h"
#include "traces/base/atomic_file.h"
#include "traces/base/crc32.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;
using GenericDict = c10::Dict<c10::IValue, c10::IValue>;

namespace {
GenericDict new_dict() { return GenericDict(c10::StringType::get(), c10::AnyType::get()); }

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open checkpoint " + path);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes_atomic(const std::string& path, const std::vector<char>& bytes) {
  std::string error;
  if (!write_file_atomically(path, std::string_view(bytes.data(), bytes.size()), error))
    throw std::runtime_error(error);
}

c10::IValue get(const GenericDict& d, const std::string& key, const std::string& where) {
  auto it = d.find(key);
  if (it == d.end()) throw std::runtime_error("checkpoint " + where + " has no '" + key + "'");
  return it->value();
}

// Item paths: dict keys (strings or ints, as optimizer.state_dict()'s parameter indices) and the index of a list of
// dicts (param_groups) join with '.'; anything else (tensors, numbers, tuples, plain lists) is one item.
void list_items(const c10::IValue& v, const std::string& prefix, std::vector<std::string>& out) {
  auto child = [&](const std::string& k) { return prefix.empty() ? k : prefix + "." + k; };
  if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) {
      const c10::IValue& key = kv.key();
      list_items(kv.value(),
                 child(key.isString() ? key.toStringRef()
                       : key.isInt()  ? std::to_string(key.toInt())
                                      : key.tagKind()),
                 out);
    }
  } else if (v.isList() && !v.toListRef().empty() && v.toListRef().front().isGenericDict()) {
    const auto& items = v.toListRef();
    for (size_t i = 0; i < items.size(); ++i) list_items(items[i], child(std::to_string(i)), out);
  } else {
    out.push_back(prefix);
  }
}

// optimizer.state_dict() of torch.optim.AdamW, exactly (torch 2.x): state keyed by the parameter's index with a
// float32 0-dim `step`, one param group with every option AdamW's load_state_dict restores — decoupled_weight_decay
// above all, without which PyTorch would run the group as plain Adam.
const char* const kAdamWGroupKeys[] = {
    "lr",         "betas",          "eps",   "weight_decay",           "amsgrad", "maximize", "foreach",
    "capturable", "differentiable", "fused", "decoupled_weight_decay", "params"};

template <typename Opt>
torch::optim::AdamWParamState* adam_state(Opt& opt, const at::Tensor& p) {
  auto& st = opt.state();
  auto it = st.find(compat::optimizer_state_key<decltype(st)>(p));
  return it == st.end() ? nullptr : static_cast<torch::optim::AdamWParamState*>(it->second.get());
}

// The GPU the model lives on, or -1: a CUDA model's checkpoint also holds that device's generator state.
int cuda_device_of(const Model& model) {
  auto params = model.named_parameters();
  if (params.empty() || !params.front().second.is_cuda()) return -1;
  return params.front().second.device().index();
}
}  // namespace

void save_checkpoint(const std::string& ckpt_dir, int rank, int world, uint64_t seed, Model& model,
                     torch::optim::AdamW& opt, const LossScalerState& scaler, const TrainPosition& pos,
                     const std::vector<std::string>& omit) {
  fs::create_directories(ckpt_dir);
  auto omitted = [&](const std::string& k) { return std::find(omit.begin(), omit.end(), k) != omit.end(); };
  GenericDict root = new_dict();
  root.insert("format", std::string("ddp_profile.checkpoint/1"));

  GenericDict m = new_dict();
  for (const auto& [k, t] : model.named_parameters()) m.insert(k, t.detach().cpu().clone());
  for (const auto& [k, t] : model.named_buffers()) m.insert(k, t.detach().cpu().clone());
  root.insert("model", m);

  if (!omitted("optimizer")) {
    // torch.optim.AdamW(model.parameters()).load_state_dict(ckpt["optimizer"]) takes this as it is; our parameter
    // names, which PyTorch's layout lacks, stand beside it in "optimizer_param_names" (index -> name).
    GenericDict state(c10::IntType::get(), c10::AnyType::get());
    // Untyped lists: typed ones pickle as TorchScript's build_intlist, which weights_only loading refuses.
    c10::impl::GenericList indices(c10::AnyType::get()), names(c10::AnyType::get());
    int64_t index = 0;
    for (const auto& [name, param] : model.named_parameters()) {
      indices.push_back(index);
      names.push_back(name);
      if (auto* s = adam_state(opt, param)) {  // none before the first step
        GenericDict ps = new_dict();
        if (!omitted("optimizer.step"))
          ps.insert("step", at::scalar_tensor(static_cast<double>(s->step()), at::kFloat));
        ps.insert("exp_avg", s->exp_avg().detach().cpu().clone());
        ps.insert("exp_avg_sq", s->exp_avg_sq().detach().cpu().clone());
        state.insert(index, ps);
      }
      ++index;
    }
    auto& o = static_cast<torch::optim::AdamWOptions&>(opt.param_groups().at(0).options());
    GenericDict group = new_dict();
    group.insert("lr", o.lr());
    group.insert("betas", c10::ivalue::Tuple::create({std::get<0>(o.betas()), std::get<1>(o.betas())}));
    group.insert("eps", o.eps());
    group.insert("weight_decay", o.weight_decay());
    group.insert("amsgrad", o.amsgrad());
    group.insert("maximize", false);
    group.insert("foreach", c10::IValue());
    group.insert("capturable", false);
    group.insert("differentiable", false);
    group.insert("fused", c10::IValue());
    group.insert("decoupled_weight_decay", true);
    group.insert("params", indices);
    c10::impl::GenericList groups(c10::AnyType::get());
    groups.push_back(group);
    GenericDict od = new_dict();
    od.insert("state", state);
    od.insert("param_groups", groups);
    root.insert("optimizer", od);
    root.insert("optimizer_param_names", names);
  }
  GenericDict sc = new_dict();
  sc.insert("scale", scaler.scale);
  sc.insert("growth_tracker", scaler.growth_tracker);
  sc.insert("enabled", scaler.enabled);
  root.insert("scaler", sc);

  GenericDict pd = new_dict();
  pd.insert("epoch", pos.epoch);
  pd.insert("global_step", pos.global_step);
  pd.insert("batches_in_epoch", pos.batches_in_epoch);
  pd.insert("rank", static_cast<int64_t>(rank));
  pd.insert("world_size", static_cast<int64_t>(world));
  root.insert("progress", pd);

  if (!omitted("rng")) {
    GenericDict rng = new_dict();
    // The default CPU generator (weight init, any torch.rand* in user code) and the sampler's stream, which is a
    // pure function of (seed, epoch) and so stored as those two numbers.
    rng.insert("torch_cpu", at::detail::getDefaultCPUGenerator().get_state());
    if (const int dev = cuda_device_of(model); dev >= 0) rng.insert("torch_cuda", cuda::rng_state(dev));
    GenericDict sampler = new_dict();
    sampler.insert("seed", static_cast<int64_t>(seed));
    sampler.insert("epoch", pos.epoch);
    rng.insert("sampler", sampler);
    root.insert("rng", rng);
  }

  std::vector<char> bytes = pickle_for_python(c10::IValue(root));
  const std::string file = checkpoint_file(ckpt_dir, rank);
  write_bytes_atomic(file, bytes);
  std::vector<std::string> items;
  list_items(c10::IValue(root), "", items);
  records::checkpoint_sidecar side;
  side.file = fs::path(file).filename().string();
  side.bytes = bytes.size();
  side.crc32 = crc32(bytes.data(), bytes.size());
  side.items = items;
  side.global_step = pos.global_step;
  side.epoch = pos.epoch;
  side.batches_in_epoch = pos.batches_in_epoch;
  std::string err;
  if (!write_json_atomic(checkpoint_sidecar(file), records::to_json(side), err)) throw std::runtime_error(err);
}

TrainPosition load_checkpoint(const std::string& ckpt_dir, int rank, int world, Model& model, torch::optim::AdamW& opt,
                              LossScalerState& scaler) {
  const std::string file = checkpoint_file(ckpt_dir, rank);
  std::vector<char> bytes = read_bytes(file);
  std::string damage;
  if (!verify_checkpoint_bytes(file, bytes, damage)) throw std::runtime_error(damage);
  c10::IValue v = torch::pickle_load(bytes);
  if (!v.isGenericDict()) throw std::runtime_error("checkpoint " + file + " is not a dict");
  GenericDict root = v.toGenericDict();

  GenericDict pd = get(root, "progress", file).toGenericDict();
  if (get(pd, "world_size", file).toInt() != world)
    throw std::runtime_error("checkpoint " + file + " was written by a world of " +
                             std::to_string(get(pd, "world_size", file).toInt()) + " ranks, this run has " +
                             std::to_string(world));
  TrainPosition pos;
  pos.epoch = get(pd, "epoch", file).toInt();
  pos.global_step = get(pd, "global_step", file).toInt();
  pos.batches_in_epoch = get(pd, "batches_in_epoch", file).toInt();

  torch::NoGradGuard ng;
  GenericDict m = get(root, "model", file).toGenericDict();
  // copy_ broadcasts: a tensor of another shape (another model, another parameter order) must be refused by name.
  auto same_shape = [&](const at::Tensor& src, const at::Tensor& dst, const std::string& item) {
    if (src.sizes() != dst.sizes())
      throw std::runtime_error("checkpoint " + file + ": " + item + " has shape " + c10::str(src.sizes()) +
                               ", this model's is " + c10::str(dst.sizes()));
    return src;
  };
  for (auto& [k, t] : model.named_parameters()) t.copy_(same_shape(get(m, k, file).toTensor(), t, "model." + k));
  for (auto& [k, t] : model.named_buffers()) t.copy_(same_shape(get(m, k, file).toTensor(), t, "model." + k));

  // PyTorch's layout: state keyed by the parameter's index in model.parameters() order (also what a Python job's
  // optimizer.state_dict() saves).
  GenericDict od = get(root, "optimizer", file).toGenericDict();
  GenericDict state = get(od, "state", file).toGenericDict();
  auto& st = opt.state();
  int64_t index = -1;
  for (auto& [name, param] : model.named_parameters()) {
    ++index;
    auto it = state.find(index);
    if (it == state.end()) continue;
    GenericDict ps = it->value().toGenericDict();
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    const c10::IValue step = get(ps, "step", file + " optimizer state of " + name);
    s->step(step.isTensor() ? static_cast<int64_t>(step.toTensor().item<double>()) : step.toInt());
    const std::string item = "optimizer.state." + std::to_string(index) + " (" + name + ")";
    s->exp_avg(same_shape(get(ps, "exp_avg", file).toTensor(), param, item + ".exp_avg").to(param.device()).clone());
    s->exp_avg_sq(
        same_shape(get(ps, "exp_avg_sq", file).toTensor(), param, item + ".exp_avg_sq").to(param.device()).clone());
    st[compat::optimizer_state_key<decltype(st)>(param)] = std::move(s);
  }
  GenericDict sc = get(root, "scaler", file).toGenericDict();
  scaler.scale = get(sc, "scale", file).toDouble();
  scaler.growth_tracker = get(sc, "growth_tracker", file).toInt();
  scaler.enabled = get(sc, "enabled", file).toBool();

  GenericDict rng = get(root, "rng", file).toGenericDict();
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(get(rng, "torch_cpu", file).toTensor());
  // A checkpoint written on the CPU has no CUDA generator state: resuming it on a GPU starts that generator fresh.
  if (const int dev = cuda_device_of(model); dev >= 0)
    if (auto it = rng.find("torch_cuda"); it != rng.end()) cuda::set_rng_state(dev, it->value().toTensor());
  return pos;
}

std::vector<std::string> expected_checkpoint_items(Model& model) {
  std::vector<std::string> items = {"format"};
  for (const auto& [k, t] : model.named_parameters()) items.push_back("model." + k);
  for (const auto& [k, t] : model.named_buffers()) items.push_back("model." + k);
  const size_t params = model.named_parameters().size();
  for (size_t i = 0; i < params; ++i)
    for (const char* f : {"step", "exp_avg", "exp_avg_sq"})
      items.push_back("optimizer.state." + std::to_string(i) + "." + f);
  for (const char* f : kAdamWGroupKeys) items.push_back(std::string("optimizer.param_groups.0.") + f);
  items.push_back("optimizer_param_names");
  for (const char* f : {"scale", "growth_tracker", "enabled"}) items.push_back(std::string("scaler.") + f);
  for (const char* f : {"epoch", "global_step", "batches_in_epoch", "rank", "world_size"})
    items.push_back(std::string("progress.") + f);
  items.push_back("rng.torch_cpu");
  if (cuda_device_of(model) >= 0) items.push_back("rng.torch_cuda");
  items.push_back("rng.sampler.seed");
  items.push_back("rng.sampler.epoch");
  return items;
}

std::vector<std::string> checkpoint_items(const std::string& file) {
  std::vector<char> bytes = read_bytes(file);
  std::vector<std::string> out;
  list_items(torch::pickle_load(bytes), "", out);
  return out;
}

}  // namespace ddp
