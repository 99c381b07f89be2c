"""The shape of a run's closing summary (``_closing.summary``), which the runs file and ``--json`` write as it is.

Here, apart from ``_closing``, because what a run gathers (``_facts.RunFacts``) keeps the summary once the last
stage settled, and ``_closing`` reads those facts. The keys are listed in the order the summary writes them.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from whileai.core.runnerrecord import QuickNote

from whileai.runner.expect import ExpectLine, Outcome

__all__ = ["Served", "HeldOutLine", "Cost", "ExpectSummary", "Endpoint", "ClosingSummary"]


class Served(TypedDict):
    """The adapter served at the end of a run (``pipeline._serve``): the served model's name, version and endpoint,
    and the start of its reply to one chat completion."""

    name: Any
    version: Any
    endpoint: Any
    chat: str


class HeldOutLine(TypedDict):
    """The summary's held-out figures, taken from the run's outcome (``expect.Outcome``)."""

    metric: Any  # pass_rate where the run named none
    before: Any
    after: Any
    previous_after: Any
    stats: Any
    by_group: Any
    reward_vs_exact: Any  # a reward other than the exact judge: its own before -> after beside the exact judge's


class Cost(TypedDict):
    """What the run cost in dollars (None where it is not priced) and what the figure rests on."""

    usd: Any
    basis: Any


class ExpectSummary(TypedDict):
    """The expect verdict as the summary shows it: whether it held, each line, and each failed line in words."""

    passed: bool
    lines: list[ExpectLine]
    failed: list[str]


class Endpoint(TypedDict):
    """Where the served adapter answers (``Served``'s endpoint under the summary's own names)."""

    url: Any
    model: Any
    version: Any
    reply: Any


class ClosingSummary(TypedDict):
    """A run's closing summary: how it ended and its runs and datasets always; the rest where the run got that far
    (an error, a quick run's note, the run's page and mirrors, its held-out figures and outcome, the expect verdict,
    the served endpoint)."""

    status: Any
    exit_code: int | None
    recipe: str | None
    sweep_id: str | None
    run: Any  # the last run's id, None where none started
    runs: list[dict[str, str | None]]  # ``_facts.RunFact.to_json`` of each run the spec started
    datasets: dict[str, str]
    error: NotRequired[str]
    quick: NotRequired[QuickNote]
    page: NotRequired[str]
    mirrors: NotRequired[dict[str, dict[str, Any]]]  # where each copy of the run went, as the run's summary says
    held_out: NotRequired[HeldOutLine]
    verdict: NotRequired[Any]
    alarms: NotRequired[list[Any]]
    cost: NotRequired[Cost]
    outcome: NotRequired[Outcome]
    expect: NotRequired[ExpectSummary]
    endpoint: NotRequired[Endpoint]
