#!/usr/bin/env bash
# The format gate: every C++ file of the checkout as .clang-format wants it (clang-format 14, Debian 12's; setup.sh
# installs it). Fails naming each file that differs and how to fix it. A test of the suite (tests/CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format > /dev/null; then
  echo "check_format.sh: clang-format not found (bash scripts/setup.sh installs it)"
  exit 1
fi
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.hpp' | grep -v '^tests/data/')
else
  mapfile -t files < <(find . -path ./tests/data -prune -o -path './build*' -prune -o \
                         \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.hpp' \) -print)
fi
[ ${#files[@]} -gt 0 ] || { echo "check_format.sh: no C++ files found"; exit 1; }
# One clang-format for all; its messages ("FILE:LINE:COL: error: code should be clang-formatted") name the files.
rc=0
out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1) || rc=$?
mapfile -t bad < <(printf '%s\n' "$out" | sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' |
                     sort -u)
if [ "$rc" != 0 ] && [ ${#bad[@]} -eq 0 ]; then
  printf '%s\n' "$out" | tail -5
  echo "check_format.sh: clang-format failed (exit $rc) without naming an unformatted file"
  exit 1
fi
if [ ${#bad[@]} -gt 0 ]; then
  printf 'unformatted: %s\n' "${bad[@]}"
  echo "check_format.sh: ${#bad[@]} of ${#files[@]} C++ file(s) differ from .clang-format: clang-format -i FILE..."
  exit 1
fi
echo "check_format.sh: ${#files[@]} C++ files formatted"
