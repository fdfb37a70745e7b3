#include "runtime/train/model_preflight.h"

#include <torch/torch.h>

#include <filesystem>
#include <memory>

#include "runtime/data/dataset.h"
#include "runtime/train/model.h"

namespace ddp {
namespace {

std::string shape_text(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The line that says what failed: TorchScript puts its serialized traceback first and the error last.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of(" \n");
  if (end == std::string::npos) return text;
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end + 1 - (start == std::string::npos ? 0 : start + 1));
}

}  // namespace

bool preflight_model(const JobConfig& job_in, std::string& error) {
  std::error_code ec;
  if (!is_image_dataset(job_in) && (job_in.data_path.empty() || !std::filesystem::exists(job_in.data_path, ec)))
    return true;
  JobConfig job = job_in;
  std::unique_ptr<Dataset> data = open_dataset(job, error);
  if (!data) return true;  // the ranks report an unreadable dataset with their own words
  fit_job_to_dataset(job, *data);
  const std::vector<int64_t> sample = data->sample_shape();
  std::vector<int64_t> shape = {2};  // two samples: a batch, even for a model with batch norm
  shape.insert(shape.end(), sample.begin(), sample.end());
  const std::string what = "--model " + job.model + " on " + data->description();
  std::unique_ptr<Model> model;
  try {
    model = std::make_unique<Model>(job, sample);
  } catch (const std::exception& e) {  // a file that is no model, a built-in model that cannot take the data
    error = e.what();
    return false;
  }
  try {
    torch::NoGradGuard no_grad;
    const at::Tensor out = model->forward(torch::zeros(shape), nullptr);
    if (out.dim() != 2 || out.size(0) != 2 || out.size(1) != job.classes) {
      error = what + ": a batch " + shape_text(shape) + " gives " + shape_text(out.sizes()) + ", not [2, " +
              std::to_string(job.classes) + "] (batch, the data's " + std::to_string(job.classes) + " classes)";
      return false;
    }
  } catch (const c10::Error& e) {
    error = what + ": its forward fails on a batch " + shape_text(shape) + ": " + last_line(e.what_without_backtrace());
    return false;
  } catch (const std::exception& e) {  // TorchScript's interpreter errors (torch::jit::JITException)
    error = what + ": its forward fails on a batch " + shape_text(shape) + ": " + last_line(e.what());
    return false;
  }
  return true;
}

}  // namespace ddp
