"""Every repository path named in the docs and in the source's comments exists: a file moved without its mentions
updated is a broken map for the next reader. Paths are taken as written from the repository root (runtime/...,
traces/..., docs/..., ...); `bench/<name>` may name a benchmark binary built from bench/<name>.cpp; patterns with
<, {, * are templates, not paths."""
import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PATH = re.compile(r"(?<![\w/.-])((?:runtime|traces|profiler|viewer|tests|python|docs|bench|scripts|examples|\.ci)/"
                  r"[\w/.\-<>{}*]*[\w*])")
# Words that look like paths and are not: CUDA's "runtime/driver" API, the GPU traces a device run brings back.
NOT_PATHS = {"runtime/driver", "tests/data/kineto/pytorch-2.11-gpu"}
COMMENT = {".h": "//", ".cpp": "//", ".cu": "//", ".def": "//", ".sh": "#", ".txt": "#"}


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.split() if not f.startswith("tests/data/")]


def mentions(path):
    """(line number, mentioned path) in a doc, a Python file, or the comments of a C++/CMake/shell file."""
    ext = os.path.splitext(path)[1]
    if ext not in COMMENT and ext not in (".md", ".py"):
        return
    with open(os.path.join(ROOT, path), errors="replace") as f:
        for n, line in enumerate(f, 1):
            text = line
            if ext in COMMENT:
                i = line.find(COMMENT[ext])
                if i < 0:
                    continue
                text = line[i:]
            for m in PATH.finditer(text):
                yield n, m.group(1).rstrip(".")


def exists(p):
    if any(c in p for c in "<>{}*") or p in NOT_PATHS:
        return True
    if os.path.exists(os.path.join(ROOT, p)):
        return True
    return p.startswith("bench/") and os.path.exists(os.path.join(ROOT, p + ".cpp"))


def test_every_repo_path_named_in_docs_and_comments_exists():
    if not os.path.isdir(os.path.join(ROOT, ".git")):
        import pytest

        pytest.skip("not a git checkout")
    missing = ["%s:%d: %s" % (f, n, p) for f in tracked_files() for n, p in mentions(f) if not exists(p)]
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)
