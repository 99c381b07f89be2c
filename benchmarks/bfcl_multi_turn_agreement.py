"""whileai's episode judge against bfcl-eval's ``multi_turn_checker`` on the same trajectories, entry by entry.

    python benchmarks/bfcl_multi_turn_agreement.py                 # bfcl-eval's 800 entries (wheel installed)
    python benchmarks/bfcl_multi_turn_agreement.py --sample        # the committed sample (tests/data/bfcl/multi_turn)
    python benchmarks/bfcl_multi_turn_agreement.py --history       # also: BFCL's verdicts without fresh defaults
    python benchmarks/bfcl_multi_turn_agreement.py --write-sample  # rewrite the sample's trajectories file

Every entry of the four multi-turn categories gets the ground truth as a model would send it (keyword
arguments, in one step or split over several) and model-like trajectories made from it with one mistake
each (MISTAKES: a call dropped, a wrong argument value, calls reordered, an extra call, a turn left
without calls, a last turn missing, ...), drawn with BFCL_AGREEMENT_SEED. whileai judges each one with
``judge_multi_turn``; BFCL with ``multi_turn_checker`` on the calls as its function-calling handlers write
them (``name(k=repr(v),...)``, one list per step, empty steps dropped as its eval runner drops them),
and with its eval runner's rule that a trajectory with the wrong number of turns fails. Before each BFCL
check the backends' default arguments are put back as they were at import (a fresh process): BFCL's
TwitterAPI.post_tweet shares its default lists across entries, so without that its verdicts depend on
what ran before (``--history`` counts how many). Prints ``agreement A/N``, a table per mistake and
every disagreement. Target: at least 99.5% on at least 400 entries (the sample: all of them).
"""

from __future__ import annotations

import argparse
import collections
import copy
import inspect
import json
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from whileai.domain import defaults  # noqa: E402
from whileai.domain.rows.bfcl_multi_turn import MultiTurnEntry, read_multi_turn  # noqa: E402

Call = dict[str, Any]        # {"name": ..., "arguments": {...}}, as a model's tool call arrives
Turns = list[list[list[Call]]]  # turn -> step -> calls

MISTAKES = ("dropped call", "wrong value", "reordered", "extra call", "repeated call", "call a turn early",
            "empty turn", "missing last turn", "acted instead of asking", "unknown function", "class-qualified name",
            "argument as text", "extra argument", "missing argument", "two mistakes")


@dataclass(frozen=True)
class Case:
    """One trajectory of one entry: its kind and the calls of each turn, step by step."""

    entry: str
    kind: str
    turns: Turns

    def flat(self) -> list[list[Call]]:
        return [[c for step in turn for c in step] for turn in self.turns]


# ---------------------------------------------------------------------------
# Trajectories: the ground truth as a model sends it, and mistakes made from it
# ---------------------------------------------------------------------------


def reference(entry: MultiTurnEntry) -> list[list[Call]]:
    """The entry's answer as keyword calls (BFCL's answers sometimes pass an argument by position): the episode
    environment's own reading of it, ``whileai.domain.episodes.bfcl.gold_calls``."""
    from whileai.domain.episodes.bfcl import gold_calls

    return gold_calls(entry)


def _steps(turns: list[list[Call]], rng: random.Random | None) -> Turns:
    """Each turn's calls as one step, or (with ``rng``) split at random points into several."""
    out: Turns = []
    for calls in turns:
        if not calls:
            out.append([])
            continue
        cuts = sorted(i for i in range(1, len(calls)) if rng is not None and rng.random() < defaults.BFCL_AGREEMENT_STEP_SPLIT)
        bounds = [0, *cuts, len(calls)]
        out.append([calls[a:b] for a, b in zip(bounds, bounds[1:])])
    return out


def _wrong(value: Any, rng: random.Random) -> Any:
    """A plausible wrong value of the same kind: a slip of case or spelling, a number off, a list short."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([-1, 1, 10])
    if isinstance(value, float):
        return round(value * rng.choice([0.5, 1.1, 2.0]), 2) or 1.0
    if isinstance(value, str):
        variants = [v for v in (value.lower(), value.title(), value.replace("_", " "), value[:-1], value + "s")
                    if v != value]
        return rng.choice(variants) if variants else "x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    if isinstance(value, dict):
        return dict(list(value.items())[:-1]) if value else {"x": 1}
    return "None"


def _spots(turns: list[list[Call]], with_arguments: bool = False) -> list[tuple[int, int]]:
    return [(t, i) for t, calls in enumerate(turns) for i, c in enumerate(calls) if c["arguments"] or not with_arguments]


def _mutate(kind: str, turns: list[list[Call]], rng: random.Random) -> list[list[Call]] | None:
    """One mistake of ``kind`` made in a copy of ``turns``; None where the entry offers no place for it."""
    turns = copy.deepcopy(turns)
    spots = _spots(turns)
    if not spots:
        return None
    t, i = rng.choice(spots)
    call = turns[t][i]
    named = _spots(turns, with_arguments=True)
    if kind == "dropped call":
        del turns[t][i]
    elif kind in ("wrong value", "argument as text", "missing argument") and named:
        t, i = rng.choice(named)
        key = rng.choice(sorted(turns[t][i]["arguments"]))
        args = turns[t][i]["arguments"]
        if kind == "missing argument":
            del args[key]
        else:
            args[key] = _wrong(args[key], rng) if kind == "wrong value" else str(args[key])
    elif kind == "reordered":
        multi = [t for t, calls in enumerate(turns) if len(calls) > 1]
        if not multi:
            return None
        t = rng.choice(multi)
        a, b = rng.sample(range(len(turns[t])), 2)
        turns[t][a], turns[t][b] = turns[t][b], turns[t][a]
    elif kind == "extra call":
        other = rng.choice(spots)
        turns[t].insert(i, copy.deepcopy(turns[other[0]][other[1]]))
    elif kind == "repeated call":
        turns[t].insert(i + 1, copy.deepcopy(call))
    elif kind == "call a turn early":
        later = [(t, i) for t, i in spots if t > 0]
        if not later:
            return None
        t, i = rng.choice(later)
        turns[t - 1].append(turns[t].pop(i))
    elif kind == "empty turn":
        turns[t] = []
    elif kind == "missing last turn":
        turns = turns[:-1]
    elif kind == "acted instead of asking":
        asked = [t for t, calls in enumerate(turns) if not calls]
        if not asked:
            return None
        t = rng.choice(asked)
        turns[t] = [copy.deepcopy(c) for c in (turns[t + 1] if t + 1 < len(turns) else [call])]
    elif kind == "unknown function":
        call["name"] = rng.choice([f"{call['name']}_file", f"get_{call['name']}", call["name"].title()])
    elif kind == "class-qualified name":
        call["name"] = f"Backend.{call['name']}"
    elif kind == "extra argument":
        call["arguments"]["verbose"] = True
    else:
        return None
    return turns


def cases_of(entry: MultiTurnEntry, seed: int) -> list[Case]:
    """Every trajectory of ``entry``: the reference in one step and split into steps, and one per mistake."""
    rng = random.Random(f"{seed}:{entry.id}")
    truth = reference(entry)
    out = [Case(entry.id, "reference", _steps(truth, None)), Case(entry.id, "reference in steps", _steps(truth, rng))]
    for kind in MISTAKES:
        if kind == "two mistakes":
            first, second = rng.sample(MISTAKES[:-1], 2)
            once = _mutate(first, truth, rng)
            turns = _mutate(second, once, rng) if once else None
        else:
            turns = _mutate(kind, truth, rng)
        if turns is not None:
            out.append(Case(entry.id, kind, _steps(turns, rng)))
    return out


# ---------------------------------------------------------------------------
# The two judges
# ---------------------------------------------------------------------------


@dataclass
class BfclJudge:
    """BFCL's checker with its backends' default arguments put back before each check (a fresh process)."""

    checker: Any
    restore: bool = True
    _pristine: dict[Any, Any] = field(default_factory=dict)
    _count: int = 0

    def __post_init__(self) -> None:
        from whileai.domain.judges.bfcl_multi_turn import backend_classes

        for cls in backend_classes()[0].values():
            for _, function in inspect.getmembers(cls, predicate=inspect.isfunction):
                if function.__defaults__:
                    self._pristine[function] = copy.deepcopy(function.__defaults__)

    def __call__(self, entry: MultiTurnEntry, case: Case) -> tuple[bool, str | None]:
        from whileai.domain.judges.bfcl_multi_turn import ToolCall

        if len(case.turns) != len(entry.ground_truth):  # eval_runner: "force-terminated" before the checker
            return False, "multi_turn:force_terminated"
        decoded = [[[ToolCall.of(c).text() for c in step] for step in turn if step] for turn in case.turns]
        if self.restore:
            for function, values in self._pristine.items():
                function.__defaults__ = copy.deepcopy(values)
        self._count += 1
        name = f"whileai_agreement_{self._count}"
        test_entry = {"id": entry.id, "initial_config": entry.initial_config,
                      "involved_classes": list(entry.involved_classes)}
        try:
            result = self.checker.multi_turn_checker(decoded, entry.ground_truth, test_entry, entry.category, name)
        finally:  # the checker keeps each entry's instances as module globals named after the model
            utils = sys.modules[self.checker.__name__.rsplit(".", 1)[0] + ".multi_turn_utils"]
            for key in [k for k in vars(utils) if k.startswith(name + "_")]:
                del vars(utils)[key]
        return bool(result["valid"]), result.get("error_type")


def ours(entry: MultiTurnEntry, case: Case) -> tuple[bool, str | None]:
    from whileai.domain.judges.bfcl_multi_turn import judge_multi_turn

    verdict = judge_multi_turn(entry, case.flat())
    return verdict.passed, verdict.error_type


@dataclass
class Agreement:
    """The count of cases where the two verdicts agree, per kind, and every disagreement."""

    agree: int = 0
    total: int = 0
    table: dict[str, list[int]] = field(default_factory=lambda: collections.defaultdict(lambda: [0, 0, 0]))
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    error_types_differ: int = 0


def agreement(entries: Sequence[MultiTurnEntry], cases: Sequence[Case],
              theirs: Callable[[MultiTurnEntry, Case], tuple[bool, str | None]]) -> Agreement:
    """Both judges on every case; ``table[kind]`` is [agreeing, cases, cases BFCL passes]."""
    by_id = {e.id: e for e in entries}
    out = Agreement()
    for case in cases:
        entry = by_id[case.entry]
        mine, bfcl = ours(entry, case), theirs(entry, case)
        cell = out.table[case.kind]
        cell[0] += mine[0] == bfcl[0]
        cell[1] += 1
        cell[2] += bfcl[0]
        out.total += 1
        out.agree += mine[0] == bfcl[0]
        out.error_types_differ += mine[0] == bfcl[0] and mine[1] != bfcl[1]
        if mine[0] != bfcl[0]:
            out.disagreements.append({"entry": case.entry, "kind": case.kind, "ours": mine, "bfcl": bfcl,
                                      "turns": case.flat()})
    return out


# ---------------------------------------------------------------------------
# The committed sample and the command
# ---------------------------------------------------------------------------


def read_cases(path: Path) -> list[Case]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Case(r["entry"], r["kind"], r["turns"]) for r in rows]


def write_cases(path: Path, cases: Sequence[Case]) -> None:
    lines = [json.dumps({"entry": c.entry, "kind": c.kind, "turns": c.turns}, sort_keys=True) for c in cases]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def all_cases(entries: Sequence[MultiTurnEntry], seed: int) -> Iterator[Case]:
    for entry in entries:
        yield from cases_of(entry, seed)


def report(result: Agreement, entries: int, seconds: float, source: str) -> None:
    print(f"BFCL multi-turn: {entries} entries, {result.total} trajectories ({source}), {seconds:.1f}s")
    print(f"{'kind':26s} {'agree':>7s} {'cases':>6s} {'BFCL passes':>12s}")
    for kind, (agree, n, passes) in sorted(result.table.items()):
        print(f"{kind:26s} {agree:7d} {n:6d} {passes:12d}")
    share = result.agree / result.total if result.total else 0.0
    print(f"agreement {result.agree}/{result.total} ({share:.4%}); same verdict but another error type: "
          f"{result.error_types_differ}")
    for d in result.disagreements:
        print(f"DISAGREE {d['entry']} [{d['kind']}] ours={d['ours']} bfcl={d['bfcl']} turns={json.dumps(d['turns'])[:400]}")


def main() -> None:
    import _bfcl_checker as bfcl

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", action="store_true", help="the committed sample and its trajectories file")
    parser.add_argument("--history", action="store_true", help="count BFCL verdicts that change without fresh defaults")
    parser.add_argument("--write-sample", action="store_true", help="rewrite the sample's trajectories file")
    parser.add_argument("--seed", type=int, default=defaults.BFCL_AGREEMENT_SEED)
    args = parser.parse_args()
    checker = bfcl.load_checker()
    folder = bfcl.SAMPLE if args.sample or args.write_sample else bfcl.data_folder()
    entries = read_multi_turn(folder)
    if args.write_sample:
        write_cases(bfcl.TRAJECTORIES, list(all_cases(entries, args.seed)))
        print(f"wrote {bfcl.TRAJECTORIES}")
        return
    cases = read_cases(bfcl.TRAJECTORIES) if args.sample else list(all_cases(entries, args.seed))
    start = time.perf_counter()
    result = agreement(entries, cases, BfclJudge(checker))
    report(result, len(entries), time.perf_counter() - start, f"{folder}; checker from {bfcl.source()}")
    if args.history:
        by_id = {e.id: e for e in entries}
        fresh = [v for v, _ in (BfclJudge(checker)(by_id[c.entry], c) for c in cases)]
        carried_judge = BfclJudge(checker, restore=False)  # one process, entry after entry, as BFCL's runner goes
        carried = [v for v, _ in (carried_judge(by_id[c.entry], c) for c in cases)]
        flips = [c for c, a, b in zip(cases, fresh, carried) if a != b]
        print(f"BFCL's own verdict changes with what ran before (no fresh defaults): {len(flips)}/{len(cases)}")
        for c in flips[:20]:
            print(f"  {c.entry} [{c.kind}]")


if __name__ == "__main__":
    main()
