"""Where whileai keeps its files: one function decides, everything else asks it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_root"]


def data_root() -> Path:
    """The data root: ``$WHILEAI_HOME`` when set, else ``~/.whileai``. Created on first use.

    The embedded store, the spool of unsent points, cached tiny models, adapters
    and the client config file all live under it.
    """
    root = Path(os.environ.get("WHILEAI_HOME") or Path.home() / ".whileai").expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root
