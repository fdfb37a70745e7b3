#include "runtime/launch/environment/cpu_sets.h"

#include <sched.h>

namespace ddp {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

std::vector<std::vector<int>> rank_cpu_sets(const std::vector<int>& cpus, int world) {
  std::vector<std::vector<int>> sets;
  if (world < 2 || static_cast<int>(cpus.size()) < world) return sets;
  const size_t share = cpus.size() / static_cast<size_t>(world);
  for (int r = 0; r < world; ++r)
    sets.emplace_back(cpus.begin() + static_cast<long>(r * share), cpus.begin() + static_cast<long>((r + 1) * share));
  return sets;
}

bool pin_process(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return !cpus.empty() && ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

}  // namespace ddp
