"""The W&B mirror: one W&B run per whileai run, offline unless the user set W&B up to go online.

Its files go to the account's mirrors folder (W&B's ``dir``), as ``wandb/offline-run-<time>-<run id>`` (or
``run-<time>-<run id>`` online); ``wandb sync`` uploads an offline one.

W&B also writes outside the run's folder: its service (wandb-core) keeps a debug log naming every run it served
(``core-debug-<time>.log`` in its cache folder, ``~/.cache/wandb/logs`` by default), and it has a data and a
config folder of its own. :func:`open_wandb` points all three (WANDB_CACHE_DIR, WANDB_DATA_DIR, WANDB_CONFIG_DIR;
the config folder only offline, where the user's W&B settings are not needed) at ``wandb-service/`` in the
account's folder before the service starts, and shuts the service down when the process's last W&B run ends, so
the next run starts one whose log is its own. :func:`forget_wandb` deletes, with a run's folder, every file there
that names the run.
"""

from __future__ import annotations

import glob
import os
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from whileai.domain import defaults
from whileai.domain.tracking.mirror._offline import wandb_online

#: the W&B column that holds the whileai step: every metric is plotted against it (``define_metric``), so a
#: point logged at an earlier step than the last (a system metric) is kept, where W&B's own ``step=`` drops it
STEP_KEY = "whileai/step"

_STATUS_EXIT = {"done": 0, "stopped": 130, "failed": 1}

#: the folder, in the account's folder, of W&B's own cache (its service's debug logs), data and config
SERVICE_FOLDER = "wandb-service"
#: W&B's variable for each of its own folders -> the folder under SERVICE_FOLDER
_SERVICE_ENV = {"WANDB_CACHE_DIR": "cache", "WANDB_DATA_DIR": "data", "WANDB_CONFIG_DIR": "config"}
#: how many W&B runs this process has open, and whether their service is the mirror's own (started for the
#: first of them, so pointed at the account's folder, and shut down when the last ends) or the user's
_OPEN = [0]
_OWN_SERVICE = [False]
_OPEN_LOCK = threading.Lock()


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
        try:
            self.run.summary.update(dict(final))
            self.run.finish(exit_code=_STATUS_EXIT.get(status, 1))
        finally:
            _closed()


def service_env(folder: Path) -> dict[str, str]:
    """W&B's own folders in the account's ``folder``: the variables :func:`open_wandb` sets before W&B starts."""
    names = [n for n in _SERVICE_ENV if n != "WANDB_CONFIG_DIR" or not online_chosen()]
    return {name: str(folder / SERVICE_FOLDER / _SERVICE_ENV[name]) for name in names}


def open_wandb(*, run_id: str, name: str, url: str, config: Mapping[str, Any], folder: Path) -> WandbSink:
    import wandb

    with _OPEN_LOCK:
        if _OPEN[0] == 0:
            _OWN_SERVICE[0] = not _service_running(wandb)
        if _OPEN[0] == 0 and _OWN_SERVICE[0]:  # the service about to start keeps its files in this account's
            for variable, path in service_env(folder).items():
                Path(path).mkdir(parents=True, exist_ok=True, mode=0o700)
                os.environ[variable] = path
        _OPEN[0] += 1
    try:
        return WandbSink(_init(wandb, run_id=run_id, name=name, url=url, config=config, folder=folder))
    except BaseException:
        _closed()
        raise


def _service_running(wandb: Any) -> bool:
    """Whether this process already set W&B up (the user's own runs, in a notebook): then its service is theirs,
    started with their folders, and is left running."""
    found = getattr(getattr(wandb, "sdk", None) and wandb.sdk.wandb_setup, "_singleton", None)
    return found is not None and getattr(found, "_pid", None) == os.getpid()


def _closed() -> None:
    """One W&B run of this process ended: with the last, the mirror's own service stops (its debug log closed)."""
    with _OPEN_LOCK:
        _OPEN[0] = max(0, _OPEN[0] - 1)
        if _OPEN[0] or not _OWN_SERVICE[0]:
            return
        import wandb

        try:
            wandb.teardown()
        except Exception:  # noqa: BLE001 - the run is finished; a service that does not stop ends with the process
            pass


def _init(wandb: Any, *, run_id: str, name: str, url: str, config: Mapping[str, Any], folder: Path) -> Any:
    run = wandb.init(
        project=os.environ.get("WANDB_PROJECT") or defaults.MIRROR_PROJECT,
        id=run_id, name=name, config=dict(config), dir=str(folder), notes=f"whileai run {run_id}: {url}",
        mode=None if online_chosen() else "offline",
        reinit="create_new",  # a process may mirror several runs (one per job); each is its own W&B run
        settings=wandb.Settings(console="off", silent=True),
    )
    run.define_metric(STEP_KEY)
    run.define_metric("*", step_metric=STEP_KEY)
    return run


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
    _forget_service_files(folder / SERVICE_FOLDER, run_ids)


def _forget_service_files(service: Path, run_ids: list[str]) -> None:
    """Delete each file of W&B's own folders that names one of ``run_ids`` (its service's debug logs)."""
    if not service.is_dir():
        return
    wanted = [r.encode("utf-8") for r in run_ids if r]
    for path in service.rglob("*"):
        if path.is_file() and not path.is_symlink() and _names(path, wanted):
            path.unlink(missing_ok=True)


def _names(path: Path, wanted: list[bytes]) -> bool:
    """Whether the file at ``path`` holds any of ``wanted``, read a block at a time."""
    keep = max(map(len, wanted), default=1) - 1
    tail = b""
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            text = tail + block
            if any(w in text for w in wanted):
                return True
            tail = text[-keep:] if keep else b""
    return False
