"""What reproduces a run, recorded on it; and ``python -m whileai reproduce RUN_ID [overrides]``.

The record every run of the runner carries on its config (``runner``): the
resolved spec, the overrides as typed, the recipe, the full command line, the
versions of what computes (whileai, torch, transformers, trl, peft, python),
the git commit with a dirty flag and a hash of the uncommitted diff when the
package runs from a checkout, the dataset's content hash, the sweep id, the
Hydra output folder, and for a reproduction the run it reproduces. When the
package runs from a checkout that holds the committed ``constraints.txt``, the
record also names the packages installed at another version than the one pinned
there (``constraints_differ``), and which file that was and whether it was found (``constraints_file``: an
installed wheel has none to compare with). What a held-out figure also depends on, the base's weights digest and the CPU
kernel path with its threads, the job records itself (``training["base_weights"]``, ``training["compute"]``):
they are the job's machine's, not the runner's. ``reproduce`` and ``diff`` compare all of these.
"""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from whileai.core.runnerrecord import ConstraintsFile, GitState, RunnerRecord
from whileai.core.stats import constraints_text  # noqa: F401  (re-exported: reproduce prints it)

from whileai.runner import defaults
from whileai.core import defaults as core_defaults

__all__ = ["versions", "installed_versions", "git_state", "runner_record", "spec_of", "read_pins", "pin_matches", "constraints_differ",
           "constraints_compared", "constraints_text"]

_PACKAGE = Path(__file__).resolve().parents[1]


def versions() -> dict[str, str | None]:
    """The installed versions of VERSIONED_PACKAGES and python (read from metadata: nothing is imported)."""
    found: dict[str, str | None] = {}
    for name in defaults.VERSIONED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    found["python"] = platform.python_version()
    return found


def canonical_name(name: str) -> str:
    """A distribution's name as PEP 503 compares it: lower case, runs of ``-``, ``_`` and ``.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*===?\s*([^\s;#]+)")


def read_pins(path: Path) -> dict[str, str]:
    """``{name: version}`` of each ``name==version`` line of a constraints file (comments and other lines skipped)."""
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        found = _PIN.match(line)
        if found:
            pins[canonical_name(found.group(1))] = found.group(2)
    return pins


def pin_matches(pinned: str, installed: str | None) -> bool:
    """Whether an installed version satisfies ``==pinned``. As in PEP 440, a pin without a local label
    (``2.13.0``) admits any local build of that release (``2.13.0+cpu``, ``2.13.0+cu128``)."""
    if installed is None:
        return False
    return installed == pinned or ("+" not in pinned and installed.split("+", 1)[0] == pinned)


def installed_versions() -> dict[str, str]:
    """``{canonical name: version}`` of every distribution on ``sys.path``, read from the ``NAME-VERSION.dist-info``
    folder names (the wheel spec escapes ``-`` in both parts), the first found winning as in imports: a listing of
    each folder instead of parsing some 160 metadata files."""
    import os
    import sys

    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = [e.name for e in os.scandir(entry or ".") if e.name.endswith(".dist-info")]
        except OSError:
            continue
        for folder in names:
            name, _, version = folder[: -len(".dist-info")].partition("-")
            if version:
                found.setdefault(canonical_name(name), version)
    return found


def constraints_differ(path: Path | None = None) -> dict[str, dict[str, str | None]] | None:
    """The packages installed at another version than constraints.txt pins: ``{name: {"pinned", "installed"}}``,
    empty when all match. Every pinned package counts that is installed; of those not installed, the ones whose
    code computes a result (VERSIONED_PACKAGES; a missing test tool changes no figure). None when there is no such
    file (an installed wheel has none next to it) or it cannot be read: then nothing is known to compare with.
    ``path`` is for tests."""
    path = path if path is not None else _constraints_path()
    if not path.is_file():
        return None
    try:
        pins = read_pins(path)
    except (OSError, UnicodeDecodeError):
        return None
    installed = installed_versions()
    computing = {canonical_name(name): name for name in defaults.VERSIONED_PACKAGES}
    differ: dict[str, dict[str, str | None]] = {}
    for name, pinned in sorted(pins.items()):
        found = installed.get(name)
        if (found is not None or name in computing) and not pin_matches(pinned, found):
            differ[computing.get(name, name)] = {"pinned": pinned, "installed": found}
    return differ


def _constraints_path() -> Path:
    return _PACKAGE.parent / core_defaults.CONSTRAINTS_FILE


def constraints_compared(path: Path | None = None) -> tuple[dict[str, dict[str, str | None]] | None, ConstraintsFile]:
    """``(constraints_differ, constraints_file)`` as a run records them: the packages off the pins (``{}``: all
    match), and the file compared with, ``found`` False where there was none to compare with (then the differences
    are None). ``path`` is for tests."""
    path = path if path is not None else _constraints_path()
    differ = constraints_differ(path)
    return differ, {"name": path.name, "found": differ is not None}


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=30)


def git_state() -> GitState | None:
    """``{commit, dirty, diff_hash}`` of the checkout this package runs from, or None outside one."""
    root = _PACKAGE.parent
    try:
        top = _git("rev-parse", "--show-toplevel", cwd=root)
        if top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != root.resolve():
            return None
        commit = _git("rev-parse", "HEAD", cwd=root).stdout.decode().strip() or None
        diff = _git("diff", "HEAD", "--binary", cwd=root).stdout
        untracked = _git("ls-files", "--others", "--exclude-standard", cwd=root).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = bool(diff.strip() or untracked.strip())
    digest = hashlib.sha256(diff + b"\0" + untracked).hexdigest()[: defaults.DIFF_HASH_HEX] if dirty else None
    return {"commit": commit, "dirty": dirty, "diff_hash": digest}


def runner_record(spec: dict[str, Any], context: Any) -> RunnerRecord:
    """The record a run's config carries under ``runner`` (``core.runnerrecord``): what the run knows before it
    starts. The pipeline adds the data's push, cut and held-out note, and each stage its own fields with the quick
    note as that stage's rows left it."""
    # VERSIONED_PACKAGES at another version than constraints.txt pins ({}: all match), and the file compared with
    differ, compared = constraints_compared()
    return RunnerRecord(
        spec=spec,
        recipe=context.recipe,
        overrides=list(context.overrides),
        choices=dict(context.choices) if context.choices is not None else None,
        command=context.command,
        versions=versions(),
        constraints_differ=differ,
        git=git_state(),
        sweep_id=context.sweep_id,
        hydra_dir=str(context.output_dir),
        reproduces=context.reproduces,
        # where each expect line was written, so `wait` can check a run the runner only submitted
        expect_lines=dict(context.expect_lines),
        constraints_file=compared,
    )


def record_of(run_record: dict[str, Any]) -> dict[str, Any] | None:
    """The runner's record on a run's config (wai.train keeps unread config keys under ``extra``)."""
    config = run_record.get("config")
    if not isinstance(config, dict):
        config = {}
    found = config.get("runner") or (config.get("extra") or {}).get("runner")
    return found if isinstance(found, dict) else None


def spec_of(run_record: dict[str, Any]) -> dict[str, Any] | None:
    record = record_of(run_record)
    return record.get("spec") if record else None


# ---------------------------------------------------------------------------
# reproduce
# ---------------------------------------------------------------------------


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for name in sorted(set(old.get("versions") or {}) | set(new.get("versions") or {})):
        a, b = (old.get("versions") or {}).get(name), (new.get("versions") or {}).get(name)
        if a != b:
            out.append(f"{name} {a} -> {b}")
    ga, gb = old.get("git") or {}, new.get("git") or {}
    for key in ("commit", "dirty", "diff_hash"):
        if ga.get(key) != gb.get(key):
            out.append(f"git {key} {ga.get(key)} -> {gb.get(key)}")
    return out
