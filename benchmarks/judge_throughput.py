"""whileai's first-action judge against BFCL's own ast_checker on the same candidate replies, in one run.

    python benchmarks/judge_throughput.py            # bfcl-eval's full data when installed, else the test sample
    python benchmarks/judge_throughput.py --repeats 5

The replies are benchmarks/_bfcl_single_turn.py's candidates (every kind of the agreement test)
on benchmarks/_bfcl_single_turn.py's CATEGORIES converted by ``wai.datasets.from_bfcl``. Both
judges read the same generated text: whileai through ``judge_reply`` (the kit's
parser, then ``first_action_judge`` with the row's gold and tools); BFCL through
the same parser, then ``ast_checker`` with its own function docs and possible
answers (irrelevance: its no-call rule). Best of ``--repeats`` timings each.
Target: ratio (whileai replies/s over BFCL's) at least 1.0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    import _bfcl_single_turn as _bfcl

    from whileai.domain.judges.judging import judge_reply

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    checker = _bfcl.load_checker()
    no_call_rule = _bfcl.load_no_call_rule()
    cases = [(category, case) for category in _bfcl.CATEGORIES for case in _bfcl.cases(category)]

    def ours() -> list[bool]:
        return [bool(judge_reply(case["text"], case["row"])["passed"]) for _, case in cases]

    def theirs() -> list[bool]:
        return [_bfcl.bfcl_verdict(checker, case["entry"], case["answer"], category, case["text"], no_call_rule)
                for category, case in cases]

    def best(fn) -> tuple[float, list[bool]]:
        times, out = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - start)
        return min(times), out

    t_ours, v_ours = best(ours)
    t_theirs, v_theirs = best(theirs)
    n = len(cases)
    result = {
        "data": _bfcl.data_source(),
        "replies": n,
        "whileai_replies_per_s": round(n / t_ours, 1),
        "bfcl_replies_per_s": round(n / t_theirs, 1),
        "ratio": round(t_theirs / t_ours, 3),
        "agreement": round(sum(a == b for a, b in zip(v_ours, v_theirs)) / n, 5),
        "repeats": args.repeats,
        "target": "ratio >= 1.0",
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
