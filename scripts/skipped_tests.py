"""Names every test a ctest run skipped and why, from ctest's log (gtest's GTEST_SKIP messages), for scripts/test.sh.

    python3 scripts/skipped_tests.py build/Testing/Temporary/LastTest.log
"""
import re
import sys
from typing import List, Tuple


def skipped(log: str) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    why: List[str] = []
    in_message = False
    for line in log.splitlines():
        m = re.match(r"\[  SKIPPED \] (\S+)", line)
        if m:
            out.append((m.group(1), " ".join(w for w in why if w) or "no reason given"))
            why, in_message = [], False
        elif re.search(r":\d+: Skipped$", line):
            why, in_message = [], True
        elif in_message:
            why.append(line.strip())
    return out


def main() -> int:
    try:
        with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
            found = skipped(f.read())
    except OSError as e:
        print("test.sh: cannot read the test log to list skipped tests: %s" % e)
        return 0
    seen = set()
    unique = [(n, w) for n, w in found if not (n in seen or seen.add(n))]
    if not unique:
        print("test.sh: no test skipped")
    else:
        print("test.sh: %d test(s) SKIPPED:" % len(unique))
        for name, why in unique:
            print("  %s: %s" % (name, why))
    return 0


if __name__ == "__main__":
    sys.exit(main())
