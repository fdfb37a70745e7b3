#pragma once
// The digest of tensors' bytes that says two replicas (or a run and its resumed twin) hold the same state bit for bit:
// numerics.rank_sync's per-step hashes, checkpoint.resume's final items, the dataset probe. The Python companion
// computes the same digest with torch ops at memory speed (python/ddp_profile/hashing.py); this is its byte-level
// definition, and tests/runtime/test_replica_digest.cpp pins both to the same values.
//
// Per tensor of n bytes, zero-padded to 32 KiB blocks of 256 rows x 16 lanes of little-endian 64-bit words: per block k
// the lane sums S_k[l] and the row-weighted total T_k = sum_r (r+1) sum_l w (rows counted from 1); then
// A[l] = sum_k (2k+1) S_k[l] and B = sum_k (2k+1) T_k, all mod 2^64 (both plain reductions over the data, so the
// companion's torch ops run at memory speed). The tensor adds the words n, A[0..15], B to a fold that runs across the
// tensors in order: per word FNV-1a's step (h = (h ^ w) * prime) then h ^= h >> 32. One changed word always changes A
// (odd weights); a word moved to another row changes B, to another lane A. A checksum of replicas, not a
// cryptographic hash.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp {

class ReplicaDigest {
 public:
  void add(const void* bytes, size_t n);  // one tensor's bytes, contiguous
  std::string hex() const;                // 16 hex digits

 private:
  uint64_t h_ = 1469598103934665603ull;
};

}  // namespace ddp
