#!/usr/bin/env python3
"""Checks that files ddp_profile writes for Python (checkpoints, verification dumps) are what
torch.load(path, weights_only=True) accepts, without needing torch installed: a zip archive with <name>/data.pkl,
every persistent storage id naming a record in the archive, and only globals on the weights-only unpickler's
allowlist (torch/_weights_only_unpickler.py). Usage: weights_only_globals.py FILE... ; exit 1 on the first refusal."""
import pickletools
import re
import sys
import zipfile

ALLOWED = {
    "collections.OrderedDict", "collections.Counter", "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state", "torch.Size", "torch.device",
    "torch.Tensor", "torch.nn.parameter.Parameter", "torch.serialization._get_layout", "builtins.set",
    "builtins.complex", "builtins.bytearray", "_codecs.encode",
}
STORAGE = re.compile(r"^torch\.(Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool)Storage$")


def check(path):
    z = zipfile.ZipFile(path)
    names = set(z.namelist())
    pkl = [n for n in names if n.endswith("data.pkl")]
    if len(pkl) != 1:
        return f"{path}: expected one */data.pkl, found {sorted(pkl)}"
    prefix = pkl[0][: -len("data.pkl")]
    data = z.read(pkl[0])
    strings = []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        if op.name == "GLOBAL":
            name = arg.replace(" ", ".")
        elif op.name == "STACK_GLOBAL":
            name = f"{strings[-2]}.{strings[-1]}"
        else:
            continue
        if name not in ALLOWED and not STORAGE.match(name):
            return f"{path}: global {name} is not allowed by torch.load(weights_only=True)"
    # Persistent ids: ('storage', <StorageType>, key, location, numel) -> record <prefix>data/<key>
    keys = set()
    ops = list(pickletools.genops(data))
    for i, (op, arg, _) in enumerate(ops):
        if op.name == "BINPERSID":
            # the tuple was built from the strings just before: 'storage', key, location
            window = [a for o, a, _ in ops[max(0, i - 8):i] if o.name in ("SHORT_BINUNICODE", "BINUNICODE")]
            if "storage" in window:
                keys.add(window[window.index("storage") + 1])
    missing = [k for k in keys if f"{prefix}data/{k}" not in names]
    if missing:
        return f"{path}: storages {missing} have no record in the archive"
    return None


if __name__ == "__main__":
    for f in sys.argv[1:]:
        err = check(f)
        if err:
            print(err)
            sys.exit(1)
        print(f"{f}: ok")
