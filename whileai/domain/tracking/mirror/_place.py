"""Where a run's mirrored copies live: one folder per account under the data root.

``<data root>/mirrors/<account id>/`` holds that account's W&B offline runs (``offline-run-*-<run id>``), its
MLflow store (``mlflow.db`` and ``mlflow-artifacts/``) and its trackio store (``trackio/``), so deleting a run or an
account can find and delete every copy, and no account's copies sit in another's store. The account is the
platform's: an account key asks the platform (``GET /me``); a job's key, which ``/me`` refuses, is looked up on
the embedded store the worker reports to.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from whileai.core.paths import data_root

#: the folder under the data root that holds every account's mirrors
MIRRORS_FOLDER = "mirrors"
#: the account folder of a run whose account could not be found (a job's key on a remote platform: the copies
#: are written where the job runs, which is not the platform's data root)
UNKNOWN_ACCOUNT = "unattributed"

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def account_path(account_id: str | None) -> Path:
    """``<data root>/mirrors/<account id>`` (the id made safe as a folder name), whether or not it exists."""
    name = _SAFE.sub("_", account_id) if account_id else UNKNOWN_ACCOUNT
    if name.strip(".") == "":
        name = UNKNOWN_ACCOUNT
    return data_root() / MIRRORS_FOLDER / name


def account_folder(account_id: str | None) -> Path:
    """:func:`account_path`, created readable by its owner only."""
    folder = account_path(account_id)
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.mkdir(exist_ok=True, mode=0o700)
    return folder


def current_account(client: Any = None) -> str | None:
    """The account of ``client`` (the credential chain's client when None), or None when it cannot be told."""
    from whileai.core.errors import PlatformError

    from whileai.domain import client as client_module

    try:
        client = client if client is not None else client_module.get_client()
        return str(client.request("GET", "/me")["account_id"])
    except (PlatformError, KeyError, TypeError):
        pass
    if not getattr(client, "embedded", False) or not client.api_key:
        return None
    try:  # a job's key on the embedded platform: its store knows the job's account
        app, _ = client_module._embedded_app(data_root())
        scope = app.state.store.job_key_scope(client.api_key)
    except Exception:  # noqa: BLE001 - an unreadable store leaves the account unknown; the mirror still runs
        return None
    return str(scope["account_id"]) if scope else None
