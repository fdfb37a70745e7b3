#pragma once
// What --analyze says of a folder of Flight Recorder dumps (docs/flight-recorder.md): the verdict first, then per
// process group its members, the window every dump holds, each rank's last collective (as sets of ranks above
// kRanksListedInFull) and the mismatches. The JSON keeps every rank's last collective.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/flight_recorder/fr_match.h"

namespace ddp {

std::string fr_report_text(const FrVerdict& v, const std::vector<FrDump>& dumps);
nlohmann::json fr_report_json(const FrVerdict& v, const std::vector<FrDump>& dumps);

}  // namespace ddp
