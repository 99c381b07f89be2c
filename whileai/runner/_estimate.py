"""How long a stage will take on this machine, from the stages this data root has already run.

Each stage that ends done leaves its times in the data root (``TIMINGS_FILE``, one JSON line a stage): how many
steps it trained in how many seconds, and how many held-out prompts it measured in the seconds that were not
training (loading the base, measuring before and after: the rate a prompt includes both). Before the next stage of the same method on the same
base and target, the runner multiplies the median rates of the latest few such stages by this stage's steps and
prompts, and says the result when it is over ``ESTIMATE_SAY_S``; while the stage runs, it says once if the stage
has taken ``ESTIMATE_OVER_FACTOR`` times that. Stages with the same knobs that set a step's size (batch,
generations, completion length, DPO's policy samples) are preferred; where there are none, stages of other
sizes are used and the line says the estimate is rougher.

Nothing here may interrupt a run: a timings file that cannot be read or written only means no estimate.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from whileai.runner import defaults

__all__ = ["Estimate", "estimate", "record", "say_over", "timings_path"]


class StepSize(TypedDict):
    """The knobs that change how long one step takes, beside the method, base and target, as a stage resolved them
    (None where its method has no such knob)."""

    batch_size: int | None
    gradient_accumulation: int | None
    generations: int | None
    max_completion_length: int | None
    policy_samples: int | None
    lora_rank: int | None
    processes: int | None


def timings_path() -> Path:
    from whileai.core.paths import data_root

    return data_root() / defaults.TIMINGS_FILE


class StageWhere(TypedDict):
    """What a stage's times are kept under: its method, base and target."""

    method: Any
    base_model: str
    target: str


class Timing(TypedDict):
    """One done stage's times, a line of the timings file: where it ran, its step-size knobs (:class:`StepSize`, None
    where unset), its steps and the seconds they and the rest of the job (held-out measures, loading) took, the held-out
    prompts its estimate counted, and when it was kept."""

    where: StageWhere
    size: StepSize
    steps: int
    train_s: float
    other_s: float
    prompts: int
    at: int


def _where(spec: Any) -> StageWhere:
    """What a stage's times are kept under: its method, base and target."""
    return {"method": getattr(spec, "method", None), "base_model": str(getattr(spec, "base_model", None)),
            "target": str(getattr(spec, "target", None) or "local")}


def _size(spec: Any) -> StepSize:
    return {"batch_size": getattr(spec, "batch_size", None),
            "gradient_accumulation": getattr(spec, "gradient_accumulation", None),
            "generations": getattr(spec, "generations", None),
            "max_completion_length": getattr(spec, "max_completion_length", None),
            "policy_samples": getattr(spec, "policy_samples", None), "lora_rank": getattr(spec, "lora_rank", None),
            "processes": getattr(spec, "processes", None)}


@dataclass(frozen=True)
class Estimate:
    """About ``seconds`` for a stage: ``steps`` at ``step_s`` each and ``prompts`` held-out prompts at ``prompt_s``
    each, from ``runs`` earlier stages (``same_size``: all with this stage's step-size knobs)."""

    seconds: float
    steps: int
    step_s: float
    prompts: int
    prompt_s: float
    runs: int
    same_size: bool

    def line(self, label: str) -> str:
        from whileai.runner._progress import _clock

        basis = (f"{self.runs} earlier stage{'s' if self.runs != 1 else ''} of this method on this base here"
                 + ("" if self.same_size else ", of other step sizes, so rougher"))
        return (f"- {label}: about {_clock(self.seconds)} on this machine ({self.step_s:.2f} s a step x {self.steps} "
                f"steps, {self.prompt_s:.2f} s a held-out prompt x {self.prompts}; from {basis})")


def _read() -> list[dict[str, Any]]:
    try:
        text = timings_path().read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash: the others still count
        if isinstance(item, dict) and isinstance(item.get("where"), dict):
            out.append(item)
    return out


def estimate(spec: Any, prompts: int) -> Estimate | None:
    """The estimate for a stage resolved to ``spec`` measuring ``prompts`` held-out prompts, or None where this
    data root has run no stage of its method on its base and target."""
    where, size = _where(spec), _size(spec)
    kept = [t for t in _read() if t["where"] == where]
    alike = [t for t in kept if t.get("size") == size]
    chosen = (alike or kept)[-defaults.ESTIMATE_RUNS:]
    if not chosen:
        return None
    step_s = statistics.median(float(t["train_s"]) / max(int(t["steps"]), 1) for t in chosen)
    prompt_s = statistics.median(float(t["other_s"]) / max(int(t["prompts"]), 1) for t in chosen)
    steps = int(getattr(spec, "steps", 0) or 0)
    return Estimate(steps * step_s + max(prompts, 1) * prompt_s, steps, step_s, prompts, prompt_s, len(chosen),
                    bool(alike))


def record(spec: Any, training: Mapping[str, Any], prompts: int) -> None:
    """Keep a done stage's times (its run's ``training`` summary) for the next estimate, with the held-out
    ``prompts`` its estimate counted (so the rate and the next count are the same measure); best effort."""
    try:
        steps, total, train_s = int(training["steps"]), float(training["seconds"]), float(training["train_seconds"])
    except (KeyError, TypeError, ValueError):
        return
    if steps <= 0 or training.get("job_seconds") is not None:  # a resumed job's seconds span two processes
        return
    item: Timing = {"where": _where(spec), "size": _size(spec), "steps": steps, "train_s": round(train_s, 2),
            "other_s": round(max(total - train_s, 0.0), 2), "prompts": prompts, "at": round(time.time())}
    try:
        path = timings_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(item, sort_keys=True) + "\n")
    except OSError:
        pass


def say_over(label: str, expected: Estimate | None, began: float, said: bool) -> str | None:
    """The line to say once a stage has run ``ESTIMATE_OVER_FACTOR`` times its estimate (None otherwise)."""
    from whileai.runner._progress import _clock

    if expected is None or said:
        return None
    spent = time.monotonic() - began
    if spent < defaults.ESTIMATE_OVER_FACTOR * max(expected.seconds, defaults.ESTIMATE_SAY_S):
        return None
    return (f"  {label}: {_clock(spent)} so far, over {defaults.ESTIMATE_OVER_FACTOR:g}x the {_clock(expected.seconds)} "
            "estimated; this machine may be busier than when the estimate's stages ran (the step count above shows "
            "where it is)")
