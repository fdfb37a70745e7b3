#include "runtime/data/sampler.h"

#include <limits>
#include <random>
#include <stdexcept>
#include <utility>

namespace ddp {

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed) {
  if (n < 0) throw std::invalid_argument("torch_randperm: negative length");
  std::mt19937 engine(static_cast<uint32_t>(seed));  // at::mt19937(seed): init_with_uint32(seed & 0xffffffff)
  std::vector<int64_t> r(static_cast<size_t>(n));
  if (n < std::numeric_limits<uint32_t>::max() / 20) {
    for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
    for (int64_t i = 0; i < n - 1; ++i) {
      const int64_t z = static_cast<int64_t>(engine()) % (n - i);  // CPUGeneratorImpl::random(): one 32-bit draw
      std::swap(r[static_cast<size_t>(i)], r[static_cast<size_t>(z + i)]);
    }
    return r;
  }
  for (int64_t i = 0; i < n; ++i) {  // random64(): the first draw the high half, the second the low
    const uint64_t hi = engine(), lo = engine();
    const auto z = static_cast<size_t>(((hi << 32) | lo) % static_cast<uint64_t>(i + 1));
    r[static_cast<size_t>(i)] = r[z];
    r[z] = i;
  }
  return r;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int epoch, bool shuffle) {
  if (shuffle) return torch_randperm(n, seed + static_cast<uint64_t>(epoch));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  return order;
}

int64_t samples_per_rank(int64_t n, int world, bool drop_last) {
  if (world <= 0 || n < 0) throw std::invalid_argument("samples_per_rank: bad world size or length");
  if (drop_last && n % world != 0) return (n - world + world - 1) / world;  // ceil((n - world) / world)
  return (n + world - 1) / world;
}

std::vector<int64_t> shard_indices(const std::vector<int64_t>& order, int rank, int world, bool drop_last) {
  if (rank < 0 || rank >= world) throw std::invalid_argument("shard_indices: rank out of range");
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t per_rank = samples_per_rank(n, world, drop_last);
  const int64_t total = per_rank * world;
  std::vector<int64_t> padded(order.begin(), order.begin() + std::min(n, total));
  // Padding repeats the head of the order (several times over when the dataset is smaller than the padding).
  for (int64_t i = 0; static_cast<int64_t>(padded.size()) < total && n > 0; ++i) padded.push_back(order[i % n]);
  std::vector<int64_t> mine;
  mine.reserve(per_rank);
  for (int64_t i = rank; i < total; i += world) mine.push_back(padded[i]);
  return mine;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& indices, int64_t batch_size,
                                               bool drop_last) {
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < indices.size(); i += batch_size) {
    size_t end = std::min(indices.size(), i + static_cast<size_t>(batch_size));
    if (drop_last && end - i < static_cast<size_t>(batch_size)) break;
    out.emplace_back(indices.begin() + i, indices.begin() + end);
  }
  return out;
}

}  // namespace ddp
