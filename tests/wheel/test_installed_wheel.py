"""The wheel as a user installs it (issue 44): scripts/test_wheel.sh builds it, installs it into a fresh venv that has
PyPI's torch and nothing else, and runs these tests against that venv. Every command runs from a folder outside the
checkout, with that venv's bin first on PATH and no build tree or Debian development package on any path; the one
library path given is the CUDA toolkit's lib64, which PyPI's CUDA torch loads its runtime from on this GPU-less
machine (scripts/torch_into_venv.sh) and which none of the wheel's executables use (their ldd runs without it)."""
import glob
import json
import os
import shutil
import struct
import subprocess
import zlib

import pytest

VENV = os.environ.get("DDP_WHEEL_VENV", "")
WORK = os.environ.get("DDP_WHEEL_WORK", "")
pytestmark = pytest.mark.skipif(not VENV, reason="run by scripts/test_wheel.sh, which builds and installs the wheel")

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "seed_job.py")
SYSTEM_PATH = "/usr/bin:/bin"
TORCH_RUNTIME_LIBS = "/usr/local/cuda/lib64"


def user_env():
    return {"HOME": os.environ["HOME"], "PATH": os.path.join(VENV, "bin") + ":" + SYSTEM_PATH,
            "LD_LIBRARY_PATH": TORCH_RUNTIME_LIBS, "LANG": "C.UTF-8"}


def run(args, timeout=600, env=None):
    r = subprocess.run(args, cwd=WORK, env=env or user_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=timeout)
    return r.returncode, r.stdout


def site_packages():
    (found,) = glob.glob(os.path.join(VENV, "lib", "python3*", "site-packages"))
    return found


def wheel_policy():
    """The manylinux policy of the wheel's platform tag, as auditwheel (which repaired it) declares it."""
    tag = os.path.basename(os.environ["DDP_WHEEL_FILE"])[:-len(".whl")].split("-")[-1]
    with open(os.environ["DDP_MANYLINUX_POLICY"]) as f:
        policies = json.load(f)
    name = tag.replace("_x86_64", "")
    (policy,) = [p for p in policies if p["name"] == name or name in p.get("aliases", [])]
    return policy


def elf_files():
    root = site_packages()
    files = []
    for folder in ("ddp_profile_bin", "ddp_profile.libs"):
        for path in sorted(glob.glob(os.path.join(root, folder, "*"))):
            if not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    files.append(path)
    return files


def needed(path):
    out = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def resolved(path):
    """ldd's soname -> path, run with no library path at all."""
    out = subprocess.run(["/usr/bin/ldd", path], env={"PATH": SYSTEM_PATH}, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    assert "not found" not in out, out
    assert "libtorch" not in out and "libc10" not in out, out
    pairs = {}
    for line in out.splitlines():
        if "=>" in line:
            soname, rest = line.strip().split(" => ", 1)
            pairs[soname] = rest.split(" (", 1)[0]
    return pairs


def test_every_executable_needs_only_the_wheel_and_what_manylinux_lets_it_take_from_the_system():
    files = elf_files()
    names = [os.path.basename(f) for f in files]
    assert "ddp_profile" in names and "ddp_viewer" in names, names
    assert any(n.startswith("libzstd") for n in names), names  # bundled, not the build machine's
    # glibc's dynamic loader is glibc, which the policy's libc.so.6 stands for (auditwheel's lddtree counts it so).
    allowed = set(wheel_policy()["lib_whitelist"]) | {"ld-linux-x86-64.so.2"}
    inside = site_packages() + os.sep
    for path in files:
        where = resolved(path)
        for soname in needed(path):
            found = where.get(soname, "")
            assert found.startswith(inside) or soname in allowed, "%s needs %s from %s" % (path, soname, found)


def test_the_entry_points_run_the_installed_executables():
    code, out = run(["ddp_profile", "--help"])
    assert code == 0 and "--check" in out, out
    assert shutil.which("ddp_profile", path=user_env()["PATH"]) == os.path.join(VENV, "bin", "ddp_profile")
    # Our own job trains with LibTorch, which the wheel leaves out: one line says where it runs instead.
    code, out = run(["ddp_profile", "--record", "--out", "ours"])
    assert code == 1 and "ddp_profile_runtime" in out and "--check -- torchrun" in out, out
    version = os.path.basename(os.environ["DDP_WHEEL_FILE"]).split("-")[1]
    for exe in ("ddp_profile", "ddp_viewer"):
        assert run([exe, "--version"]) == (0, "%s %s\n" % (exe, version))
    code, out = run(["ddp_viewer", "/no/such/run"])
    assert code != 0 and "/no/such/run" in out, out


def test_the_companion_imports_from_the_wheel_and_passes_through_without_ddp_profile():
    code, out = run(["python", "-c", "import ddp_profile, torch\n"
                     "m = torch.nn.Linear(2, 2)\n"
                     "dp = ddp_profile.attach(m, torch.optim.SGD(m.parameters(), lr=0.1))\n"
                     "print(ddp_profile.__file__, ddp_profile.__version__, type(dp).__name__)"])
    assert code == 0, out
    path, version, kind = out.split()
    assert path.startswith(site_packages()) and kind == "Passthrough", out
    assert os.path.basename(os.environ["DDP_WHEEL_FILE"]).startswith("ddp_profile-%s-" % version)


@pytest.fixture(scope="module")
def script():
    path = os.path.join(WORK, "train.py")
    shutil.copyfile(EXAMPLE, path)
    return path


def test_check_passes_a_correct_script_under_torchrun(script):
    code, out = run(["ddp_profile", "--check", "--out", "checked", "--resume-arg", "--resume {ckpt}", "--",
                     "torchrun", "--nproc-per-node", "2", script, "--epochs", "1", "--ckpt", "ckpt.pt"])
    assert code == 0, out
    with open(os.path.join(WORK, "checked", "checks.json")) as f:
        checks = json.load(f)["checks"]
    assert len(checks) >= 10, checks
    assert all(c["status"] == "pass" for c in checks), [c for c in checks if c["status"] != "pass"]


def test_check_finds_a_planted_mistake(script):
    code, out = run(["ddp_profile", "--check", "--checks", "data.shard_rule", "--out", "planted", "--",
                     "torchrun", "--nproc-per-node", "2", script, "--epochs", "2", "--plant", "no-set-epoch"])
    assert code == 1, out
    with open(os.path.join(WORK, "planted", "checks.json")) as f:
        (check,) = json.load(f)["checks"]
    assert check["id"] == "data.shard_rule" and check["status"] == "fail", check


@pytest.fixture(scope="module")
def recorded(script):
    code, out = run(["ddp_profile", "--record", "--out", "recorded", "--", "torchrun", "--nproc-per-node", "2",
                     script, "--epochs", "1"])
    assert code == 0, out
    return os.path.join(WORK, "recorded")


def test_record_writes_a_trace_per_rank_that_analyze_reads(recorded):
    for rank in (0, 1):
        assert os.path.getsize(os.path.join(recorded, "rank%d.ddpt" % rank)) > 0
    code, out = run(["ddp_profile", "--analyze", recorded, "--json"])
    assert code == 0, out
    analysis = json.loads(out)
    assert analysis["causes"], analysis


def png_pixels(path):
    """(width, height, distinct byte values of the decoded scanlines) of an 8-bit PNG."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return size[0], size[1], len(set(zlib.decompress(idat)))


def test_the_viewer_draws_the_run_under_xvfb(recorded):
    shot = os.path.join(WORK, "shot.png")
    code, out = run(["xvfb-run", "-a", "-s", "-screen 0 1280x800x24", "ddp_viewer", recorded, "--screenshot", shot,
                     "--frames", "3", "--width", "1200", "--height", "700"], timeout=120)
    assert code == 0, out
    width, height, values = png_pixels(shot)
    assert (width, height) == (1200, 700)
    assert values > 50, values  # lanes, text and colours, not a blank window
