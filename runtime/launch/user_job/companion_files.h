#pragma once
// The Python companion, carried inside the binary (generated from python/ddp_profile by cmake/embed_companion.cmake):
// `ddp_profile --check/--record -- LAUNCH...` writes it into the run folder and puts it first on the job's PYTHONPATH,
// so a script with no ddp_profile line gets the companion of this very ddp_profile (docs/python.md).
#include <string>
#include <vector>

namespace ddp {

struct CompanionFile {
  const char* name;  // inside the package folder, e.g. "attach.py"
  const char* text;
};
const std::vector<CompanionFile>& companion_files();

// Writes <run>/companion/: the package as ddp_profile/*.py and its site_entry.py as sitecustomize.py (which Python
// runs at startup from any PYTHONPATH folder). Returns that folder, or "" with `error`.
std::string install_companion(const std::string& run_dir, std::string& error);

// PYTHONPATH for the job: the companion's folder first, then whatever the user's environment had.
std::string companion_python_path(const std::string& companion_dir, const char* inherited);

}  // namespace ddp
