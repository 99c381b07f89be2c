"""The trackio mirror: one trackio run per whileai run, named by the whileai run id, in the account's trackio store.

trackio fixes its folder when first imported (``trackio.utils.TRACKIO_DIR``, copied into its other modules), from
TRACKIO_DIR or the user's cache, which every account would share. :func:`use_folder` points every loaded trackio
module at the account's folder under the data root instead; a process mirrors for one account at a time (a job's
worker runs one run).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from whileai.domain import defaults

#: trackio's module-level folders, each relative to TRACKIO_DIR
_FOLDERS = {"TRACKIO_DIR": "", "MEDIA_DIR": "media", "ARTIFACTS_DIR": "artifacts"}
_PIN = threading.Lock()


def use_folder(folder: Path) -> None:
    """Point every loaded trackio module at ``folder`` (its store, media and artifacts)."""
    import trackio  # noqa: F401 - loads the modules that copy the folder
    import trackio.sqlite_storage  # noqa: F401

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "trackio" or name.startswith("trackio.")):
            continue
        for attr, sub in _FOLDERS.items():
            if isinstance(getattr(module, attr, None), Path):
                setattr(module, attr, folder / sub if sub else folder)


@contextmanager
def folder_in_use(folder: Path) -> Iterator[None]:
    """trackio pointed at ``folder`` for the block, then back where it was (the delete path's store)."""
    from trackio import utils

    with _PIN:
        before = utils.TRACKIO_DIR
        use_folder(folder)
        try:
            yield
        finally:
            use_folder(before)


class TrackioSink:
    name = "trackio"

    def __init__(self, run: Any, where: str, location: str):
        self.run = run
        self.where = where
        self.location = location
        self.last_step = 0

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.last_step = max(self.last_step, step)
        self.run.log(dict(metrics), step=step)

    def finish(self, status: str, final: Mapping[str, Any]) -> None:
        from trackio import AlertLevel

        # trackio has no run summary: the final numbers are points at the last step, the rest an alert
        numbers = {k: float(v) for k, v in final.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if numbers:
            self.run.log(numbers, step=self.last_step)
        text = "; ".join(f"{k.removeprefix('whileai/')}={v}" for k, v in final.items())
        level = AlertLevel.INFO if status == "done" else AlertLevel.ERROR
        self.run.alert(title=f"whileai run {status}", text=text, level=level, step=self.last_step)
        self.run.finish()


def open_trackio(*, run_id: str, name: str, url: str, config: Mapping[str, Any], folder: Path) -> TrackioSink:
    import trackio

    store = folder / "trackio"
    use_folder(store)
    project = defaults.MIRROR_PROJECT
    run = trackio.init(project=project, name=run_id, config={**config, "whileai_name": name}, embed=False,
                       auto_log_gpu=False, auto_log_cpu=False)
    return TrackioSink(run, f"{store} (project {project}, run {run_id})", str(store))


def forget_trackio(folder: Path, run_ids: list[str]) -> None:
    """Delete the runs ``run_ids`` (metrics, config, system metrics, alerts) from the trackio store in ``folder``."""
    store = folder / "trackio"
    if not store.is_dir():
        return
    from trackio.sqlite_storage import SQLiteStorage

    with folder_in_use(store):
        db = SQLiteStorage.get_project_db_path(defaults.MIRROR_PROJECT)
        if not db.exists():
            return
        for run_id in run_ids:
            # by trackio's own ids: by name alone, trackio finds the config's run through the metrics it has
            # just deleted, and keeps the config
            ids: list[str | None] = [*_trackio_ids(db, run_id)] or [None]
            for trackio_id in ids:
                SQLiteStorage.delete_run(defaults.MIRROR_PROJECT, run_id, run_id=trackio_id)


def _trackio_ids(db: Path, run_name: str) -> list[str]:
    """trackio's ids of the runs named ``run_name`` (a store older than trackio's run ids has none)."""
    import sqlite3

    found: set[str] = set()
    with closing(sqlite3.connect(db)) as conn:
        for table in ("metrics", "configs", "alerts", "system_metrics"):
            try:
                found.update(r for (r,) in conn.execute(f"SELECT DISTINCT run_id FROM {table} WHERE run_name = ?",
                                                        (run_name,)) if r)
            except sqlite3.OperationalError:  # no such table or column in this store's schema
                continue
    return sorted(found)
