"""The seam between the SDK's in-process transport and the platform it drives, kept below both.

With nothing configured the SDK talks to the *embedded platform*: the platform's
ASGI app, driven in this process over the SQLite store under the data root. The
SDK may not import the platform (the layers point one way), so it asks this
module for a provider instead: a function ``provider(root) -> (asgi_app,
local_key)`` that builds the app over the store under ``root`` and returns the
local account's key. The package root (``whileai/__init__.py``, which every
``import whileai.<anything>`` runs first) installs the platform's provider,
``whileai.platform.embedded.app_and_key``; a test or an embedding program may
install another with :func:`provide`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["EmbeddedProvider", "provide", "provider"]

#: ``provider(root) -> (asgi_app, local_key)``
EmbeddedProvider = Callable[[Path], tuple[Any, str]]

_PROVIDER: EmbeddedProvider | None = None


def provide(factory: EmbeddedProvider | None) -> EmbeddedProvider | None:
    """Install ``factory`` as the embedded platform's provider (None removes it); returns the one it replaced."""
    global _PROVIDER
    previous, _PROVIDER = _PROVIDER, factory
    return previous


def provider() -> EmbeddedProvider | None:
    """The installed provider, or None when nothing has installed one."""
    return _PROVIDER
