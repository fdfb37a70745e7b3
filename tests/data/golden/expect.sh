#!/usr/bin/env bash
# Writes expected/: each command of commands.txt run on the recorded inputs by the given ddp_profile, its exit code,
# its stdout and the files it wrote under {out}, with the folder {out} stood for by the text "{out}". Run from a
# build whose answers are right (tests/integration/test_golden.cpp holds every later build to them):
#   bash tests/data/golden/expect.sh build/runtime/ddp_profile
set -euo pipefail
exe=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$here/expected"
mkdir -p "$here/expected"
cd "$here"
grep -v '^#' commands.txt | grep -v '^\s*$' | while IFS='|' read -r name args files; do
  name=$(echo "$name" | xargs)
  out=$(mktemp -d)
  args=${args//\{data\}/.}
  args=${args//\{out\}/$out}
  rc=0
  # shellcheck disable=SC2086
  "$exe" $args > "$here/expected/$name.stdout" 2> /dev/null || rc=$?
  echo "$rc" > "$here/expected/$name.rc"
  sed -i "s#$out#{out}#g" "$here/expected/$name.stdout"
  if [ -n "$(ls -A "$out")" ]; then
    if [ -n "$(echo "$files" | xargs)" ]; then
      for f in $files; do mkdir -p "$(dirname "$here/expected/$name/$f")"; cp "$out/$f" "$here/expected/$name/$f"; done
    else
      cp -r "$out" "$here/expected/$name"
    fi
    { grep -rlI "$out" "$here/expected/$name" || true; } | xargs -r sed -i "s#$out#{out}#g"
  fi
  rm -rf "$out"
  echo "$name: exit $rc"
done
