#pragma once
// Creating a run folder (its layout and file names are owned by traces/model/run_folder.h).
#include <string>

namespace ddp {
// runs/<YYYYmmdd-HHMMSS> under the current directory.
std::string default_run_folder();
// Where a run goes: --out DIR as an absolute path, or the default above (--check's with "-check" after it). The one
// place the default is chosen, for our ranks, the supervisor, a user's --record and both --check subjects.
std::string record_run_folder(const std::string& out_dir);
std::string check_run_folder(const std::string& out_dir);
// Creates DIR and its progress/ and logs/ sub-folders. Returns false with `error` set.
bool prepare_run_folder(const std::string& dir, std::string& error);
std::string absolute_path(const std::string& p);
}  // namespace ddp
