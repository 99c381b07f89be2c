"""The ``base_model`` path check a spec gets before any run exists, where its folder is the user's own.

On the embedded platform (no server configured) the job runs on this machine,
so a path ``base_model=`` names is checked here (:mod:`whileai.core.basefolder`):
a missing path, a relative one, or a folder without a model is a problem of the
spec, reported by ``validate``, ``run`` and ``wai.train`` before the data is
pushed. A server reads its own disk, so for one it checks the path itself at
launch, by its operator's rule (``WHILEAI_SERVE_DIRS``).
"""

from __future__ import annotations

from whileai.core.basefolder import base_folder_problem

__all__ = ["base_problems"]


def base_problems(base: object) -> list[str]:
    """What the path ``base`` lacks as a base when the platform is this machine's; empty otherwise."""
    from whileai.domain.client import embedded_platform

    if not isinstance(base, str) or not embedded_platform():  # a non-string base is the type check's problem
        return []
    problem = base_folder_problem(base)
    return [problem] if problem else []
