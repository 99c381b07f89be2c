"""The lint and type gate: ruff over the tree, mypy over the package; CI fails on a new finding.

    python scripts/check.py            # what .ci/run runs
    python scripts/check.py --update   # rewrite the type baseline after fixing findings (never to hide new ones)

ruff must be clean (its rules are in pyproject.toml). mypy runs with the configuration in
pyproject.toml: the strict layer (whileai/core with the run spec, whileai/jobs, and
whileai/runner with the spec schema) must be clean; elsewhere each finding is compared with
``scripts/mypy-baseline.txt``, the findings the code had when the gate was introduced, matched
by file, message and code (not line number, so edits above a finding do not move it). A finding not in the baseline fails the gate; a baseline
entry that no longer occurs is reported so the baseline can shrink.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "mypy-baseline.txt"
#: Strict packages: no baseline entry may name a file under these.
STRICT = ("whileai/core/", "whileai/jobs/", "whileai/runner/")
_FINDING = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*)$")


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)


def ruff() -> bool:
    done = _run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "whileai", "tests", "benchmarks", "scripts"])
    print(done.stdout.strip() or "ruff: clean", flush=True)
    return done.returncode == 0


def mypy_findings() -> tuple[list[str], str]:
    done = _run([sys.executable, "-m", "mypy"])
    found = []
    for line in done.stdout.splitlines():
        m = _FINDING.match(line)
        if m:
            found.append(f"{m['path']}: {m['message']}")
    return found, done.stdout


def typecheck(update: bool) -> bool:
    found, raw = mypy_findings()
    if update:
        if any(f.startswith(STRICT) for f in found):
            print(raw)
            print("the strict layer has findings; fix them, they cannot go into the baseline", file=sys.stderr)
            return False
        BASELINE.write_text("".join(f"{f}\n" for f in sorted(found)), encoding="utf-8")
        print(f"mypy baseline rewritten: {len(found)} findings")
        return True
    baseline = collections.Counter(BASELINE.read_text(encoding="utf-8").splitlines()) if BASELINE.exists() else collections.Counter()
    seen = collections.Counter(found)
    new = seen - baseline
    gone = baseline - seen
    strict = [f for f in found if f.startswith(STRICT)]
    if gone:
        print(f"mypy: {sum(gone.values())} baseline finding(s) no longer occur; run scripts/check.py --update to shrink it")
    if new or strict:
        print("mypy: new findings (fix them; the baseline only holds what predates the gate):", file=sys.stderr)
        for f in sorted(set(new) | set(strict)):
            print(f"  {f}", file=sys.stderr)
        return False
    print(f"mypy: no new findings ({sum(seen.values())} known, {len(strict)} in the strict layer: {', '.join(STRICT)})")
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    update = "--update" in args
    ok_lint = ruff()
    ok_types = typecheck(update)
    return 0 if ok_lint and ok_types else 1


if __name__ == "__main__":
    sys.exit(main())
