#include "runtime/check/check_result.h"

#include <cstdio>
#include <sstream>

namespace ddp {

const char* status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::pass:
      return "pass";
    case CheckStatus::warn:
      return "warn";
    case CheckStatus::fail:
      return "fail";
    case CheckStatus::skip:
      return "skip";
  }
  return "?";
}

CheckResult check_result(const std::string& id, CheckStatus s, std::string summary, nlohmann::json details) {
  CheckResult r;
  r.id = id;
  r.status = s;
  r.summary = std::move(summary);
  r.details = std::move(details);
  return r;
}

nlohmann::json checks_json(const std::vector<CheckResult>& results) {
  nlohmann::json a = nlohmann::json::array();
  int fails = 0;
  for (const auto& r : results) {
    a.push_back({{"id", r.id}, {"status", status_name(r.status)}, {"summary", r.summary}, {"details", r.details}});
    fails += r.status == CheckStatus::fail;
  }
  return {{"checks", a}, {"failed", fails}, {"passed", fails == 0}};
}

std::string checks_table(const std::vector<CheckResult>& results) {
  std::ostringstream o;
  for (const auto& r : results) {
    char head[64];
    std::snprintf(head, sizeof(head), "%-20s %-4s  ", r.id.c_str(), status_name(r.status));
    o << head << r.summary << "\n";
  }
  return o.str();
}

std::string name_list(const std::vector<std::string>& names, size_t most) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

}  // namespace ddp
