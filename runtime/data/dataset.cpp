#include "runtime/data/dataset.h"

#include "runtime/data/dataset_file.h"
#include "runtime/data/image_dataset.h"

namespace ddp {

int64_t Dataset::sample_floats() const {
  int64_t n = 1;
  for (int64_t d : sample_shape()) n *= d;
  return n;
}

bool is_image_dataset(const JobConfig& job) { return job.dataset.rfind("images", 0) == 0; }

void fit_job_to_dataset(JobConfig& job, const Dataset& data) {
  job.classes = data.classes();
  if (!is_image_dataset(job)) job.features = data.sample_floats();
}

std::unique_ptr<Dataset> open_dataset(const JobConfig& job, std::string& error) {
  if (is_image_dataset(job)) {
    auto d = std::make_unique<ImageFolder>();
    if (!d->open(job.data_path, job.seed, error)) return nullptr;
    return d;
  }
  auto d = std::make_unique<DatasetFile>();
  if (!d->open(job.data_path, error)) return nullptr;
  return d;
}

}  // namespace ddp
