"""Runs made without the platform: when it cannot be reached, or on purpose (``WHILEAI_MODE=offline``).

``training_run`` names every run itself (whileai.core.ids, the platform's own
format) and asks the platform to create it under that id. When the platform
does not answer (refused connection, timeout past RUN_CREATE_TIMEOUT_S, a 5xx),
or when MODE_ENV says "offline", the run starts anyway from a local record: its
tracker keeps the create request and sends it before anything else (online), or
writes it to the spool with everything the run logs (offline). The platform
makes the run the first time the create arrives and answers the same run to a
resend, so delivery is exactly once however often it is retried. One line on
stderr, once per process, says what happened and how the run will be delivered.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from whileai.domain.tracking import _spool
from whileai.domain import defaults
from whileai.core.errors import PlatformError
from whileai.core.ids import new_id

__all__ = ["mode", "create_run", "unreachable"]

_ANNOUNCED = [False]


def mode() -> str:
    """The tracking mode MODE_ENV sets: one of MODES ("online" when unset or empty)."""
    value = os.environ.get(defaults.MODE_ENV, "").strip().lower() or defaults.MODES[0]
    if value not in defaults.MODES:
        raise ValueError(
            f"{defaults.MODE_ENV}={os.environ.get(defaults.MODE_ENV)!r} is not a tracking mode; accepted: "
            f"{', '.join(defaults.MODES)} (offline sends nothing until `python -m whileai sync`); "
            f"fix the variable or unset it"
        )
    return value


def unreachable(exc: PlatformError) -> bool:
    """Whether a failed request means the platform is not there now (no answer, or a server error), not a refusal."""
    return exc.status == 0 or exc.status >= 500


def _local_record(body: dict[str, Any]) -> dict[str, Any]:
    """The record a new run would get from the platform, built here (the platform builds the real one on delivery)."""
    return {"status": "running", "summary": {}, "step": 0, "total_steps": None, **body}


def _announce(run_id: str, client: Any, reason: str | None) -> None:
    """Say once per process, on stderr, that a run is offline and how it will be delivered."""
    if _ANNOUNCED[0]:
        return
    _ANNOUNCED[0] = True
    where = _spool.spool_dir()
    if reason is None:
        line = (
            f"whileai: {defaults.MODE_ENV}=offline: run {run_id} sends nothing; what it logs is kept in {where} "
            f"until `python -m whileai sync` delivers it to {client.base_url}"
        )
    else:
        line = (
            f"whileai: the platform at {client.base_url} cannot be reached ({reason}); run {run_id} goes on "
            f"offline: what it logs is kept and delivered, under the same id, by the next send that reaches "
            f"the platform or by `python -m whileai sync` (spool: {where})"
        )
    try:
        print(line, file=sys.stderr)
    except Exception:  # a closed stderr must not stop the run
        pass


def create_run(client: Any, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None, bool]:
    """Create a run named here: ``(record, create body still to deliver or None, offline on purpose)``.

    Raises what the platform answered when it refused the run (a bad key, a bad
    field): only an unreachable platform turns into an offline run.
    """
    body = {"id": new_id("run"), **body}
    if mode() == "offline":
        _announce(body["id"], client, None)
        return _local_record(body), body, True
    try:
        return client.request("POST", "/runs", json=body, timeout=defaults.RUN_CREATE_TIMEOUT_S), None, False
    except PlatformError as exc:
        if not unreachable(exc):
            raise
        _announce(body["id"], client, _reason(exc))
        return _local_record(body), body, False


def _reason(exc: PlatformError) -> str:
    if exc.status:
        return f"it answered {exc.status}"
    cause = exc.__cause__
    if cause is None:
        return str(exc)[:200]
    return (f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__)[:200]
