"""The W&B mirror: one W&B run per whileai run, offline unless the user set W&B up to go online."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from whileai.core.paths import data_root

from .. import defaults

#: the W&B column that holds the whileai step: every metric is plotted against it (``define_metric``), so a
#: point logged at an earlier step than the last (a system metric) is kept, where W&B's own ``step=`` drops it
STEP_KEY = "whileai/step"

_STATUS_EXIT = {"done": 0, "stopped": 130, "failed": 1}


def online_chosen() -> bool:
    """Whether the user set W&B up themselves (WANDB_MODE or WANDB_API_KEY): then W&B decides, else offline."""
    return bool(os.environ.get("WANDB_MODE") or os.environ.get("WANDB_API_KEY"))


class WandbSink:
    name = "wandb"

    def __init__(self, run: Any):
        self.run = run
        folder = Path(run.dir).parent  # the offline run folder (``wandb sync`` uploads it)
        self.where = str(folder) if run.offline else str(getattr(run, "url", None) or folder)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log({STEP_KEY: step, **metrics})

    def finish(self, status: str, final: Mapping[str, Any]) -> None:
        self.run.summary.update(dict(final))
        self.run.finish(exit_code=_STATUS_EXIT.get(status, 1))


def open_wandb(*, run_id: str, name: str, url: str, config: Mapping[str, Any]) -> WandbSink:
    import wandb

    folder = Path(os.environ.get("WANDB_DIR") or data_root() / "mirrors")
    folder.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=os.environ.get("WANDB_PROJECT") or defaults.MIRROR_PROJECT,
        id=run_id, name=name, config=dict(config), dir=str(folder), notes=f"whileai run {run_id}: {url}",
        mode=None if online_chosen() else "offline",
        reinit="create_new",  # a process may mirror several runs (one per job); each is its own W&B run
        settings=wandb.Settings(console="off", silent=True),
    )
    run.define_metric(STEP_KEY)
    run.define_metric("*", step_metric=STEP_KEY)
    return WandbSink(run)
