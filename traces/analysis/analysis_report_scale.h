#pragma once
// The text report's sections when the world is larger than kRanksListedInFull: causes and flags grouped by pattern
// with compact rank sets, victims summarised, the ranks as a distribution and a straggler table (the worst ranks by
// busy time relative to the median rank). The JSON keeps every rank's numbers (analysis_report.cpp).
#include <string>

#include "traces/analysis/analysis_types.h"

namespace ddp {

std::string causes_text_grouped(const Analysis& a);
std::string flags_text_grouped(const Analysis& a);
std::string ranks_text_summarised(const Analysis& a);
std::string gpu_text_summarised(const Analysis& a);
std::string problems_text_capped(const Analysis& a);

}  // namespace ddp
