#pragma once
// The user's run folder's manifest.json, written by us from what each rank's companion recorded
// (verify/rank<R>.meta.json): the same fields our own runs carry, so env.manifest, --diff and the analysis read it
// as they read ours.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddp {

// Every rank's meta, in rank order; stops at the first rank without one.
std::vector<nlohmann::json> read_user_metas(const std::string& run_dir);
// The script's argv as config: {"script", "args": {"--lr": "3e-4", ...}, "argv"}, so --diff names an option.
nlohmann::json config_from_argv(const std::vector<std::string>& argv);
nlohmann::json user_manifest(const std::vector<nlohmann::json>& metas, const std::vector<std::string>& launch);
// Writes DIR/manifest.json from the metas; false with `error` when no rank attached.
bool write_user_manifest(const std::string& run_dir, const std::vector<std::string>& launch, std::string& error);

}  // namespace ddp
