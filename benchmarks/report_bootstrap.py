"""delta_report's task bootstrap against a plain Python bootstrap of the same statistic, in the same run.

    python benchmarks/report_bootstrap.py                    # 5,000 tasks x 4 rows, DELTA_BOOTSTRAP resamples
    python benchmarks/report_bootstrap.py --tasks 1000 --baseline-boot 100

Both sides compute the paired cluster bootstrap of the pooled pass rate before
and after (tasks resampled, never rows). The baseline draws each resample with
``random.choices`` and sums per task in Python; it runs ``--baseline-boot``
resamples and is scaled to the full count, since running it to the end would
take minutes. delta_report's figure includes everything it does (reading the
rows, grouping by task, intervals and the verdict).
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

from whileai.domain import defaults
from whileai.domain.report import delta_report


def make_rows(tasks: int, per_task: int, p: float, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"messages": [{"role": "user", "content": f"ask {t}"}], "task_id": f"t{t}", "passed": bool(rng.random() < p)}
            for t in range(tasks) for _ in range(per_task)]


def baseline(before: list[dict], after: list[dict], n_boot: int, seed: int) -> list[float]:
    def per_task(rows):
        out: dict[str, list[int]] = {}
        for r in rows:
            acc = out.setdefault(r["task_id"], [0, 0])
            acc[0] += r["passed"]
            acc[1] += 1
        return out

    b, a = per_task(before), per_task(after)
    keys = list(b)
    rnd = random.Random(seed)
    diffs = []
    for _ in range(n_boot):
        draw = rnd.choices(keys, k=len(keys))
        bp = sum(b[k][0] for k in draw) / sum(b[k][1] for k in draw)
        ap = sum(a[k][0] for k in draw) / sum(a[k][1] for k in draw)
        diffs.append(ap - bp)
    return diffs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--per-task", type=int, default=4)
    parser.add_argument("--baseline-boot", type=int, default=200, help="baseline resamples actually run (scaled up)")
    args = parser.parse_args()
    n_boot = defaults.DELTA_BOOTSTRAP
    before = make_rows(args.tasks, args.per_task, 0.40, seed=1)
    after = make_rows(args.tasks, args.per_task, 0.45, seed=2)

    start = time.perf_counter()
    report = delta_report(before, after)
    ours = time.perf_counter() - start

    start = time.perf_counter()
    baseline(before, after, args.baseline_boot, seed=0)
    theirs = (time.perf_counter() - start) * n_boot / args.baseline_boot

    print(f"tasks={args.tasks} rows/side={len(before)} resamples={n_boot}")
    print(f"delta_report (numpy, whole report): {ours:.3f} s  verdict={report['verdict']}")
    print(f"plain Python bootstrap (scaled from {args.baseline_boot}): {theirs:.3f} s")
    print(f"speed-up: {theirs / ours:.1f}x")


if __name__ == "__main__":
    main()
