"""Where whileai keeps its files: one function decides, everything else asks it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from whileai.core.defaults import HOME_ENV

__all__ = ["data_root", "setting"]


def data_root() -> Path:
    """The data root: the directory HOME_ENV names (``$WHILEAI_HOME``) when set, else ``~/.whileai``. Created on first use.

    The embedded store, the spool of unsent points, cached tiny models, adapters
    and the client config file all live under it.
    """
    root = Path(os.environ.get(HOME_ENV) or Path.home() / ".whileai").expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root


def setting(env: str, key: str) -> str:
    """An operator's setting: the environment variable ``env``, else ``key`` in the data root's config.json, else "".

    An unreadable config.json counts as unset (the caller's default applies).
    """
    value = os.environ.get(env, "").strip()
    if value:
        return value
    path = data_root() / "config.json"
    try:
        return str(json.loads(path.read_text()).get(key) or "").strip() if path.exists() else ""
    except (OSError, ValueError, AttributeError):
        return ""
