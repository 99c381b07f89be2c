"""The W&B mirror: one W&B run per whileai run, offline unless the user set W&B up to go online.

Its files go to the account's mirrors folder (W&B's ``dir``), as ``wandb/offline-run-<time>-<run id>`` (or
``run-<time>-<run id>`` online); ``wandb sync`` uploads an offline one.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import defaults
from ._offline import wandb_online

#: the W&B column that holds the whileai step: every metric is plotted against it (``define_metric``), so a
#: point logged at an earlier step than the last (a system metric) is kept, where W&B's own ``step=`` drops it
STEP_KEY = "whileai/step"

_STATUS_EXIT = {"done": 0, "stopped": 130, "failed": 1}


def online_chosen() -> bool:
    """Whether the user set W&B up themselves to go online: then W&B decides, else offline."""
    return wandb_online()


class WandbSink:
    name = "wandb"

    def __init__(self, run: Any):
        self.run = run
        folder = Path(run.dir).parent  # the run's folder (``wandb sync`` uploads an offline one)
        self.location = str(folder)
        self.where = str(folder) if run.offline else str(getattr(run, "url", None) or folder)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log({STEP_KEY: step, **metrics})

    def finish(self, status: str, final: Mapping[str, Any]) -> None:
        self.run.summary.update(dict(final))
        self.run.finish(exit_code=_STATUS_EXIT.get(status, 1))


def open_wandb(*, run_id: str, name: str, url: str, config: Mapping[str, Any], folder: Path) -> WandbSink:
    import wandb

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


def forget_wandb(folder: Path, run_ids: list[str]) -> None:
    """Delete the W&B run folders of ``run_ids`` (offline or online) in the account's folder."""
    runs = folder / "wandb"
    if not runs.is_dir():
        return
    for run_id in run_ids:
        name = glob.escape(run_id)
        for path in [*runs.glob(f"offline-run-*-{name}"), *runs.glob(f"run-*-{name}")]:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
    for link in runs.iterdir():  # W&B's links to the newest run and its logs, left pointing at nothing
        if link.is_symlink() and not link.exists():
            link.unlink(missing_ok=True)
