"""Run-folder files: JSON lines appended and flushed line by line, whole files replaced atomically (the one atomic
writer: every file that appears whole goes through _atomic). Every record is checked against its row of
layout.RECORDS (traces/model/records.def) before it is written."""
from __future__ import annotations

import json
import os
import shutil
import time
from typing import Dict, Any, Callable, List, Optional, TextIO, Tuple

from . import layout


def dumps(obj: Any) -> str:
    # Sorted keys, compact: the same text nlohmann::json::dump() writes for the C++ runtime's lines.
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


class Jsonl:
    """One verification log: every line a `record` of layout.RECORDS."""

    def __init__(self, path: str, record: str) -> None:
        if record not in layout.RECORDS:
            raise layout.ContractError("%s: no record '%s' in layout.RECORDS" % (path, record))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.path, self.record = path, record
        self._f: Optional[TextIO] = open(path, "w", encoding="utf-8")

    def write(self, obj: Dict[str, Any]) -> None:
        if self._f is None:
            return
        layout.check_record(self.record, obj, os.path.basename(self.path))
        self._f.write(dumps(obj) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def _atomic(path: str, write: Callable[[str], None]) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".%s.tmp%d" % (os.path.basename(path), os.getpid()))
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_record(path: str, record: str, obj: Dict[str, Any]) -> None:
    """A whole JSON file holding one `record` of layout.RECORDS, replaced atomically."""
    layout.check_record(record, obj, os.path.basename(path))

    def w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n")

    _atomic(path, w)


_original_save: Optional[Callable[..., None]] = None


def remember_torch_save() -> None:
    """Called before ddp_profile.auto replaces torch.save: the companion's own writes go to torch's."""
    global _original_save
    if _original_save is None:
        import torch

        _original_save = torch.save


def original_torch_save() -> Callable[..., None]:
    import torch

    return _original_save if _original_save is not None else torch.save


def torch_save(obj: Any, path: str, **kwargs: Any) -> None:
    save = original_torch_save()
    _atomic(path, lambda tmp: save(obj, tmp, **kwargs))


def tensors_save(tensors: "Dict[str, Any]", path: str) -> None:
    """A flat {name: tensor} dict in the safetensors layout (traces/base/safetensors.h reads it without LibTorch;
    safetensors' load_file reads it too): an 8-byte header length, a JSON header {name: {dtype, shape,
    data_offsets}}, the raw little-endian bytes in the dict's order (the judges read that order as the module's
    forward order). Names are 'params/<p>', 'grads/<p>', 'acts/<micro>/<layer>'; a dtype outside the layout's is
    written as float64."""
    import ctypes
    import struct

    import torch

    names = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
             torch.bool: "BOOL"}
    header: Dict[str, Any] = {}
    blobs: List[bytes] = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().cpu()
        if t.dtype not in names:
            t = (torch.view_as_real(t) if t.is_complex() else t).to(torch.float64)
        t = t.contiguous()
        n = t.numel() * t.element_size()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        blobs.append(ctypes.string_at(t.data_ptr(), n) if n else b"")
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    write_bytes(path, struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_bytes(path: str, data: bytes) -> None:
    """`data` as the whole file: readers see it complete or not at all."""
    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    _atomic(path, write)


def copy(src: str, dst: str) -> None:
    _atomic(dst, lambda tmp: shutil.copyfile(src, tmp))


def _listing(src: str) -> Optional[List[Tuple[str, int, int]]]:
    """Every file under `src` with its size and time, or None when one vanished while listed."""
    out: List[Tuple[str, int, int]] = []
    for root, _, names in os.walk(src):
        for name in names:
            try:
                st = os.stat(os.path.join(root, name))
            except FileNotFoundError:
                return None
            out.append((os.path.join(root, name), st.st_size, st.st_mtime_ns))
    return sorted(out)


def _settled(src: str, quiet_s: float, limit_s: float) -> None:
    """Waits until a directory other ranks may still be writing holds no temporary file and has not changed for
    `quiet_s` (at most `limit_s`). accelerate's save_state returns on every rank without a barrier while the main
    process still writes the model and optimizer files (each through a .tmp* file renamed into place): a copy taken
    then lost a file as it was renamed (seen: "[Errno 2] No such file" on a .tmp* under the directory)."""
    deadline = time.monotonic() + limit_s
    last = _listing(src)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = _listing(src)
        if now is not None and now == last and not any(os.path.basename(p).startswith(".tmp") for p, _, _ in now):
            return
        last = now


def copy_tree(src: str, dst: str, quiet_s: float = 0.3, limit_s: float = 30.0) -> None:
    """A checkpoint directory copied whole once it has settled; the copy appears under its name only once complete.
    A file that still vanishes during the copy makes it start again (three times at most)."""
    d = os.path.dirname(os.path.abspath(dst))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".%s.tmp%d" % (os.path.basename(dst), os.getpid()))
    try:
        for attempt in range(3):
            _settled(src, quiet_s, limit_s)
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                shutil.copytree(src, tmp)
                break
            except (shutil.Error, FileNotFoundError):
                if attempt == 2:
                    raise
        shutil.rmtree(dst, ignore_errors=True)
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_directory(path: str) -> Dict[str, Any]:
    """Every file of a checkpoint directory as {file name: content}: safetensors files through safetensors, JSON
    files as JSON (the Hugging Face Trainer's trainer_state.json holds its step and epoch), the rest through
    torch.load (the job's own files, written moments ago by this process: trusted as the job trusts them). A file
    none reads is left out."""
    import torch

    out: Dict[str, Any] = {}
    for name in sorted(os.listdir(path)):
        f = os.path.join(path, name)
        if not os.path.isfile(f):
            continue
        try:
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                out[name] = load_file(f)
            elif name.endswith(".json"):
                with open(f, encoding="utf-8") as j:
                    out[name] = json.load(j)
            else:
                out[name] = torch.load(f, map_location="cpu", weights_only=False)
        except Exception:  # noqa: BLE001  (a README, a config file: not state)
            continue
    return out
