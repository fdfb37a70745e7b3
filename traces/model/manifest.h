#pragma once
// manifest.json, typed: records.def's `manifest` record with its config read as what its writer put there (our job's
// job_config, a user's script_config). The one reader and the one writer of the file: every command reads it once
// and hands the value on.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "traces/model/records.h"

namespace ddp {

struct Manifest {
  records::manifest fields;                      // every field; `config` is held typed below, never read from here
  std::optional<records::job_config> job;        // config of our own job (no `source`)
  std::optional<records::script_config> script;  // config of a user's script (`source` "companion")
  bool ours() const { return !fields.source.has_value(); }
};

// The manifest of one JSON object: false with `error` naming the field ("field 'config.workers': missing").
bool manifest_from_json(const nlohmann::json& j, Manifest& out, std::string& error);
// DIR/manifest.json: false with `error` naming the file and what is wrong (absent, not JSON, a field).
bool read_manifest(const std::string& dir, Manifest& out, std::string& error);
nlohmann::json to_json(const Manifest& m);
// DIR/manifest.json, atomically (a reader never sees half of it).
bool write_manifest(const std::string& dir, const Manifest& m, std::string& error);

}  // namespace ddp
