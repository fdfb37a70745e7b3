#!/usr/bin/env python3
"""The size gate: no source file over 600 lines and no function over 150, tests included.

A file or a function past these marks has more than one job; split it by what it does (never by squeezing lines
together). C++ functions are found by universal-ctags (its `end` field: a TEST body and a lambda's enclosing function
count whole), Python's by the interpreter's own parser. A file a program writes (the word @generated in its first
lines, as python/ddp_profile/records_table.py has) is data, not code someone maintains: not measured. A test of the
suite (tests/CMakeLists.txt); fails naming every file and function over its mark.
"""

import ast
import json
import pathlib
import shutil
import subprocess
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 150
CPP_SUFFIXES = (".cpp", ".h", ".cu", ".cuh", ".hpp")


GENERATED_MARK = "@generated"


def is_generated(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return any(GENERATED_MARK in f.readline() for _ in range(3))


def tracked_sources(root):
    """The checkout's C++ and Python files, third-party inputs (tests/data/) left out."""
    if (root / ".git").exists():
        out = subprocess.run(["git", "ls-files"], cwd=root, check=True, capture_output=True, text=True).stdout
        names = out.splitlines()
    else:
        names = [str(p.relative_to(root)) for p in root.rglob("*")
                 if p.is_file() and not any(part.startswith(("build", ".")) for part in p.relative_to(root).parts)]
    keep = [n for n in names if n.endswith(CPP_SUFFIXES + (".py",)) and not n.startswith("tests/data/")]
    return [n for n in keep if (root / n).is_file() and not is_generated(root / n)]


def long_cpp_functions(root, files):
    if not files:
        return []
    ctags = shutil.which("ctags")
    if ctags is None:
        sys.exit("check_sizes.py: ctags not found (universal-ctags; bash scripts/setup.sh installs it)")
    cmd = [ctags, "--languages=C++", "--langmap=C++:+.cu.cuh", "--kinds-C++=f", "--fields=+ne",
           "--output-format=json", "-f", "-"] + files
    out = subprocess.run(cmd, cwd=root, check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        tag = json.loads(line)
        if "end" in tag:
            length = tag["end"] - tag["line"] + 1
            if length > MAX_FUNCTION_LINES:
                found.append((tag["path"], tag["line"], tag["name"], length))
    return found


def long_python_functions(root, files):
    found = []
    for name in files:
        tree = ast.parse((root / name).read_text(encoding="utf-8"), filename=name)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append((name, node.lineno, node.name, length))
    return found


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    files = tracked_sources(root)
    if not files:
        sys.exit("check_sizes.py: no source files found")
    big = []
    for name in files:
        with open(root / name, "rb") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_FILE_LINES:
            big.append((name, lines))
    cpp = [n for n in files if n.endswith(CPP_SUFFIXES)]
    python = [n for n in files if n.endswith(".py")]
    long = long_cpp_functions(root, cpp) + long_python_functions(root, python)
    for name, lines in sorted(big):
        print(f"{name}: {lines} lines (the mark is {MAX_FILE_LINES})")
    for path, line, func, length in sorted(long):
        print(f"{path}:{line}: {func} is {length} lines (the mark is {MAX_FUNCTION_LINES})")
    if big or long:
        print(f"check_sizes.py: {len(big)} file(s) and {len(long)} function(s) over the marks: split them by what "
              "they do")
        return 1
    print(f"check_sizes.py: {len(files)} files within {MAX_FILE_LINES} lines, functions within {MAX_FUNCTION_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
