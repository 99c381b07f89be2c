"""The held-out measurement of a job's policy: one typed object from a method's ``evaluate`` to the run's summary.

Every method's ``evaluate`` (``whileai.jobs.sft``, ``grpo``, ``dpo``, ``rm``) answers a :class:`HeldOutMeasure`:
its ``metric`` and ``value``, what it counted, and where there are prompts (or pairs, or episodes) each one's
outcome in a fixed order, so before and after pair prompt by prompt. ``whileai.jobs.body`` reads its fields into
the run's ``training`` summary; the object becomes JSON only where it is kept on disk (the resume's
``before.json``, the adapter folder's ``held_out.json``: :meth:`HeldOutMeasure.to_json` and
:meth:`HeldOutMeasure.from_json`), in the same shape the measurement has always had there.

The class is a pydantic dataclass: its fields' types are checked once, by pydantic, wherever a measure is made, by a
method's ``evaluate`` or read back from JSON (each field says in its description what it accepts, the words a refusal
of a kept file uses).

    >>> measure = HeldOutMeasure(metric="pass_rate", value=0.5, prompts=2, outcomes=(1, 0), prompt_digest="3f2a")
    >>> measure.to_json()
    {'metric': 'pass_rate', 'value': 0.5, 'prompts': 2, 'outcomes': [1, 0], 'prompt_digest': '3f2a'}
    >>> HeldOutMeasure.from_json(measure.to_json()) == measure
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, Field, ValidationError, field_validator
from pydantic.dataclasses import dataclass

if TYPE_CHECKING:
    from whileai.domain.episodes.record import EpisodeRecord
    from whileai.domain.judges.judging import NearMissSummary
else:  # read as what each is in JSON, an object (its keys are the episode loop's, the near-miss pairs'), without
    # importing the loop or the judges
    EpisodeRecord = dict[str, Any]
    NearMissSummary = dict[str, Any]

__all__ = ["HeldOutMeasure", "METRICS", "GroupValue"]

#: What a held-out measure can report: the first-action pass rate, the held-out loss (sft's ``metric="loss"``),
#: the held-out episodes' pass rate (a run in an environment), and a reward model's held-out pair accuracy (or its
#: row accuracy at the best cut where the held-out rows make no pair).
METRICS = ("pass_rate", "loss", "episode_pass_rate", "pair_accuracy", "row_accuracy")

#: One prompt's group: its row's value of HOLDOUT_GROUP_FIELD (a BFCL row's category), None where it has none.
GroupValue = str | int | float | bool | None

# The fields' types, each with what it accepts in JSON (null is accepted for every field but ``metric``: the field
# is absent). Strict: a number is never read from a string, nor a whole number from a bool.
_Whole = Annotated[int | None, Field(description="a whole number")]
_Number = Annotated[float | None, Field(description="a number")]
_Text = Annotated[str | None, Field(description="a string")]
_STRICT = ConfigDict(strict=True, extra="forbid")


@dataclass(frozen=True, config=_STRICT)
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

    Raises pydantic's ``ValidationError`` (a ValueError) naming each field of the wrong type, and a ``metric``
    outside METRICS.
    """

    metric: Annotated[str, Field(description=f"one of {', '.join(METRICS)}")]
    value: Annotated[float | None, Field(description="a number or null")]
    prompts: _Whole = None
    rows: _Whole = None
    outcomes: Annotated[tuple[int, ...] | None, Field(description="a list of 0s and 1s")] = None
    prompt_digest: _Text = None
    groups: Annotated[tuple[GroupValue, ...] | None, Field(description="a list of JSON scalars")] = None
    why: _Text = None
    gold_over_cap: _Whole = None
    proxy_scores: Annotated[tuple[float, ...] | None, Field(description="a list of numbers")] = None
    stopped: Annotated[dict[str, int] | None, Field(description="an object of whole numbers")] = None
    mean_rounds: _Number = None
    records: Annotated[tuple[EpisodeRecord, ...] | None,
                       Field(description="a list of episode records (objects)")] = None
    threshold: _Number = None
    row_accuracy: _Number = None
    reward_span: _Text = None
    near_misses: Annotated[NearMissSummary | None, Field(description="an object")] = None
    by_failure: Annotated[dict[str, dict[str, int]] | None,
                          Field(description='an object of {"right", "pairs"} counts')] = None
    read_back_from: Annotated[str | None, Field(description="a run id")] = None

    @field_validator("metric")
    @classmethod
    def _held_out_metric(cls, metric: str) -> str:
        if metric not in METRICS:
            raise ValueError(f"metric={metric!r} is no held-out metric; accepted: {', '.join(METRICS)}: "
                             "measure with one of the job bodies' evaluate functions")
        return metric

    def to_json(self) -> dict[str, Any]:
        """The measure as JSON: ``metric`` and ``value`` always, every other field where it is not None."""
        return {field.name: _to_json(getattr(self, field.name)) for field in fields(self)
                if field.name == "value" or getattr(self, field.name) is not None}

    @classmethod
    def from_json(cls, data: Any) -> HeldOutMeasure:
        """The measure :meth:`to_json` wrote (or a job wrote before the measure was typed: the same fields).

        Raises ValueError naming every field that is unknown, missing or of the wrong type, and what it accepts.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a held-out measure is a JSON object with {', '.join(_FIELDS)}; "
                             f"got {type(data).__name__}")
        try:
            return cls(**{str(name): _from_json(held) for name, held in data.items()})
        except ValidationError as refused:
            raise ValueError("not a held-out measure: " + "; ".join(_problems(refused, data))
                             + "; measure the held-out set again") from None


#: The fields in their order, as a refusal lists them.
_FIELDS = tuple(field.name for field in fields(HeldOutMeasure))


def _accepts(name: str) -> str:
    """What field ``name`` accepts in JSON, in the words of its description."""
    described = HeldOutMeasure.__pydantic_fields__  # type: ignore[attr-defined]  # set by pydantic; mypy sees a dataclass
    return str(described[name].description)


def _problems(refused: ValidationError, data: Mapping[str, Any]) -> list[str]:
    """Pydantic's refusal of ``data`` as one problem a field: the unknown fields, the wrong ones, the missing ones."""
    unknown, wrong, missing = [], [], []
    for error in refused.errors():
        name = str(error["loc"][0])
        if error["type"] == "unexpected_keyword_argument":
            unknown.append(f"{name!r} is no field of a held-out measure (accepted: {', '.join(_FIELDS)})")
        elif error["type"] in ("missing", "missing_argument"):
            missing.append(f"{name} is missing ({_accepts(name)})")
        elif (problem := f"{name}={data.get(name)!r} is not {_accepts(name)}") not in wrong:
            wrong.append(problem)
    return unknown + wrong + missing


def _to_json(held: Any) -> Any:
    """A field's JSON: a tuple as a list (an episode record copied), anything else as it is."""
    return [dict(item) if isinstance(item, Mapping) else item for item in held] if isinstance(held, tuple) else held


def _from_json(held: Any) -> Any:
    """A field from its JSON: a list as a tuple, an object copied, anything else as it is."""
    return tuple(held) if isinstance(held, list) else dict(held) if isinstance(held, dict) else held
