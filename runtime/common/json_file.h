#pragma once
// Run-folder JSON files other processes read while we write them (manifest.json, run_status.json, checks.json,
// checkpoint sidecars): written whole or not at all.
#include <string>

#include <nlohmann/json.hpp>

namespace ddp {
// Writes JSON to path through a temp file and rename, so readers never see a half-written file.
bool write_json_atomic(const std::string& path, const nlohmann::json& j, std::string& error);
}  // namespace ddp
