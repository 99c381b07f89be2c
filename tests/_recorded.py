"""Values recorded from the code as it is, and checked against it: the two monitor value tests share this.

A test module keeps ``CASES`` (name -> a call giving plain values) and a file of their recorded answers;
``python tests/<module>.py --record`` writes the file again after a change that should move the answers.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


#: How near a recomputed float must come to its recorded value. The monitor's scan sums in float32 matrix products
#: (numpy's BLAS), whose rounding follows the CPU's vector instructions: answers recorded on an AVX-512 machine came
#: back on an AVX2 one up to 8e-7 apart relatively (the max-t null's first draw, -0.06052210 against -0.06052215), so
#: equality to 1e-9 failed 21 cases on a machine that computes correctly. A mutant moves an answer by far more.
FLOAT_REL = 1e-5
FLOAT_ABS = 1e-9


def same(got: Any, want: Any, where: str = "", *, strict_types: bool) -> None:
    """``got`` equals the recorded ``want``: dicts by key, lists by item, floats to FLOAT_REL (NaN equals NaN).

    ``strict_types``: a recorded float must come back a float (not an int) and every other value with its own type.
    """
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (where, got)
        for key in want:
            same(got[key], want[key], f"{where}.{key}", strict_types=strict_types)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (where, got)
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}[{i}]", strict_types=strict_types)
    elif isinstance(want, float) and not isinstance(got, bool):
        assert isinstance(got, float if strict_types else float | int), (where, got)
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=FLOAT_REL, abs=FLOAT_ABS), (where, got, want)
    else:
        assert got == want and (not strict_types or type(got) is type(want)), (where, got, want)


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def record_main(argv: list[str], path: Path, cases: dict[str, Callable[[], Any]], plain: Callable[[Any], Any]) -> int:
    """``--record``: write ``path`` from the code as it is (after a change that should move the answers)."""
    if argv != ["--record"]:
        print(f"usage: python {sys.argv[0]} --record", file=sys.stderr)
        return 2
    path.write_text(json.dumps({name: plain(call()) for name, call in cases.items()}, indent=1, sort_keys=True) + "\n",
                    encoding="utf-8")
    return 0
