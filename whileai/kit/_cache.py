"""The data root's model folders: each built once, under a lock, landed by a rename.

``build_once(name, build)`` is how the kit's demo base and an imported GGUF base
reach ``<data_root>/models/<name>``: the first caller builds into a temporary
sibling and renames it into place after writing ``DONE`` (its record); every
later caller, in any process, finds ``DONE`` and returns at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["DONE", "models_dir", "build_once", "file_sha256"]

#: Written last into a finished directory; a directory without it is not a base.
DONE = "whileai_kit.json"


def file_sha256(path: Path) -> str:
    """A file's SHA-256, read in blocks (a GGUF base is hundreds of MB): what a base's bytes are recorded as."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def models_dir() -> Path:
    """``<data_root>/models``, created on first use."""
    from whileai.core.paths import data_root

    path = data_root() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` across processes (flock; no-op where it is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(name: str, build: Callable[[Path], dict[str, Any]]) -> Path:
    """``models_dir()/name``, built by ``build(tmp_dir) -> dict`` the first time, under a lock."""
    target = models_dir() / name
    if (target / DONE).exists():
        return target
    with _locked(models_dir() / f".{name}.lock"):
        if (target / DONE).exists():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=models_dir()))
        try:
            from whileai.kit.quiet import quiet_libraries

            with quiet_libraries():  # the build says what it does in the caller's own lines
                info = build(tmp)
            (tmp / DONE).write_text(json.dumps(info, indent=1, sort_keys=True, default=str))
            if target.exists():  # a crashed earlier build without its marker
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target
