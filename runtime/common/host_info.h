#pragma once
// Facts about this host and build that the manifest, error messages and traces name.
#include <string>

namespace ddp {
std::string host_name();
std::string cpu_model_name();
std::string compiler_version();
std::string iso_time_now();  // UTC, ISO 8601
}  // namespace ddp
