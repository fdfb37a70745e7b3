#pragma once
// Creating a run folder (its layout and file names are owned by traces/model/run_folder.h).
#include <string>

namespace ddp {
// runs/<YYYYmmdd-HHMMSS> under the current directory.
std::string default_run_folder();
// Creates DIR and its progress/ and logs/ sub-folders. Returns false with `error` set.
bool prepare_run_folder(const std::string& dir, std::string& error);
std::string absolute_path(const std::string& p);
}  // namespace ddp
