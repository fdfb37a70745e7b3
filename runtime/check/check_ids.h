#pragma once
// The check ids (stable: checks.json, --checks, docs/checks.md), each spelled once: the table registers its rows by
// them (check_table.cpp) and every judge names its result by them (judges_*.cpp).
namespace ddp::check_id {

inline constexpr const char* kManifest = "env.manifest";
inline constexpr const char* kShardRule = "data.shard_rule";
inline constexpr const char* kSameDataset = "data.same_dataset";
inline constexpr const char* kLearns = "train.learns";
inline constexpr const char* kFinite = "numerics.finite";
inline constexpr const char* kMode = "train.mode";
inline constexpr const char* kSchedule = "train.schedule";
inline constexpr const char* kIteration = "train.iteration";
inline constexpr const char* kReference = "numerics.reference";
inline constexpr const char* kRankSync = "numerics.rank_sync";
inline constexpr const char* kMemory = "memory.steady";
inline constexpr const char* kNoSync = "comm.no_sync";
inline constexpr const char* kCheckpointComplete = "checkpoint.complete";
inline constexpr const char* kCheckpointResume = "checkpoint.resume";
inline constexpr const char* kFaultsExit = "faults.exit";

}  // namespace ddp::check_id
