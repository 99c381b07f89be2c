"""What a submit sends: the resolved spec, and what only the submit knows, written beside it at the JSON edge.

A spec is validated once where it is made. ``wai.train`` resolves what it is given into the frozen spec of the
method (``resolve_spec``), and validates it there; given a spec that a resolution already made (the runner
resolves each stage once, before anything trains: a GRPO stage that starts from no other with its dataset's group
size and temperature, read from the run's own rows) and nothing beside it that a rule of the spec reads, it sends
that spec as it is (:func:`sent_as_is`). What only the submit knows, the held-out set it names and the runner's
record (``core.spec.BESIDE``), is no knob: each is checked by its own type (a dataset id, a RunnerRecord) and
written beside the spec by ``spec_json``, so the run's config and the job get the values a spec validated with
them would hold. A submit that fills in what a rule reads (the run it continues, a knob, a config key, another base
or target, the dataset's group size and temperature) resolves again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from whileai.core.runnerrecord import RunnerRecord
from whileai.core.spec import RunSpec, job_json, spec_json
from whileai.simulations._resolve import is_resolved

__all__ = ["Sent", "sent_as_is"]


@dataclass(frozen=True)
class Sent:
    """A submit's spec, and the held-out set and runner's record written beside it (None: the spec's own)."""

    spec: RunSpec
    holdout: str | None = None
    runner: RunnerRecord | None = None

    def config(self) -> dict[str, Any]:
        """The run's config: the spec's JSON with what is beside it."""
        return spec_json(self.spec, holdout=self.holdout, runner=self.runner)

    def job(self, run_id: str, dataset: str | None) -> dict[str, Any]:
        """The launch's body: the job's own copy, naming its run and dataset."""
        return job_json(self.spec, run_id, dataset, holdout=self.holdout, runner=self.runner)


def sent_as_is(spec: Any, settings: Mapping[str, Any], config: Mapping[str, Any] | None, *, holdout: str | None,
               base_model: str | None, target: str | None) -> Sent | None:
    """``spec`` sent as it is, with ``holdout`` and the ``runner`` setting beside it, when the submit changes
    nothing a rule of it reads: ``spec`` is resolved (:func:`is_resolved`), and beside it there is no other setting
    or config key, and no other base or target. None: the submit resolves it again.

    The caller sends none here for a run that continues another (its base and LoRA shape are filled in from it).
    """
    if not isinstance(spec, RunSpec) or config or not is_resolved(spec):
        return None
    if base_model != spec.base_model or target != spec.target:
        return None
    given = {name: value for name, value in settings.items() if value is not None}
    if set(given) - {"runner"}:
        return None
    try:
        runner = None if "runner" not in given else RunnerRecord.model_validate(given["runner"])
    except ValidationError:  # the resolution names the problem as it names any setting's
        return None
    return Sent(spec, holdout=holdout if holdout != spec.holdout else None, runner=runner)
