"""Whether ``whileai`` was imported as itself, or as a namespace package that skipped its ``__init__.py``.

Run from a folder that holds the clone as ``whileai/`` (``~/src`` holding
``~/src/whileai``), ``import whileai`` finds that folder first on ``sys.path``
(the current directory). It has no ``__init__.py``, so Python takes it as a
namespace package; an editable install's finder then still serves
``whileai.simulations`` and the rest from the clone, but ``whileai/__init__.py``
never runs, so nothing wires the SDK to the embedded platform and the first push
fails far from the cause. The package's entry points call :func:`check_root`, so
the mistake is named where it happens, with what to do.
"""

from __future__ import annotations

import os
import sys

from whileai.core.errors import NamespaceImportError  # re-exported: its old home

__all__ = ["NamespaceImportError", "namespace_problem", "check_root"]


def namespace_problem() -> str | None:
    """The message for a ``whileai`` imported as a namespace package, or None when it was imported properly."""
    root = sys.modules.get("whileai")
    if root is None or getattr(root, "__file__", None) is not None:
        return None
    folders = [str(p) for p in (getattr(root, "__path__", None) or [])
               if not str(p).startswith("__editable__")]  # setuptools' placeholder entry
    where = ", ".join(folders) or "a folder on sys.path"
    return (
        f"whileai was imported as a namespace package from {where}: that folder is named whileai but has no "
        f"__init__.py (most likely the clone itself, found because the current directory, {os.getcwd()}, comes "
        "first on sys.path), so whileai/__init__.py never ran and the SDK is not wired to its embedded platform. "
        "Run from another folder, or from inside the clone (cd whileai)."
    )


def check_root() -> None:
    """Raise :class:`NamespaceImportError` when ``whileai`` is a namespace package (see the module docstring)."""
    problem = namespace_problem()
    if problem is not None:
        raise NamespaceImportError(problem)
