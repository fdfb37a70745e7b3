#include "traces/model/manifest.h"

#include <filesystem>
#include <fstream>

#include "traces/base/atomic_file.h"
#include "traces/model/run_folder.h"

namespace ddp {

bool manifest_from_json(const nlohmann::json& j, Manifest& out, std::string& error) {
  out = Manifest{};
  if (!records::read(j, out.fields, error)) return false;
  const nlohmann::json config = out.fields.config ? *out.fields.config : nlohmann::json();
  out.fields.config.reset();
  if (config.is_null()) return true;
  std::string why;
  const bool read =
      out.ours() ? records::read(config, out.job.emplace(), why) : records::read(config, out.script.emplace(), why);
  if (read) return true;
  error = records::under_field("config", why);
  return false;
}

bool read_manifest(const std::string& dir, Manifest& out, std::string& error) {
  const std::string path = in_run(dir, kManifestFile);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return error = path + " is missing", false;
  std::ifstream in(path);
  if (!in) return error = "cannot read " + path, false;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error = path + " is not valid JSON", false;
  std::string why;
  if (!manifest_from_json(j, out, why)) return error = path + ": " + why, false;
  return true;
}

nlohmann::json to_json(const Manifest& m) {
  nlohmann::json j = records::to_json(m.fields);
  if (m.job)
    j["config"] = records::to_json(*m.job);
  else if (m.script)
    j["config"] = records::to_json(*m.script);
  return j;
}

bool write_manifest(const std::string& dir, const Manifest& m, std::string& error) {
  return write_file_atomically(in_run(dir, kManifestFile), to_json(m).dump(2) + "\n", error);
}

}  // namespace ddp
