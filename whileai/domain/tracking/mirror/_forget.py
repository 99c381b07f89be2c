"""Deleting a run's mirrored copies with the run, and an account's with the account.

The platform's delete path calls :func:`forget_mirrors` once the rows are gone. The copies are the ones in the
account's folder (``<data root>/mirrors/<account id>``): the W&B run folders, the MLflow runs (rows and
artifacts, deleted for good) and the trackio runs (metrics, config, system metrics, alerts). A tracker the user
named themselves (an online W&B project, MLFLOW_TRACKING_URI, a trackio Space) holds the user's own copy and is
left alone.
"""

from __future__ import annotations

import shutil
import sqlite3
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import TypeVar

from whileai.core.errors import MirrorWarning

from whileai.domain import defaults

from whileai.domain.tracking.mirror._offline import keep_local
from whileai.domain.tracking.mirror._place import account_path

__all__ = ["forget_mirrors"]

T = TypeVar("T")


def forget_mirrors(account_id: str, run_ids: Sequence[str] | None = None, *, then: T) -> T:
    """Delete the mirrored copies of ``run_ids`` of ``account_id`` (with None: every copy the account has); returns
    ``then``, so a delete can hand its answer through once its rows are committed.

    Never raises: a copy that cannot be deleted is a MirrorWarning naming its folder, and the delete it follows
    stands.

        return forget_mirrors(account_id, [run_id], then=store._tx(work))   # after the run's rows went
        return forget_mirrors(account_id, then=store._tx(work))             # after the account's
    """
    try:
        _forget(account_path(account_id), account_id, None if run_ids is None else [str(r) for r in run_ids])
    except Exception as exc:  # noqa: BLE001 - the delete has happened; its copies are reported, never raised
        _warn(f"account {account_id}: its mirrored copies could not be deleted ({type(exc).__name__}: {exc})")
    return then


def _forget(folder: Path, account_id: str, run_ids: list[str] | None) -> None:
    if not folder.is_dir():
        return
    if run_ids is None:
        shutil.rmtree(folder, ignore_errors=True)
        if folder.exists():
            _warn(f"account {account_id}: its mirrored copies in {folder} could not all be deleted; delete the "
                  "folder by hand")
        return
    keep_local()  # reading a store imports its tracker, which would phone home on import
    for name, forget in _forgetters():
        try:
            forget(folder, run_ids)
        except Exception as exc:  # noqa: BLE001 - one tracker's store failing leaves the others to clean
            _warn(f"runs {run_ids}: their {name} copies in {folder} could not be deleted ({type(exc).__name__}: {exc})")
    for db in [folder / "mlflow.db", *sorted((folder / "trackio").glob("*.db"))]:
        if db.is_file():
            try:
                scrub(db)
            except sqlite3.Error as exc:  # busy with another run of the account: the next delete scrubs it
                _warn(f"runs {run_ids}: their deleted rows may stay readable in {db}'s free pages until the next "
                      f"delete ({type(exc).__name__}: {exc})")


def scrub(db: Path) -> None:
    """Rewrite the SQLite file ``db`` without its free pages, so deleted rows cannot be read back from it: the
    trackers delete without SQLite's secure_delete, which the platform's own store turns on."""
    with closing(sqlite3.connect(db, timeout=defaults.MIRROR_SCRUB_BUSY_TIMEOUT_S)) as conn:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _forgetters() -> Iterator[tuple[str, Callable[[Path, list[str]], None]]]:
    from importlib.util import find_spec

    from whileai.domain.tracking.mirror._wandb import forget_wandb

    yield "wandb", forget_wandb
    if find_spec("mlflow") is not None:
        from whileai.domain.tracking.mirror._mlflow import forget_mlflow

        yield "mlflow", forget_mlflow
    if find_spec("trackio") is not None:
        from whileai.domain.tracking.mirror._trackio import forget_trackio

        yield "trackio", forget_trackio


def _warn(message: str) -> None:
    try:
        warnings.warn(message, MirrorWarning, stacklevel=4)
    except Exception:  # noqa: BLE001 - warnings turned into errors must not undo a delete that happened
        pass
