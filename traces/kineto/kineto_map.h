#pragma once
// The mapping from PyTorch profiler (Kineto) event names to our stages (docs/kineto.md is its specification). One
// place says which Kineto name is which stage, so the importer, the docs and the tests agree. Users add their own
// record_function names with `--map REGEX=STAGE`; their rules are tried before the built-in ones.
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traces/model/stages.h"

namespace ddp {

// Where a collective's span comes from. A trace can show one collective several times (the dispatcher op on the
// main thread, the backend's op on its own thread, record_param_comms around it); the importer keeps only the best
// source present in a trace, so a collective is counted once. Lower is better.
enum class CollectiveSource : uint8_t {
  backend = 0,      // gloo:all_reduce / nccl:all_reduce: the backend running the collective
  param_comms = 1,  // record_param_comms with "Collective name" allreduce
  dispatcher = 2,   // c10d::allreduce_: the enqueue on the calling thread
  none = 3,
};

struct KinetoMatch {
  Stage stage = Stage::step;
  CollectiveSource collective = CollectiveSource::none;  // for allreduce matches
  bool user = false;                                     // matched a --map rule
};

class KinetoStageMap {
 public:
  // Adds a `--map REGEX=STAGE` rule (the last '=' splits). False with `error` naming the bad regex or stage.
  bool add_user_rule(const std::string& spec, std::string& error);
  size_t user_rules() const { return user_.size(); }

  // The stage of a complete event, or nullopt when it is not a stage. `collective_name` is record_param_comms'
  // "Collective name" argument (empty when absent). Results are cached per name and category.
  std::optional<KinetoMatch> classify(std::string_view name, std::string_view cat,
                                      std::string_view collective_name = {}) const;

 private:
  struct UserRule {
    std::string text;
    std::regex re;
    Stage stage;
  };
  std::vector<UserRule> user_;
  mutable std::unordered_map<std::string, std::optional<KinetoMatch>> cache_;
  mutable std::string key_;  // the cache key being looked up
};

// `ProfilerStep#N` -> N.
bool parse_profiler_step(std::string_view name, uint32_t& step);
// Bytes per element of a PyTorch dtype name as Kineto writes it ("Float", "Half", "BFloat16", "Long", ...); 0 when
// unknown.
uint32_t dtype_bytes(std::string_view dtype);

}  // namespace ddp
