#include "runtime/train/verify_log.h"

#include <ATen/core/Dict.h>
#include <malloc.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "runtime/common/replica_digest.h"
#include "runtime/train/cuda_path.h"
#include "runtime/train/pickle_file.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;

std::string tensors_hash(const std::vector<at::Tensor>& ts) {
  // The replica digest (runtime/common/replica_digest.h): equal across ranks means bitwise-identical tensors, and the
  // Python companion computes the same.
  ReplicaDigest d;
  for (const auto& t : ts) {
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    d.add(c.data_ptr(), c.numel() * c.element_size());
  }
  return d.hex();
}

records::tensor_stats tensor_summary(const at::Tensor& t) {
  at::Tensor f = t.detach().to(at::kCPU).to(at::kDouble).reshape({-1});
  records::tensor_stats s;
  s.count = f.numel();
  s.hash = tensors_hash({t});
  if (f.numel() == 0) return s;
  s.mean = f.mean().item<double>();
  s.stddev = f.numel() > 1 ? f.std().item<double>() : 0.0;
  s.min = f.min().item<double>();
  s.max = f.max().item<double>();
  s.l2 = f.norm().item<double>();
  return s;
}

namespace {
// One record as one line of its log, flushed: a rank killed after this step still leaves it whole.
template <class R>
void write_line(FILE* f, const R& r) {
  std::fprintf(f, "%s\n", records::to_json(r).dump().c_str());
  std::fflush(f);
}
}  // namespace

VerifyLog::~VerifyLog() {
  for (FILE* f : {samples_, replicas_, summaries_, training_})
    if (f) std::fclose(f);
}

void VerifyLog::open(const std::string& run_dir, int rank, int64_t dump_steps) {
  dir_ = run_dir;
  rank_ = rank;
  dump_steps_ = dump_steps;
  fs::create_directories(in_run(run_dir, kVerifyDir));
  auto open_file = [&](const std::string& name) {
    std::string p = in_run(run_dir, name);
    FILE* f = std::fopen(p.c_str(), "w");
    if (!f) throw std::runtime_error("cannot create " + p);
    return f;
  };
  samples_ = open_file(verify_samples_file(rank));
  replicas_ = open_file(verify_replicas_file(rank));
  summaries_ = open_file(verify_summaries_file(rank));
  training_ = open_file(verify_log_file(rank, kVerifyTraining));
}

void VerifyLog::batch(int epoch, int64_t step, int micro, int64_t batch, const std::vector<int64_t>& indices) {
  if (!samples_) return;
  records::samples r;
  r.epoch = epoch;
  r.step = step;
  r.micro = micro;
  r.batch = batch;
  r.indices = indices;
  write_line(samples_, r);
}

void VerifyLog::replica(int64_t step, const std::string& param_hash) {
  if (!replicas_) return;
  records::replicas r;
  r.step = step;
  r.param_hash = param_hash;
  write_line(replicas_, r);
}

namespace {
// What the process really holds: its resident set (/proc/self/statm's second field, in pages).
int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// What the C heap has handed out and not had back (in every arena, and its own mmaps): tensors, graphs, buffers,
// exact to the byte whatever the allocator keeps after a free. The companion measures the same (training.py).
int64_t heap_in_use() {
  const struct mallinfo2 m = ::mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

}  // namespace

void VerifyLog::memory(int64_t step, const at::Device& device) {
  if (!training_) return;
  records::training r;
  r.step = step;
  r.rss = resident_bytes();
  r.heap = heap_in_use();
  if (device.is_cuda()) r.cuda_allocated = static_cast<int64_t>(cuda::memory_stats(device.index()).allocated);
  write_line(training_, r);
}

void VerifyLog::dump_step(int64_t step, const std::vector<std::pair<std::string, at::Tensor>>& params,
                          const std::vector<std::vector<std::pair<std::string, at::Tensor>>>& acts,
                          const std::vector<std::pair<std::string, at::Tensor>>& grads) {
  using D = c10::Dict<std::string, at::Tensor>;
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  auto to_dict = [](const std::vector<std::pair<std::string, at::Tensor>>& v) {
    D d;
    for (const auto& [k, t] : v) d.insert(k, t.detach().to(at::kCPU).clone());
    return d;
  };
  root.insert("params", to_dict(params));
  root.insert("grads", to_dict(grads));
  c10::impl::GenericDict act_by_micro(c10::StringType::get(), c10::AnyType::get());
  for (size_t m = 0; m < acts.size(); ++m) act_by_micro.insert(std::to_string(m), to_dict(acts[m]));
  root.insert("acts", act_by_micro);
  std::vector<char> bytes = pickle_for_python(c10::IValue(root));
  std::ofstream(in_run(dir_, verify_step_file(rank_, step)), std::ios::binary).write(bytes.data(), bytes.size());
  auto summary = [&](const std::string& kind, const std::string& name, const at::Tensor& t,
                     std::optional<int64_t> micro) {
    records::summaries r;
    r.step = step;
    r.kind = kind;
    r.name = name;
    r.micro = micro;
    r.stats = tensor_summary(t);
    write_line(summaries_, r);
  };
  for (const auto& [k, t] : params) summary("param", k, t, std::nullopt);
  for (size_t m = 0; m < acts.size(); ++m)
    for (const auto& [k, t] : acts[m]) summary("activation", k, t, static_cast<int64_t>(m));
  for (const auto& [k, t] : grads) summary("grad", k, t, std::nullopt);
}

}  // namespace ddp
