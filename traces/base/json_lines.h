#pragma once
// The project's one JSON-lines reader (the verification logs the ranks and the companion write, one object a line).
// One policy for a bad line: it is counted and the first one named, never skipped silently; whether a bad line
// spoils the whole file is the caller's decision (a check refuses to judge it, --diff reads the rest).
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddp {

struct JsonLines {
  std::vector<nlohmann::json> objects;  // every line that parsed as a JSON object, in file order
  std::vector<size_t> line_numbers;     // each object's line in the file, 1-based
  size_t bad_lines = 0;                 // lines that did not (empty lines are not counted)
  size_t first_bad_line = 0;            // 1-based; 0 when none
  // "<name>: N unreadable line(s), first at line L", or "" when every line read.
  std::string problem(const std::string& name) const;
};

// False with `error` ("cannot open PATH") when the file cannot be read; otherwise every line is read or counted.
bool read_json_lines(const std::string& path, JsonLines& out, std::string& error);

// The same, for a caller that cannot judge a file with a damaged line: false with `error` naming the file, the count
// and the first bad line.
bool read_json_lines_strict(const std::string& path, std::vector<nlohmann::json>& out, std::string& error);

}  // namespace ddp
