// Writing the embedded companion into a run folder (companion_files.h).
#include <filesystem>
#include <fstream>

#include "runtime/launch/user_job/companion_files.h"
#include "traces/model/run_folder.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {
// The one file Python runs by itself at startup from a PYTHONPATH folder; the package's site_entry.py is it.
constexpr const char* kSiteEntry = "site_entry.py";
constexpr const char* kSiteCustomize = "sitecustomize.py";
constexpr const char* kPackage = "ddp_profile";

bool write_file(const fs::path& p, const std::string& text, std::string& error) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) {
    error = "cannot write " + p.string();
    return false;
  }
  return true;
}
}  // namespace

std::string install_companion(const std::string& run_dir, std::string& error) {
  const fs::path dir = in_run(run_dir, kCompanionDir);
  std::error_code ec;
  fs::create_directories(dir / kPackage, ec);
  if (ec) {
    error = "cannot create " + (dir / kPackage).string() + ": " + ec.message();
    return "";
  }
  bool site = false;
  for (const CompanionFile& f : companion_files()) {
    if (!write_file(dir / kPackage / f.name, f.text, error)) return "";
    if (std::string(f.name) == kSiteEntry) {
      if (!write_file(dir / kSiteCustomize, f.text, error)) return "";
      site = true;
    }
  }
  if (!site) {
    error = std::string("this ddp_profile was built without the companion's ") + kSiteEntry;
    return "";
  }
  return dir.string();
}

std::string companion_python_path(const std::string& companion_dir, const char* inherited) {
  return inherited && *inherited ? companion_dir + ":" + inherited : companion_dir;
}

}  // namespace ddp
