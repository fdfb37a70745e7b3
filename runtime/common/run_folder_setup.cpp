#include "runtime/common/run_folder_setup.h"

#include <ctime>
#include <filesystem>

#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;

std::string default_run_folder() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "runs/%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::string absolute_path(const std::string& p) { return fs::absolute(p).lexically_normal().string(); }

std::string record_run_folder(const std::string& out_dir) {
  return absolute_path(out_dir.empty() ? default_run_folder() : out_dir);
}

std::string check_run_folder(const std::string& out_dir) {
  return absolute_path(out_dir.empty() ? default_run_folder() + "-check" : out_dir);
}

bool prepare_run_folder(const std::string& dir, std::string& error) {
  std::error_code ec;
  for (const char* sub : {"", kProgressDir, kLogsDir}) {
    fs::create_directories(fs::path(dir) / sub, ec);
    if (ec) {
      error = "cannot create run folder " + (fs::path(dir) / sub).string() + ": " + ec.message();
      return false;
    }
  }
  return true;
}

}  // namespace ddp
