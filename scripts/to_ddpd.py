#!/usr/bin/env python3
"""Bring your own data: numpy arrays -> a ddp_profile dataset (.ddpd, version 2; docs/data-format.md).

  python3 scripts/to_ddpd.py data.npz OUT.ddpd                 # arrays 'x' and 'y' in one .npz
  python3 scripts/to_ddpd.py x.npy y.npy OUT.ddpd              # samples and labels in two .npy files
  python3 scripts/to_ddpd.py data.npz OUT.ddpd --x-key images --y-key labels [--classes 10]

x: N samples of any shape (N, ...), any real dtype (stored as float32); y: N integer labels in [0, classes).
classes defaults to max(y) + 1 (at least 2). The sample shape (up to 4 dimensions) is kept in the header, so the
model sees [batch, *shape]. Needs numpy only.
"""
import argparse
import os
import struct
import sys

import numpy as np

MAGIC = b"DDPDATA1"
HEADER = struct.Struct("<8sIIQQQII4I")  # 64 bytes, as runtime/data/dataset_file.h's DatasetHeader
assert HEADER.size == 64


def load(args):
    if len(args.inputs) == 1:
        with np.load(args.inputs[0]) as z:
            missing = [k for k in (args.x_key, args.y_key) if k not in z]
            if missing:
                sys.exit(f"to_ddpd: {args.inputs[0]} has no array {missing[0]!r} (has {sorted(z.keys())}); "
                         "use --x-key/--y-key")
            return z[args.x_key], z[args.y_key]
    if len(args.inputs) == 2:
        return np.load(args.inputs[0]), np.load(args.inputs[1])
    sys.exit("to_ddpd: give one .npz or two .npy files (x, y) before OUT.ddpd")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="data.npz, or x.npy y.npy")
    ap.add_argument("out", help="the .ddpd file to write")
    ap.add_argument("--x-key", default="x")
    ap.add_argument("--y-key", default="y")
    ap.add_argument("--classes", type=int, default=0, help="class count (default: max label + 1, at least 2)")
    args = ap.parse_args()

    x, y = load(args)
    if x.ndim < 2 or x.ndim > 5:
        sys.exit(f"to_ddpd: x must be (N, ...) with 1 to 4 sample dimensions, got shape {x.shape}")
    if y.ndim != 1 or len(y) != len(x):
        sys.exit(f"to_ddpd: y must be (N,) with N = {len(x)}, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        sys.exit(f"to_ddpd: labels must be integers, got {y.dtype}")
    if len(x) == 0:
        sys.exit("to_ddpd: no samples")
    classes = args.classes or max(2, int(y.max()) + 1)
    bad = np.flatnonzero((y < 0) | (y >= classes))
    if bad.size:
        sys.exit(f"to_ddpd: sample {bad[0]} has label {y[bad[0]]}, outside [0, {classes})")
    n, shape = len(x), x.shape[1:]
    features = int(np.prod(shape))
    flat = np.ascontiguousarray(x.reshape(n, features), dtype=np.float32)
    mean = flat.mean(axis=0, dtype=np.float64)
    std = np.sqrt(np.maximum(flat.var(axis=0, dtype=np.float64), 1e-12))
    stats_offset = HEADER.size
    record_offset = stats_offset + 2 * features * 4
    dims = list(shape) + [0] * (4 - len(shape))
    header = HEADER.pack(MAGIC, 2, features, n, record_offset, stats_offset, classes, len(shape), *dims)
    records = np.empty(n, dtype=np.dtype([("x", "<f4", (features,)), ("y", "<i4")]))
    records["x"] = flat
    records["y"] = y.astype("<i4")
    tmp = f"{args.out}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:  # written whole, then renamed: a reader never sees half a dataset
        f.write(header)
        f.write(mean.astype("<f4").tobytes())
        f.write(std.astype("<f4").tobytes())
        f.write(records.tobytes())
    os.replace(tmp, args.out)
    print(f"{args.out}: {n} samples of shape {list(shape)}, {classes} classes")


if __name__ == "__main__":
    main()
