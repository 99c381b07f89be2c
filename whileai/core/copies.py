"""Copies of a run kept outside the platform's store: what deleting a run or an account deletes beside its rows.

A run mirrored with ``report_to`` leaves copies in trackers' own files (W&B folders, MLflow and trackio
stores). The platform's store deletes its rows and then calls :func:`forget`; the code that knows those
files is the SDK's mirror package, which the platform may not import (it sits above it), so the package
root installs it here with :func:`provide`, as it installs the embedded platform for the SDK
(:mod:`whileai.core.embedded`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["provide", "forget"]

Forgetter = Callable[[str, Sequence[str] | None], None]

_FORGETTER: list[Forgetter] = []


def provide(forgetter: Forgetter) -> None:
    """Install what deletes an account's copies: ``forgetter(account_id, run_ids or None for all)``."""
    _FORGETTER[:] = [forgetter]


def forget(account_id: str, run_ids: Sequence[str] | None = None) -> None:
    """Delete the copies of ``run_ids`` of ``account_id`` (None: every copy the account has), where a forgetter is
    installed. It never raises into the delete it follows: the forgetter reports what it could not delete."""
    for forgetter in _FORGETTER:
        forgetter(account_id, run_ids)
