"""The embedded platform: the platform's app over the store under a data root, for the SDK's in-process transport.

``app_and_key(root)`` is the provider that the package root installs in
:mod:`whileai.core.embedded`; the SDK's client calls it once per data root and
drives the returned ASGI app in process (docs/architecture.md, "The client seam").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.core.errors import PlatformError
from whileai.platform.api import create_app
from whileai.platform.store import Store, ensure_local_account, store_url

__all__ = ["app_and_key"]


def app_and_key(root: Path) -> tuple[Any, str]:
    """The FastAPI app over the store at ``store_url()`` (SQLite under ``root`` unless set) and the local account's key."""
    store = Store(store_url())
    _account_id, key = ensure_local_account(store)
    if not key:
        raise PlatformError(
            f"cannot keep the embedded platform's key in {root} (is it writable?); "
            "set WHILEAI_HOME to a writable directory"
        )
    app = create_app(store)
    app.state.quiet_errors = True  # in the training script's own process: one line per failure, no traceback
    app.state.embedded = True  # the local user's own platform: their python: reward modules run
    return app, key
