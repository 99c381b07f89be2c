"""A run page's charts: grouped under headings, duplicates drawn once, once-logged values as a table.

``layout(cols)`` reads a run's decoded columns and answers

- ``sections``: ``[{"id", "title", "collapsed", "charts": [{"id", "title", "metrics", "also"}]}]`` in
  page order: training (loss, learning rate, grad norm, ...), rewards, policy (KL, entropy,
  clipping), completions, the HackMonitor's other series, system (CPU, memory, GPU), other.
  Rarely read sections start collapsed (CHART_SECTIONS_COLLAPSED).
- ``scalars``: ``{name: value}`` for what a trainer logs once at its end (``train_runtime``,
  ``train_samples_per_second``, ``total_flos``, ...) and any metric logged at one step only:
  a one-dot chart on an arbitrary axis says less than the number.
- ``aliases``: ``{dropped: kept}`` for a series that repeats another of its chart point for
  point (TRL logs one reward function's mean as both ``reward`` and ``rewards/<name>/mean``):
  drawn once, and the chart names both. Flat series (all zeros) are never folded together.

The HackMonitor's proxy and gold are drawn by the page's monitor section, not here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from whileai.platform import defaults
from whileai.platform.pages._shapes import ChartGroup, ChartLayout, ChartSection, LaidChart

__all__ = ["END_OF_RUN", "MONITOR", "layout"]

#: what a Transformers trainer logs once, when training ends (Trainer.train's metrics)
END_OF_RUN = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss")
#: drawn by the monitor section of the page
MONITOR = ("monitor/proxy", "monitor/gold")

Match = Callable[[str], bool]


def _is_loss(n: str) -> bool:
    return n in ("loss", "eval_loss", "train/loss", "eval/loss") or (n.endswith("_loss") and "/" not in n)


def _reward(n: str) -> bool:
    return (n == "reward" or n.startswith(("rewards/", "reward/"))) and not n.endswith("std")


def _reward_std(n: str) -> bool:
    return n.startswith("reward") and n.endswith("std")


#: (section id, section title, [(chart id, chart title, which metrics)]): first match wins, in this order
_SECTIONS: list[tuple[str, str, list[tuple[str, str, Match]]]] = [
    ("training", "Training", [
        ("loss", "Loss", _is_loss),
        ("lr", "Learning rate", lambda n: n in ("lr", "learning_rate") or n.endswith("/learning_rate")),
        ("grad_norm", "Grad norm", lambda n: n == "grad_norm" or n.endswith("/grad_norm")),
        ("accuracy", "Token accuracy", lambda n: n.endswith("token_accuracy")),
    ]),
    ("rewards", "Rewards", [
        ("reward", "Reward (mean)", _reward),
        ("reward_std", "Reward spread (std)", _reward_std),
        ("reward_zero_std", "Groups with no reward spread", lambda n: n.startswith("frac_reward_zero_std")),
    ]),
    ("policy", "Policy", [
        ("kl", "KL to the reference", lambda n: n == "kl" or (n.endswith("/kl") and not n.startswith("monitor/"))),
        ("entropy", "Entropy", lambda n: n == "entropy" or n.endswith("/entropy")),
        ("clip_ratio", "Clipped share of tokens", lambda n: n.startswith("clip_ratio")),
    ]),
    ("completions", "Completions", [
        ("lengths", "Completion lengths", lambda n: n.startswith("completions/") and "length" in n
         and "terminated" not in n),
        ("terminated_lengths", "Lengths of completions that ended", lambda n: n.startswith("completions/")
         and "terminated" in n),
        ("completions_clipped", "Completions cut at the length limit", lambda n: n.startswith("completions/")
         and "clipped" in n),
        ("completions_other", "Other completion series", lambda n: n.startswith("completions/")),
    ]),
    ("monitor", "HackMonitor series", [
        ("monitor_other", "", lambda n: n.startswith("monitor/")),
    ]),
    ("system", "System", [
        ("system_cpu", "CPU (% of one core)", lambda n: n.startswith("system/cpu")),
        ("system_rss", "Resident memory (MB)", lambda n: n.startswith("system/rss")),
        ("system_gpu_util", "GPU utilisation (%)", lambda n: n.startswith("system/gpu_util")),
        ("system_gpu_memory", "GPU memory (MB)", lambda n: n.startswith("system/gpu_mem")),
        ("system_other", "", lambda n: n.startswith("system/")),
    ]),
]
_OTHER = ("other", "Other series")


def _finite(cols: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    return cols.xy(name)


def _once(cols: Any, name: str) -> bool:
    """Logged once: the series holds one finite value."""
    return int(np.count_nonzero(np.isfinite(cols.values(name)))) == 1


def _last(cols: Any, name: str) -> float | None:
    y = cols.values(name)
    finite = y[np.isfinite(y)]
    return float(finite[-1]) if len(finite) else None


def _same_series(cols: Any, a: str, b: str) -> bool:
    xa, ya = _finite(cols, a)
    xb, yb = _finite(cols, b)
    varies = len(ya) > 1 and bool(np.ptp(ya) > 0)  # two flat lines (zeros) are a coincidence, not a repeat
    return varies and len(xa) == len(xb) and bool(np.array_equal(xa, xb)) and bool(
        np.allclose(ya, yb, rtol=1e-9, atol=0.0))


def _preference(name: str) -> tuple[int, str]:
    return (name.count("/"), name)  # the plainer name stays: "reward" over "rewards/first_action/mean"


def _dedupe(cols: Any, names: list[str]) -> tuple[list[str], dict[str, str]]:
    """The names with each repeated series kept once (the plainer name), and ``{dropped: kept}``."""
    kept: list[str] = []
    aliases: dict[str, str] = {}
    for name in sorted(names, key=_preference):
        twin = next((k for k in kept if _same_series(cols, k, name)), None)
        if twin is None:
            kept.append(name)
        else:
            aliases[name] = twin
    return [n for n in names if n in kept], aliases


def _loss_title(metrics: list[str]) -> str:
    train = [m for m in metrics if not m.startswith("eval")]
    evals = [m for m in metrics if m.startswith("eval")]
    if train and evals:
        return "Loss (train and eval)"
    return "Eval loss" if evals else "Loss (train)"


def layout(cols: Any) -> ChartLayout:
    """Sections of charts, the once-logged scalars and the aliases of the run whose columns are ``cols``."""
    names = sorted(cols.metrics)
    last = {n: _last(cols, n) for n in names if n in END_OF_RUN or _once(cols, n)}
    scalars = {n: v for n, v in last.items() if v is not None and n not in MONITOR}
    left = [n for n in names if n not in scalars and n not in MONITOR and len(_finite(cols, n)[0])]
    aliases: dict[str, str] = {}
    sections: list[ChartSection] = []
    for sid, stitle, charts in _SECTIONS + [(_OTHER[0], _OTHER[1], [])]:
        found: list[ChartGroup] = []
        for cid, ctitle, wanted in charts:
            picked = [n for n in left if wanted(n)]
            if not picked:
                continue
            left = [n for n in left if n not in picked]
            picked, repeats = _dedupe(cols, picked)  # a repeat is drawn once, on the chart of its twin
            aliases.update(repeats)
            if cid == "loss":
                picked.sort(key=lambda n: (n != "loss", n.startswith("eval"), n))
                ctitle = _loss_title(picked)
            if ctitle:
                found.append({"id": cid, "title": ctitle, "metrics": picked})
            else:  # one chart per series
                found += [{"id": "m:" + n, "title": n, "metrics": [n]} for n in picked]
        if sid == _OTHER[0]:
            found = [{"id": "m:" + n, "title": n, "metrics": [n]} for n in left]
        laid: list[LaidChart] = [{**chart, "also": {a: k for a, k in aliases.items() if k in chart["metrics"]}} for chart in found]
        if laid:
            sections.append({"id": sid, "title": stitle, "collapsed": sid in defaults.CHART_SECTIONS_COLLAPSED,
                             "charts": laid})
    return {"sections": sections, "scalars": scalars, "aliases": aliases}
