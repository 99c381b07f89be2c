"""The held-out measurement of a job's policy: one typed object from a method's ``evaluate`` to the run's summary.

Every method's ``evaluate`` (``whileai.jobs.sft``, ``grpo``, ``dpo``, ``rm``) answers a :class:`HeldOutMeasure`:
its ``metric`` and ``value``, what it counted, and where there are prompts (or pairs, or episodes) each one's
outcome in a fixed order, so before and after pair prompt by prompt. ``whileai.jobs.body`` reads its fields into
the run's ``training`` summary; the object becomes JSON only where it is kept on disk (the resume's
``before.json``, the adapter folder's ``held_out.json``: :meth:`HeldOutMeasure.to_json` and
:meth:`HeldOutMeasure.from_json`), in the same shape the measurement has always had there.

    >>> measure = HeldOutMeasure(metric="pass_rate", value=0.5, prompts=2, outcomes=(1, 0), prompt_digest="3f2a")
    >>> measure.to_json()
    {'metric': 'pass_rate', 'value': 0.5, 'prompts': 2, 'outcomes': [1, 0], 'prompt_digest': '3f2a'}
    >>> HeldOutMeasure.from_json(measure.to_json()) == measure
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from whileai.domain.episodes.record import EpisodeRecord

__all__ = ["HeldOutMeasure", "METRICS", "GroupValue"]

#: What a held-out measure can report: the first-action pass rate, the held-out loss (sft's ``metric="loss"``),
#: the held-out episodes' pass rate (a run in an environment), and a reward model's held-out pair accuracy (or its
#: row accuracy at the best cut where the held-out rows make no pair).
METRICS = ("pass_rate", "loss", "episode_pass_rate", "pair_accuracy", "row_accuracy")

#: One prompt's group: its row's value of HOLDOUT_GROUP_FIELD (a BFCL row's category), None where it has none.
GroupValue = str | int | float | bool | None


@dataclass(frozen=True)
class HeldOutMeasure:
    """One held-out measurement of a policy (or a reward model), before or after training.

    Always: ``metric`` (one of METRICS) and ``value`` (None when nothing could be measured; ``why`` says so).
    The rest is present where the measure has it (None otherwise, and left out of its JSON):

    - ``prompts``: the distinct prompts (episodes, pairs) measured; ``rows``: the rows read (held-out loss, rm).
    - ``outcomes``: each prompt's pass (1) or fail (0) in prompt order; ``prompt_digest``: which prompts, in which
      order (two runs pair only when their digests are equal); ``groups``: each prompt's group, in the same order.
    - first-action pass rate: ``gold_over_cap``, the prompts whose gold reply is longer than the reply cap;
      ``proxy_scores``, the paid reward on the same greedy replies where it is not the exact judge (grpo).
    - episodes: ``stopped`` (how many ended answered, how many at the turn cap), ``mean_rounds``, and ``records``,
      each episode's verdict and conversation for the run's page.
    - reward model: ``threshold`` and ``row_accuracy`` (the cut that best separates the held-out rows, and its
      accuracy), ``reward_span``, ``near_misses`` (the near-miss pairs' summary), ``by_failure`` (pairs right per
      failure kind or near-miss rule: ``{"right", "pairs"}``).
    - ``read_back_from``: the start run whose kept "after" this "before" was read back from (not measured again).
    """

    metric: str
    value: float | None
    prompts: int | None = None
    rows: int | None = None
    outcomes: tuple[int, ...] | None = None
    prompt_digest: str | None = None
    groups: tuple[GroupValue, ...] | None = None
    why: str | None = None
    gold_over_cap: int | None = None
    proxy_scores: tuple[float, ...] | None = None
    stopped: dict[str, int] | None = None
    mean_rounds: float | None = None
    records: tuple[EpisodeRecord, ...] | None = None
    threshold: float | None = None
    row_accuracy: float | None = None
    reward_span: str | None = None
    near_misses: dict[str, Any] | None = None
    by_failure: dict[str, dict[str, int]] | None = None
    read_back_from: str | None = None

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric={self.metric!r} is no held-out metric; accepted: {', '.join(METRICS)}: "
                             "measure with one of the job bodies' evaluate functions")

    def to_json(self) -> dict[str, Any]:
        """The measure as JSON: ``metric`` and ``value`` always, every other field where it is not None."""
        return {field.name: _to_json(getattr(self, field.name)) for field in fields(self)
                if field.name == "value" or getattr(self, field.name) is not None}

    @classmethod
    def from_json(cls, data: Any) -> HeldOutMeasure:
        """The measure :meth:`to_json` wrote (or a job wrote before the measure was typed: the same fields).

        Raises ValueError naming every field that is unknown or of the wrong type, and what it accepts.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a held-out measure is a JSON object with {', '.join(_READ)}; got {type(data).__name__}")
        problems = [f"{name!r} is no field of a held-out measure (accepted: {', '.join(_READ)})"
                    for name in data if name not in _READ]
        problems += [f"{name}={data[name]!r} is not {_READ[name][1]}" for name in _READ
                     if data.get(name) is not None and not _READ[name][0](data[name])]
        problems += [f"{name} is missing ({_READ[name][1]})" for name in ("metric", "value") if name not in data]
        if problems:
            raise ValueError("not a held-out measure: " + "; ".join(problems) + "; measure the held-out set again")
        return cls(**{name: _from_json(held) for name, held in data.items()})


def _to_json(held: Any) -> Any:
    """A field's JSON: a tuple as a list (an episode record copied), anything else as it is."""
    return [dict(item) if isinstance(item, Mapping) else item for item in held] if isinstance(held, tuple) else held


def _from_json(held: Any) -> Any:
    """A field from its JSON: a list as a tuple, an object copied, anything else as it is."""
    return tuple(held) if isinstance(held, list) else dict(held) if isinstance(held, dict) else held


def _number(held: Any) -> bool:
    return isinstance(held, int | float) and not isinstance(held, bool)


def _whole(held: Any) -> bool:
    return isinstance(held, int) and not isinstance(held, bool)


def _text(held: Any) -> bool:
    return isinstance(held, str)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda held: isinstance(held, list) and all(check(item) for item in held)


def _object_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda held: isinstance(held, dict) and all(isinstance(k, str) and check(v) for k, v in held.items())


def _group(held: Any) -> bool:
    return held is None or isinstance(held, str | int | float | bool)


#: Each field's JSON check and what it accepts (null is accepted for every field: the field is absent).
_READ: dict[str, tuple[Callable[[Any], bool], str]] = {
    "metric": (lambda held: held in METRICS, f"one of {', '.join(METRICS)}"),
    "value": (_number, "a number or null"),
    "prompts": (_whole, "a whole number"),
    "rows": (_whole, "a whole number"),
    "outcomes": (_list_of(_whole), "a list of 0s and 1s"),
    "prompt_digest": (_text, "a string"),
    "groups": (_list_of(_group), "a list of JSON scalars"),
    "why": (_text, "a string"),
    "gold_over_cap": (_whole, "a whole number"),
    "proxy_scores": (_list_of(_number), "a list of numbers"),
    "stopped": (_object_of(_whole), "an object of whole numbers"),
    "mean_rounds": (_number, "a number"),
    "records": (_list_of(_object_of(lambda _: True)), "a list of episode records (objects)"),
    "threshold": (_number, "a number"),
    "row_accuracy": (_number, "a number"),
    "reward_span": (_text, "a string"),
    "near_misses": (_object_of(lambda _: True), "an object"),
    "by_failure": (_object_of(_object_of(_whole)), 'an object of {"right", "pairs"} counts'),
    "read_back_from": (_text, "a run id"),
}
