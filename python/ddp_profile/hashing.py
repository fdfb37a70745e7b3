"""The replica digest of tensors (runtime/common/replica_digest.h, bit for bit): per tensor of n bytes, zero-padded to
32 KiB blocks of 256 rows x 16 lanes of little-endian 64-bit words, per block k the lane sums S_k[l] and the
row-weighted total T_k = sum_r (r+1) sum_l w; A[l] = sum_k (2k+1) S_k[l] and B = sum_k (2k+1) T_k, mod 2^64; the
words n, A[0..15], B go into a fold that runs across the tensors (per word FNV-1a's step, then h ^= h >> 32).
Computed with torch's integer ops where the tensor lives (no copy to the host; one pass at memory speed on the CPU,
where a word-by-word loop in Python took ~2 s). Small JSON values are hashed with bytes_hash: FNV-1a over their bytes."""
from __future__ import annotations

import math
import sys
from array import array
from typing import Any, Dict, Iterable, List, Optional, Tuple

OFFSET = 1469598103934665603
PRIME = 1099511628211
MASK = (1 << 64) - 1
BLOCK_BYTES = 32768  # 4096 words: 256 rows x 16 lanes
_ROWS, _LANES = 256, 16
ONE_PASS_DEVICES = ("cpu",)  # where torch has int64 matrix products (tests empty it to check the other way)


def fnv_update(h: int, data: bytes) -> int:
    n8 = len(data) - len(data) % 8
    if n8:
        if sys.byteorder == "little":
            words: Iterable[int] = memoryview(data)[:n8].cast("Q")
        else:
            a = array("Q", data[:n8])
            a.byteswap()
            words = a
        for w in words:
            h = ((h ^ w) * PRIME) & MASK
    for b in data[n8:]:
        h = ((h ^ b) * PRIME) & MASK
    return h


def _odd_weighted(blocks: Any, first: int) -> Tuple[Any, Any]:
    """(blocks, 4096) int64 starting at block number `first` -> the lane sums (16) and row sums (256) of
    y[r, l] = sum_k (2k+1) w[k, r, l]: A = the lane sums, B = sum_r (r+1) row_r. On the CPU y is one int64
    matrix-vector product, the data read once (22 ms for 101 MB on one core here, 33 ms for a lane sum and a row sum of
    every block); int64 products are CPU-only in torch, so elsewhere the two reductions of each block give the same
    words."""
    import torch

    k = blocks.shape[0]
    odd = 2 * torch.arange(first, first + k, dtype=torch.int64, device=blocks.device) + 1
    if blocks.device.type in ONE_PASS_DEVICES:
        y = torch.mv(blocks.t(), odd).view(_ROWS, _LANES)
        return y.sum(0), y.sum(1)
    per_block = blocks.view(k, _ROWS, _LANES)
    return (per_block.sum(1) * odd.view(-1, 1)).sum(0), (per_block.sum(2) * odd.view(-1, 1)).sum(0)


def tensor_words(t: Any) -> List[int]:
    """The 18 words one tensor adds to the digest: n, A[0..15], B."""
    import torch

    b = t.detach().contiguous().reshape(-1).view(torch.uint8)
    n = b.numel()
    if n == 0:
        return [0] * (2 + _LANES)
    whole = n - n % BLOCK_BYTES
    parts = []
    if whole:
        head = b[:whole]
        if head.data_ptr() % 8:  # a view at an odd offset: int64 needs its alignment
            head = head.clone()
        parts.append(_odd_weighted(head.view(torch.int64).view(-1, _ROWS * _LANES), 0))
    if n > whole:
        tail = torch.zeros(BLOCK_BYTES, dtype=torch.uint8, device=b.device)
        tail[: n - whole] = b[whole:]
        parts.append(_odd_weighted(tail.view(torch.int64).view(1, -1), whole // BLOCK_BYTES))
    lanes = sum(p[0] for p in parts)
    rows = sum(p[1] for p in parts)
    weights = torch.arange(1, _ROWS + 1, dtype=torch.int64, device=rows.device)
    return [n] + lanes.tolist() + [int((rows * weights).sum())]


def tensors_hash(ts: Iterable[Any]) -> str:
    h = OFFSET
    for t in ts:
        for w in tensor_words(t):
            h = ((h ^ (w & MASK)) * PRIME) & MASK
            h ^= h >> 32  # FNV alone keeps a bit-63 difference in bit 63: two would cancel
    return "%016x" % h


def same_bits(a: Any, b: Any) -> bool:
    """Bitwise equality: NaN equals a NaN of the same bits (torch.equal says NaN != NaN), -0.0 differs from 0.0."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    x, y = a.detach().cpu().contiguous().reshape(-1), b.detach().cpu().contiguous().reshape(-1)
    return bool(torch.equal(x.view(torch.uint8), y.view(torch.uint8)))


def bytes_hash(data: bytes) -> str:
    return "%016x" % fnv_update(OFFSET, data)


def _num(x: float) -> Optional[float]:
    return x if math.isfinite(x) else None  # nlohmann::json writes NaN/inf as null


def tensor_summary(t: Any) -> Dict[str, Any]:
    """{"count","hash","mean","std","min","max","l2"} as the C++ tensor_summary."""
    import torch

    f = t.detach().cpu().to(torch.float64).reshape(-1)
    j: Dict[str, Any] = {"count": int(f.numel()), "hash": tensors_hash([t])}
    if f.numel() == 0:
        return j
    j["mean"] = _num(f.mean().item())
    j["std"] = _num(f.std().item()) if f.numel() > 1 else 0.0
    j["min"] = _num(f.min().item())
    j["max"] = _num(f.max().item())
    j["l2"] = _num(f.norm().item())
    return j
