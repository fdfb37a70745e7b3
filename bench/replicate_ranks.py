"""A real 2-rank torch.profiler job replicated to N ranks, for the report-at-scale figures (docs/benchmarks.md):
copy k of the source's rank r becomes rank 2k + r (distributedInfo's rank and world_size, the pid rewritten), so
the source's pattern repeats: with tests/data/kineto/pytorch-2.11-cpu/slow-forward-rank0 every even rank has the slow
forward. --needle R makes rank R the source's --slow-rank (0) and every other rank a copy of the balanced job's.

    python3 bench/replicate_ranks.py SRC_DIR OUT_DIR --ranks 1024 [--needle 777 --balanced BALANCED_DIR]
"""
import argparse
import glob
import gzip
import json
import os


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def rank_files(d):
    files = {}
    for f in glob.glob(os.path.join(d, "*.json*")):
        files[load(f)["distributedInfo"]["rank"]] = f
    return [load(files[r]) for r in sorted(files)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--needle", type=int, default=-1)
    ap.add_argument("--balanced", default="")
    ap.add_argument("--slow-rank", type=int, default=0)
    a = ap.parse_args()
    src = rank_files(a.src)
    plain = rank_files(a.balanced) if a.needle >= 0 else src
    n = len(src)
    os.makedirs(a.out, exist_ok=True)
    for rank in range(a.ranks):
        if a.needle < 0:
            t = json.loads(json.dumps(src[rank % n]))
        elif rank == a.needle:
            t = json.loads(json.dumps(src[a.slow_rank]))
        else:
            t = json.loads(json.dumps(plain[rank % len(plain)]))
        t["distributedInfo"].update(rank=rank, world_size=a.ranks)
        for pg in t["distributedInfo"].get("pg_config", []):
            pg.update(pg_size=a.ranks, ranks=list(range(a.ranks)))
        pid = 100000 + rank
        for e in t["traceEvents"]:
            if isinstance(e.get("pid"), int):
                e["pid"] = pid
        with gzip.open(os.path.join(a.out, "rank%d.pt.trace.json.gz" % rank), "wt") as f:
            json.dump(t, f)


if __name__ == "__main__":
    main()
