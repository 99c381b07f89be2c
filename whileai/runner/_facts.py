"""What a run of the runner gathers on its way, for its runs file and its closing summary.

``pipeline.run_spec`` and ``resume`` fill a :class:`RunFacts` step by step (the runs started, the datasets
pushed, how it ended); ``_closing.summary`` reads it and ``pipeline._write_runs`` writes its runs. Both turn it
into plain JSON there, at the edge, through :meth:`RunFact.to_json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from whileai.domain.tracking import TrainingRun

    from whileai.runner._summary import ClosingSummary

__all__ = ["RunFact", "RunFacts"]


@dataclass
class RunFact:
    """One run the spec started: its id, the stage it trains, that stage's method, and the run's name."""

    id: str
    stage: str | None
    method: str | None
    name: str | None

    def to_json(self) -> dict[str, str | None]:
        """The run as the runs file and the closing summary list it: ``{"id", "stage", "method", "name"}``."""
        return asdict(self)


@dataclass
class RunFacts:
    """What the runner knows of a run so far: where the spec came from, the runs and datasets it made, and how
    it ended (``status``, ``error``, ``exit_code``); ``closing`` is the summary once the last stage settled."""

    recipe: str | None = None
    sweep_id: str | None = None
    runs: list[RunFact] = field(default_factory=list)
    #: what each dataset is to the run ("pushed", "train", "holdout", "STAGE:METHOD") -> its id
    datasets: dict[str, str] = field(default_factory=dict)
    status: str | None = None
    #: the first line of why the run did not end done (a gate's refusal, the run's error, Ctrl-C)
    error: str | None = None
    exit_code: int | None = None
    #: the last run started, whose page and mirrors the closing summary names
    run: TrainingRun | None = None
    #: the closing summary, once the last stage's expect lines are settled (``_closing.summary``: JSON out)
    closing: ClosingSummary | None = None
