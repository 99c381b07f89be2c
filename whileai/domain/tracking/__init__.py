"""Run tracking: the run handle, its buffered sender, the background flush, the spool and offline runs.

- ``_run``: :class:`TrainingRun`, the handle people hold (``log``, ``finish``, ``holdout``, ...).
- ``_tracker``: the per-run buffer and sender (retries, splits on refusal, counts).
- ``_flush``: the process-wide flush thread and exit hooks.
- ``_spool``: what could not be delivered, kept under the data root; ``python -m whileai sync``.
- ``_offline``: a run that names itself when the platform cannot be reached.

``whileai.simulations.training`` is the public home of these names; the rest of the SDK
imports them from here.
"""

from __future__ import annotations

from whileai.domain.tracking._offline import create_run
from whileai.domain.tracking._run import TrainingRun, holdout_fields
from whileai.domain.tracking._tracker import FINAL_STATUSES, jsonable, sync_main

__all__ = ["TrainingRun", "holdout_fields", "create_run", "FINAL_STATUSES", "jsonable", "sync_main"]
