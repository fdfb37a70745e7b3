#pragma once
// When the supervisor calls a hang of a user's script, the ranks are asked for their Flight Recorder dumps before
// they are ended, and where the ranks part goes into the hang message (docs/flight-recorder.md). The companion answers
// (python/ddp_profile/flight_recorder.py); traces/flight_recorder matches the dumps.
#include <string>
#include <vector>

namespace ddp {

// torch records collectives only with a ring buffer: set for a user's job unless the user set it (entries kept per
// rank; ~1 KB each with frames).
inline const char* kEnvTorchFrBufferSize = "TORCH_FR_BUFFER_SIZE";
inline const char* kFrBufferEntries = "2000";
// How long the hung job's ranks get to write their dumps: well inside faults.exit's 10 s from the last progress.
inline constexpr double kFrDumpWaitS = 3.0;

// Asks `ranks` (still running) for their dumps in `run_dir`, waits until each has answered or kFrDumpWaitS passed,
// and says what the dumps show: "Flight Recorder: the ranks part at ... (N dumps in RUN/flight_recorder)", or why
// there is nothing to say (no rank answered: a companion too old, torch without a Flight Recorder). Never fails.
std::string hang_dump_verdict(const std::string& run_dir, const std::vector<int>& ranks);

}  // namespace ddp
