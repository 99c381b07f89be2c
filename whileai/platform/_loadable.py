"""What the platform may load from disk on an account's say-so: the rule for base models and adapters.

An account names models; it never hands the server a path of its choosing.
A base model is a name the platform serves (SERVED_BASES, the kit's base),
that run's own base, or a directory under one of the platform's own roots.
An adapter is the one a job saved for a run of the same account (under
``<data_root>/adapters/<run_id>``). The roots are the data root's ``models``
and ``adapters`` folders plus any directory the operator lists in
SERVE_DIRS_ENV (``serve_dirs`` in config.json). Refusals never say whether a
path exists: every path outside the roots gets the same answer.

The embedded platform is the exception: its one account is the local user, who
owns the machine, so a job there trains on, and the endpoint serves, any folder
or ``.gguf`` file of theirs that holds a model (:mod:`whileai.core.basefolder`),
with no operator setting; a run's adapter folder is still not a base.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from whileai.core.basefolder import base_folder_problem, names_a_path
from whileai.core.paths import adapter_dir, data_root, setting
from whileai.platform import defaults
from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults

__all__ = ["allowed_roots", "base_problem", "launch_base_problem", "adapter_problem"]

# a hub id (org/name or name): letters, digits, dot, dash, underscore; no "..", nothing that reads as a path
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)?")


def allowed_roots() -> list[Path]:
    """The directories the platform loads models from: its own ``models`` and ``adapters``, and SERVE_DIRS_ENV's."""
    roots = [data_root() / "models", data_root() / "adapters"]
    extra = setting(defaults.SERVE_DIRS_ENV, "serve_dirs")
    roots += [Path(part).expanduser() for part in extra.split(os.pathsep) if part.strip()]
    return [Path(os.path.realpath(root)) for root in roots]


def _inside(path: str, roots: list[Path]) -> bool:
    if not os.path.isabs(os.path.expanduser(path)):
        return False
    real = Path(os.path.realpath(os.path.expanduser(path)))
    return any(real == root or root in real.parents for root in roots)


def _base_dir_ok(path: str) -> bool:
    """A directory a base may load from: under the platform's model folders, and not a run's adapter folder
    (an adapter is not a base: a job saved it for one run, and it loads only on top of that run's base)."""
    roots = allowed_roots()
    adapters = roots[1]
    return _inside(path, [roots[0], *roots[2:]]) and not _inside(path, [adapters])


def _own_base(path: str) -> bool:
    """A path of the local user's that holds a model and is not a run's adapter folder (the embedded rule)."""
    return names_a_path(path) and base_folder_problem(path) is None and not _inside(path, [allowed_roots()[1]])


def _is_hub_id(name: str) -> bool:
    return _HUB_ID.fullmatch(name) is not None and ".." not in name


def base_problem(base: Any, run_base: Any = None, embedded: bool = False) -> str | None:
    """Why ``base`` may not be loaded; None when it may. ``run_base`` is the base the adapter's run trained on.
    On the ``embedded`` platform any folder or file of the local user's that holds a model may be served
    (:func:`_own_base`), as it may be trained on: a merged export (``export RUN --merged DIR``) serves as a base."""
    if not isinstance(base, str) or not base.strip():
        return f"baseModel={base!r} is not a model name; send one of SERVED_BASES"
    if base in defaults.SERVED_BASES or base == kit_defaults.KIT_BASE_NAME:
        return None
    if _is_hub_id(base) and base == run_base:
        return None
    if not _is_hub_id(base) and _base_dir_ok(base):
        return None
    if embedded and _own_base(base):  # the local user's own model folder, a merged export included
        return None
    return (
        f"baseModel={base[:200]!r} is not a base this platform loads; send one of SERVED_BASES "
        f"({', '.join(defaults.SERVED_BASES)}), {kit_defaults.KIT_BASE_NAME!r}, the base the run was trained on, or a "
        f"directory under the platform's model folders, not a run's adapter folder (its operator adds folders with {defaults.SERVE_DIRS_ENV})"
    )


def launch_base_problem(base: Any, embedded: bool = False) -> str | None:
    """Why a job may not train on ``base``; None when it may: a hub id (from this machine's cache, or
    fetched on Modal), a name the platform serves, or a directory under the platform's model folders.
    On the ``embedded`` platform also any path of the local user's that holds a model, outside the
    platform's adapters folder."""
    if isinstance(base, str) and (_is_hub_id(base) or _base_dir_ok(base)):
        return None
    if embedded and isinstance(base, str) and names_a_path(base):
        problem = base_folder_problem(base)
        if problem is not None:
            return f"spec {problem}"
        if _own_base(base):
            return None
    return (
        f"spec base_model={str(base)[:200]!r} is not a base this platform trains on; send a hub id such as "
        f"{core_defaults.SERVED_HUB_BASES[0]!r}, {kit_defaults.KIT_BASE_NAME!r}, or a directory under the platform's model "
        f"folders, not a run's adapter folder (its operator adds folders with {defaults.SERVE_DIRS_ENV}; the "
        "embedded platform, with no server configured, trains on a model folder of your own as it is)"
    )


def adapter_problem(adapter: Any, run_id: str | None) -> str | None:
    """Why ``adapter`` may not be loaded for the run ``run_id``; None when it may."""
    if adapter is None:
        return None
    if run_id is None:
        return "an adapter comes from a run: send adapterRunId (a run of yours whose job saved an adapter)"
    if isinstance(adapter, str) and (
        _inside(adapter, [Path(os.path.realpath(adapter_dir(run_id)))]) or _inside(adapter, allowed_roots()[2:])
    ):
        return None
    return (
        f"adapter={str(adapter)[:200]!r} is not the adapter of run {run_id}: the platform serves the adapter a "
        f"job saved for the run (under its adapter store) or one under a folder its operator added with "
        f"{defaults.SERVE_DIRS_ENV}; send the run's own adapter (wai.serve(run, name) does)"
    )
