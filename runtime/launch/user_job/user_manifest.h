#pragma once
// The user's run folder's manifest.json, written by us from what each rank's companion recorded
// (verify/rank<R>.meta.json): the same fields our own runs carry, so env.manifest, --diff and the analysis read it
// as they read ours.
#include <string>
#include <vector>

#include "traces/model/manifest.h"
#include "traces/model/records.h"

namespace ddp {

// Every rank's meta (records::companion_meta), in rank order, up to the first rank without one; false with `error`
// naming the file and the field when one breaks the contract.
bool read_user_metas(const std::string& run_dir, std::vector<records::companion_meta>& out, std::string& error);
// The script's argv as config: {"script", "args": {"--lr": "3e-4", ...}, "argv"}, so --diff names an option.
records::script_config config_from_argv(const std::vector<std::string>& argv);
// The manifest of a user's run from its ranks' metas (not empty) and the launch command.
Manifest user_manifest(const std::vector<records::companion_meta>& metas, const std::vector<std::string>& launch);

}  // namespace ddp
