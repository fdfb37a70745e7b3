#pragma once
// The cross-rank reading of Flight Recorder dumps: per process group, collectives matched by sequence id across the
// group's ranks. What a hung job needs said: the collective where the ranks part (the first sequence id some members
// enqueued and others never did), which ranks never joined it and each rank's last collective; and the collectives
// every rank enqueued whose op, sizes or dtypes disagree (torch's analyzer's type, size and dtype mismatches).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "traces/flight_recorder/fr_dump.h"

namespace ddp {

enum class FrMismatchKind { op, sizes, dtypes };
const char* fr_mismatch_name(FrMismatchKind k);  // "op" | "sizes" | "dtypes"

// One collective as the ranks that agree on it describe it.
struct FrVariant {
  std::vector<int> ranks;
  FrEntry entry;
};

struct FrMismatch {
  FrMismatchKind kind = FrMismatchKind::op;
  int64_t seq = 0;
  std::vector<FrVariant> variants;  // the largest first
};

// Whether a collective completed, as far as the dump knows. NCCL records start and completion. Gloo (torch 2.11)
// records neither (state stays "scheduled"); it only retires an entry when the collective ends, completed or failed
// (a peer gone), and its pg_status can lag: `retired` false is pending, true is ended.
enum class FrDone { yes, no, ended, unknown };
const char* fr_done_text(
    FrDone d);  // "completed" | "pending" | "ended (completed or failed)" | "completion not recorded"
// Whether `e`, an entry of `dump`, completed: its own state first; pg_status only where the backend tracks completion.
FrDone fr_entry_done(const FrEntry& e, const FrDump& dump);

// A rank's last collective in a group: what it last enqueued and whether it completed.
struct FrLast {
  int rank = -1;
  bool any = false;  // false: the rank's dump holds no collective of this group
  FrEntry entry;
  FrDone done = FrDone::unknown;
};

struct FrGroupVerdict {
  std::string id, desc;
  std::vector<int> members;                    // from the dumps' pg_config; the dumped ranks where it says none
  std::vector<int> without_dump;               // members whose dump is missing
  int64_t common_first = 0, common_last = -1;  // sequence ids every dumped member still holds (ring buffers drop old)
  int64_t compared = 0;                        // collectives compared in that window
  std::vector<FrMismatch> mismatches;          // in sequence order, at most kFrMismatchesKept
  // Where the ranks part: -1 when every member's last collective is the same.
  int64_t parted_seq = -1;
  FrVariant parted;               // the collective at parted_seq, as the ranks that enqueued it say
  std::vector<int> never_joined;  // members whose last collective is before parted_seq
  std::vector<FrLast> last;       // per dumped member
  // Every member's last collective is the same one and some are known not to have completed it: stuck inside it.
  std::vector<int> stuck_inside;
  int64_t p2p = 0;  // point-to-point entries (not matched: their order is per peer pair)
};

struct FrVerdict {
  std::vector<int> ranks;  // dumped ranks
  int world = 0;
  std::vector<FrGroupVerdict> groups;  // the default group first
  std::string headline;                // one sentence: where the ranks part, the first mismatch, or all agree
  bool consistent = true;              // no parting, no mismatch, nothing stuck
};

inline constexpr size_t kFrMismatchesKept = 16;

FrVerdict match_fr_dumps(const std::vector<FrDump>& dumps);

// "all_reduce #19 [4096] Float" (sizes and dtypes of the inputs).
std::string describe_fr_entry(const FrEntry& e);
std::string describe_fr_shape(const std::vector<int64_t>& dims);                // "[2, 4096]"
std::string describe_fr_group(const std::string& id, const std::string& desc);  // "group 0 (default_pg)"

}  // namespace ddp
