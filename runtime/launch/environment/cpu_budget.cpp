#include "runtime/launch/environment/cpu_budget.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "runtime/launch/environment/cpu_sets.h"

namespace ddp {
namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// This process's cgroup path from /proc/self/cgroup: the v2 line ("0::/path"), else the v1 cpu controller's.
std::string cgroup_path(bool& v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string v1;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) {
      v2 = true;
      return line.substr(3);
    }
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a != std::string::npos && b != std::string::npos) {
      const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
      if (controllers.find(",cpu,") != std::string::npos) v1 = line.substr(b + 1);
    }
  }
  v2 = false;
  return v1;
}

std::optional<double> cgroup_cores() {
  bool v2 = false;
  const std::string path = cgroup_path(v2);
  if (v2) return cgroup_cores_of(first_line("/sys/fs/cgroup" + path + "/cpu.max"));
  const std::string dir = "/sys/fs/cgroup/cpu" + path;
  const std::string quota = first_line(dir + "/cpu.cfs_quota_us"), period = first_line(dir + "/cpu.cfs_period_us");
  if (quota.empty() || period.empty()) return std::nullopt;
  return cgroup_cores_of(quota + " " + period);
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

}  // namespace

std::optional<double> cgroup_cores_of(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || q <= 0) return std::nullopt;  // v1 says -1 for none
  return q / period;
}

records::cpu_budget this_process_cpu_budget(int intra_op_threads, std::optional<int> loader_workers) {
  records::cpu_budget b;
  b.cores_online = ::sysconf(_SC_NPROCESSORS_ONLN);
  for (int c : allowed_cpus()) b.cpus_allowed.push_back(c);
  b.cgroup_cores = cgroup_cores();
  b.intra_op_threads = intra_op_threads;
  b.omp_num_threads = env("OMP_NUM_THREADS");
  b.mkl_num_threads = env("MKL_NUM_THREADS");
  if (loader_workers) b.loader_workers = *loader_workers;
  return b;
}

}  // namespace ddp
