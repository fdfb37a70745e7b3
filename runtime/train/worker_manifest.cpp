#include "runtime/train/worker_manifest.h"

#include <unistd.h>

#include <stdexcept>

#include "profiler/clock.h"
#include "runtime/common/host_info.h"
#include "runtime/common/manifest.h"
#include "runtime/launch/environment/batch_scheduling.h"
#include "runtime/launch/environment/cpu_sets.h"

namespace ddp {
namespace {

// One JSON text another rank sent, read as record R: a field against records.def is this run's bug, said as such.
template <class R>
R read_sent(const std::string& text, const char* what) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  R r;
  std::string why;
  if (j.is_discarded() || !records::read(j, r, why))
    throw std::runtime_error(std::string("a rank's ") + what + " does not read: " + (why.empty() ? text : why));
  return r;
}

}  // namespace

records::rank_host this_rank_host() {
  // The cores this rank may run on (a local launch pins each rank to its own share: cpu_sets.h) and how many of its
  // threads run SCHED_BATCH (Gloo's, unless --no-batch-sched), as the kernel reports them.
  records::rank_host h;
  h.host = host_name();
  h.pid = ::getpid();
  for (int c : allowed_cpus()) h.cpus.push_back(c);
  h.sched_batch_threads = batch_scheduled_threads();
  return h;
}

Manifest write_start_manifest(const RunSetup& s, const std::vector<int64_t>& sample_shape,
                              const std::vector<std::string>& rank_hosts) {
  ManifestStart ms;
  ms.versions = versions_record(s.gpu);
  ms.device.type = s.device.is_cuda() ? "cuda" : "cpu";
  ms.device.name = s.device.is_cuda() ? s.gpu.name : cpu_model_name();
  ms.device.plan = s.plan.note;
  ms.device.shared_gpu = s.plan.shared_gpu;
  ms.amp = {amp_dtype_name(s.amp.dtype), s.amp.scaler, s.amp.reason};
  ms.backend = s.backend;
  ms.world_size = s.env.world;
  ms.launch.method = s.env.method;
  ms.launch.master_addr = s.env.master_addr;
  ms.launch.rendezvous_from = s.env.rendezvous_from;
  ms.job = s.job;
  ms.sample_shape = sample_shape;
  for (const auto& h : rank_hosts) ms.rank_hosts.push_back(read_sent<records::rank_host>(h, "host"));
  ms.clock_source = prof::ticks_are_tsc() ? "tsc->CLOCK_MONOTONIC" : "CLOCK_MONOTONIC";
  Manifest m = manifest_at_start(ms);
  std::string err;
  if (!write_manifest(s.dir, m, err)) throw std::runtime_error(err);
  return m;
}

void write_end_manifest(const RunSetup& s, Manifest start, const std::vector<std::string>& rank_entries,
                        const std::vector<uint64_t>& gradient_buckets) {
  std::vector<records::manifest_rank> ranks;
  for (const auto& e : rank_entries) ranks.push_back(read_sent<records::manifest_rank>(e, "manifest entry"));
  complete_manifest(start, std::move(ranks), gradient_buckets);
  std::string err;
  if (!write_manifest(s.dir, start, err)) throw std::runtime_error(err);
}

}  // namespace ddp
