"""What "the same install" means for a warm process: every distribution it has imported from is as it was.

A warm process (``_warm_process``) keeps the libraries it imported for as long as it lives, and each fork (a job,
a command) runs whileai's code from disk against them. Once any of them is upgraded, removed or reinstalled, a
fork would pair new code with the old library in memory, so the warm process must make way for a fresh one.

:func:`loaded` notes, as the warm process finishes its imports, each distribution that provides a module it has
imported: its metadata folder (``*.dist-info``, or ``*.egg-info``) and a signature of it (the folder's, METADATA's
and RECORD's inode, size and modification time). pip removes an old version's folder and
writes a new one, and a reinstall of the same version writes fresh files, so any install touching the
distribution changes the signature. :func:`changed` compares the signatures again: a few ``stat`` calls per
distribution, cheap enough for every request the warm process answers.
"""

from __future__ import annotations

import os
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["Install", "changed", "loaded"]

#: metadata folder -> (the files signed, their signatures)
Install = dict[str, tuple[list[str], list[Any]]]

#: the files of a metadata folder whose signatures are kept with the folder's own: a wheel's and an egg's
_SIGNED = ("METADATA", "RECORD", "PKG-INFO")


def _top_level(folder: Path) -> set[str]:
    """The top-level import names the distribution of metadata folder ``folder`` installs: its ``top_level.txt``
    where it has one, else its RECORD's first path parts (a wheel built without setuptools has no top_level.txt);
    and its own name, for an editable install (whose RECORD names a ``.pth`` file, not the package)."""
    names = {re.sub(r"[-.]+", "_", folder.name.partition("-")[0].removesuffix(".egg-info")).lower()}
    for listing, split in (("top_level.txt", str.split), ("RECORD", _record_tops)):
        try:
            return names | set(split((folder / listing).read_text(encoding="utf-8", errors="replace")))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return names


def _record_tops(record: str) -> list[str]:
    tops = []
    for line in record.splitlines():
        first = line.split("/", 1)[0].split(",", 1)[0]
        tops.append(first[: -len(".py")] if first.endswith(".py") else first)
    return tops


def _marks(files: list[str]) -> list[Any]:
    marks: list[Any] = []
    for name in files:
        try:
            info = os.stat(name)
        except OSError:
            marks.append(None)
            continue
        marks.append((info.st_ino, info.st_size, info.st_mtime_ns))
    return marks


def loaded() -> Install:
    """The metadata folder of every distribution a module this process has imported comes from (in each location
    on ``sys.path``: where two copies of one distribution are found, both are kept), with the files signed and
    their signatures."""
    imported = {name.partition(".")[0] for name in list(sys.modules)}
    found: Install = {}
    for dist in metadata.distributions():
        folder = getattr(dist, "_path", None)
        if not isinstance(folder, Path) or str(folder) in found:
            continue
        try:
            provides = _top_level(folder)
        except OSError:  # unreadable metadata: kept, so that a change to it is still seen
            provides = imported
        if provides & imported:
            files = [str(folder), *(str(folder / name) for name in _SIGNED if (folder / name).is_file())]
            found[str(folder)] = (files, _marks(files))
    return found


def changed(install: Install) -> str | None:
    """The first metadata folder of ``install`` (from :func:`loaded`) that is no longer as it was; None where all
    are unchanged."""
    for folder, (files, marks) in install.items():
        if _marks(files) != marks:
            return folder
    return None
