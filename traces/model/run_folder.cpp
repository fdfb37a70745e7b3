#include "traces/model/run_folder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>

#include "traces/base/parse_int.h"

namespace ddp {
namespace fs = std::filesystem;

namespace {
std::string rank_name(int rank) { return "rank" + std::to_string(rank); }
}  // namespace

std::string rank_trace_file(int rank) { return rank_name(rank) + ".ddpt"; }
bool is_rank_trace_file(const std::string& name, int* rank) {
  static const std::regex kRankFile(R"(rank(\d+)\.ddpt)");
  std::smatch m;
  if (!std::regex_match(name, m, kRankFile)) return false;
  return !rank || parse_int(m[1].str().c_str(), *rank);
}
std::string rank_log_file(int rank) { return std::string(kLogsDir) + "/" + rank_name(rank) + ".log"; }
std::string rank_progress_file(int rank) { return std::string(kProgressDir) + "/" + rank_name(rank) + ".bin"; }
std::string verify_log_file(int rank, const char* kind) {
  return std::string(kVerifyDir) + "/" + rank_name(rank) + "." + kind + ".jsonl";
}
bool is_verify_log_file(const std::string& name, const char* kind, int* rank) {
  const std::regex re("rank(\\d+)\\." + std::string(kind) + "\\.jsonl");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return false;
  return !rank || parse_int(m[1].str().c_str(), *rank);
}
std::string companion_meta_file(int rank) { return std::string(kVerifyDir) + "/" + rank_name(rank) + ".meta.json"; }
std::string companion_save_copy_file(int save, int rank, const std::string& name) {
  return "checkpoints/save" + std::to_string(save) + "/" + rank_name(rank) + "/" + name;
}
std::string reference_step_file(int64_t step) {
  return std::string(kVerifyDir) + "/reference_step" + std::to_string(step) + ".safetensors";
}
std::string reference_meta_file(int64_t step) {
  return std::string(kVerifyDir) + "/reference_step" + std::to_string(step) + ".json";
}
std::string verify_step_file(int rank, int64_t step) {
  return std::string(kVerifyDir) + "/" + rank_name(rank) + "_step" + std::to_string(step) + ".pt";
}
std::string companion_verify_step_file(int rank, int64_t step) {
  return std::string(kVerifyDir) + "/" + rank_name(rank) + "_step" + std::to_string(step) + ".safetensors";
}
bool is_verify_step_file(const std::string& name, int* rank, int64_t* step) {
  static const std::regex kStepFile(R"(rank(\d+)_step(\d+)\.pt)");
  std::smatch m;
  if (!std::regex_match(name, m, kStepFile)) return false;
  int64_t s = 0;
  if ((rank && !parse_int(m[1].str().c_str(), *rank)) || !parse_decimal(m[2].str(), s)) return false;
  if (step) *step = s;
  return true;
}
std::string kineto_rank_trace_file(int rank) { return rank_name(rank) + ".pt.trace.json"; }
std::string datapath_events_file(int rank, int64_t pid) {
  return std::string(kDatapathDir) + "/" + rank_name(rank) + ".p" + std::to_string(pid) + ".events";
}
std::string datapath_header_file(int rank, int64_t pid) {
  return std::string(kDatapathDir) + "/" + rank_name(rank) + ".p" + std::to_string(pid) + ".json";
}
std::string flight_recorder_dump_file(int rank) {
  return std::string(kFlightRecorderDir) + "/" + rank_name(rank) + ".pkl";
}
namespace {
bool ends_with(const std::string& name, const char* tail) {
  const size_t n = std::char_traits<char>::length(tail);
  return name.size() > n && name.compare(name.size() - n, n, tail) == 0;
}
}  // namespace
bool is_trace_file_name(const std::string& name) { return ends_with(name, ".json") || ends_with(name, ".json.gz"); }
bool is_run_folder_file(const std::string& name) {
  return name == kManifestFile || name == kChromeTraceFile || name == kRunStatusFile || name == kChecksFile;
}
bool is_hta_input_name(const std::string& name) { return ends_with(name, ".json") || ends_with(name, ".gz"); }
std::string checkpoint_folder(int64_t step) { return "checkpoints/step" + std::to_string(step); }
std::string checkpoint_rank_file(int rank) { return rank_name(rank) + ".pt"; }

}  // namespace ddp
