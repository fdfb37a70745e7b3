#pragma once
// One check's verdict and the ladder's stable output: DIR/checks.json and the table printed after the ladder.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddp {

enum class CheckStatus { pass, warn, fail, skip };
const char* status_name(CheckStatus s);

struct CheckResult {
  std::string id;
  CheckStatus status = CheckStatus::skip;
  std::string summary;  // one line: what was compared, the numbers, and on failure where and the likely cause
  nlohmann::json details = nlohmann::json::object();
};
CheckResult check_result(const std::string& id, CheckStatus status, std::string summary,
                         nlohmann::json details = nlohmann::json::object());

// Names for a summary line: the first `most`, comma-separated, then ", ... (N in all)" when there are more.
std::string name_list(const std::vector<std::string>& names, size_t most = 4);

// {"checks": [{id, status, summary, details}...], "failed": N, "passed": bool} (docs/checks.md: the stable shape).
nlohmann::json checks_json(const std::vector<CheckResult>& results);
// One line per check: id, status, summary.
std::string checks_table(const std::vector<CheckResult>& results);

}  // namespace ddp
