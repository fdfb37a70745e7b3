#include "traces/base/json_lines.h"

#include <fstream>

namespace ddp {

std::string JsonLines::problem(const std::string& name) const {
  if (bad_lines == 0) return {};
  return name + ": " + std::to_string(bad_lines) + " unreadable line(s), first at line " +
         std::to_string(first_bad_line);
}

bool read_json_lines(const std::string& path, JsonLines& out, std::string& error) {
  out = JsonLines{};
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      if (out.bad_lines++ == 0) out.first_bad_line = n;
      continue;
    }
    out.objects.push_back(std::move(j));
    out.line_numbers.push_back(n);
  }
  return true;
}

bool read_json_lines_strict(const std::string& path, std::vector<nlohmann::json>& out, std::string& error) {
  JsonLines lines;
  if (!read_json_lines(path, lines, error)) return false;
  if (lines.bad_lines > 0) {
    error = lines.problem(path);
    return false;
  }
  out = std::move(lines.objects);
  return true;
}

}  // namespace ddp
