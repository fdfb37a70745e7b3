"""The cores this rank's process could run on and the threads it asked for (records.def's cpu_budget, the meta's
`cpu`): its affinity, the host's online cores, a cgroup's CPU limit (cgroup v2 cpu.max, or v1's quota and period),
torch's thread pools and the OMP/MKL variables, and its training loader's workers. The C++ side reads the same for
our own ranks (runtime/launch/environment/cpu_budget.cpp); the analysis weighs the spans' waits for a core against
it."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional


def _first_line(path: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def cgroup_cores_of(cpu_max: str) -> Optional[float]:
    """A cgroup's CPU limit in cores from its cpu.max text: "max 100000" is none, "150000 100000" is 1.5."""
    parts = cpu_max.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _cgroup_cores() -> Optional[float]:
    v1 = None
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                hier, controllers, path = line.rstrip("\n").split(":", 2)
                if hier == "0" and controllers == "":
                    return cgroup_cores_of(_first_line("/sys/fs/cgroup%s/cpu.max" % path))
                if "cpu" in controllers.split(","):
                    v1 = path
    except (OSError, ValueError):
        return None
    if v1 is None:
        return None
    d = "/sys/fs/cgroup/cpu" + v1
    return cgroup_cores_of("%s %s" % (_first_line(d + "/cpu.cfs_quota_us"), _first_line(d + "/cpu.cfs_period_us")))


def cpu_budget(loader_workers: Optional[int]) -> Dict[str, Any]:
    import torch

    b: Dict[str, Any] = {
        "cores_online": os.cpu_count() or 1,
        "cpus_allowed": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [],
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
    }
    cores = _cgroup_cores()
    if cores is not None:
        b["cgroup_cores"] = cores
    for key, var in (("omp_num_threads", "OMP_NUM_THREADS"), ("mkl_num_threads", "MKL_NUM_THREADS")):
        if var in os.environ:
            b[key] = os.environ[var]
    if loader_workers is not None:
        b["loader_workers"] = loader_workers
    return b
