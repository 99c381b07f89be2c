"""A measured time is stated once: in ``benchmarks/MEASURED.md``, with what measured it; everything else cites it.

A comment, docstring or doc paragraph that says how long something took on some machine ("took 2.0 s", "costs
~0.1 s a row", "about 2.5 minutes") must cite the entry it comes from (``benchmarks/MEASURED.md#an-entry``),
so one figure is kept, and changed, in one place. A duration that is a setting, a deadline or another library's
default ("30 s is the client's deadline", "torchrun waits 30 s") is not a measurement and needs no citation.

Three rules:

- every cited entry exists (a ``### id`` heading of MEASURED.md);
- every entry is cited at least once (a figure nobody relies on is not kept);
- no block of text states a measured duration without citing an entry.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "benchmarks" / "MEASURED.md"

_DURATION = r"~?\d+(?:[.,]\d+)?(?:\s?(?:-|–|to)\s?~?\d+(?:\.\d+)?)?\s?(?:ms|s|seconds?|min|minutes?|hours?)\b"
#: a duration with a word that says it was measured (took, takes, costs, spent, measured) or an approximation
#: sign, within one clause
MEASURED_TIME = re.compile(
    rf"(?:\b(?:took|takes|take|costs?|spent|measured|lasted|ran in)\b[^.;:]{{0,60}}?{_DURATION}"
    rf"|{_DURATION}[^.;:]{{0,30}}?\b(?:faster|slower)\b"
    rf"|(?<![\w.])~\d+(?:\.\d+)?\s?(?:ms|s|seconds?|min|minutes?)\b)",
    re.IGNORECASE,
)
CITATION = re.compile(r"MEASURED\.md#([a-z0-9-]+)")


@cache
def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def _entries() -> set[str]:
    return set(re.findall(r"^### ([a-z0-9-]+)\s*$", MEASURED.read_text(), re.MULTILINE))


def _python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each run of consecutive comment lines, and of each docstring."""
    blocks: list[tuple[int, str]] = []
    last_line, current, start = -2, [], 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type != tokenize.COMMENT:
            continue
        line = tok.start[0]
        if line != last_line + 1 and current:
            blocks.append((start, " ".join(current)))
            current = []
        if not current:
            start = line
        current.append(tok.string.lstrip("#:").strip())
        last_line = line
    if current:
        blocks.append((start, " ".join(current)))
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                blocks.append((node.body[0].lineno, " ".join(doc.split())))
    return blocks


def _markdown_blocks(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each paragraph (blank-line separated)."""
    blocks, current, start = [], [], 1
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            if not current:
                start = number
            current.append(line.strip())
        elif current:
            blocks.append((start, " ".join(current)))
            current = []
    if current:
        blocks.append((start, " ".join(current)))
    return blocks


def _checked_files() -> list[str]:
    return [
        f
        for f in _tracked()
        if (f.startswith("whileai/") and f.endswith(".py")) or f == "README.md" or (f.startswith("docs/") and f.endswith(".md"))
    ]


def _blocks(path: str) -> list[tuple[int, str]]:
    text = (ROOT / path).read_text()
    return _python_blocks(text) if path.endswith(".py") else _markdown_blocks(text)


def test_the_rule_tells_a_measured_time_from_a_setting() -> None:
    measured = [
        "the greedy reply took 2.0 s on one thread",
        "tokenizing every row again cost ~1-2 s a run",
        "AutoConfig imports torch (~2 s)",
        "On a laptop CPU the main job takes about 2.5 minutes",
        "one thread is 3 s faster",
    ]
    settings = [
        "30 s is the platform client's own request deadline",
        "torchrun's default is 0.1 s in recent releases",
        "a read every 10 s shows the end promptly",
        "RUN_STALE_S (300 s, ten heartbeats)",
    ]
    assert [t for t in measured if not MEASURED_TIME.search(t)] == []
    assert [t for t in settings if MEASURED_TIME.search(t)] == []


def test_every_cited_entry_exists_and_every_entry_is_cited() -> None:
    entries = _entries()
    cited: dict[str, list[str]] = {}
    for path in _tracked():
        if path.endswith((".py", ".md", ".yaml")) and path != "benchmarks/MEASURED.md" and not path.startswith("tests/"):
            for name in CITATION.findall((ROOT / path).read_text()):
                cited.setdefault(name, []).append(path)
    assert sorted(set(cited) - entries) == [], "cited but not an entry of benchmarks/MEASURED.md"
    assert sorted(entries - set(cited)) == [], "entries of benchmarks/MEASURED.md nothing cites"


def test_no_measured_time_is_stated_without_its_entry() -> None:
    uncited = [
        f"{path}:{line}: {MEASURED_TIME.search(text).group(0)!r}"  # type: ignore[union-attr]
        for path in _checked_files()
        for line, text in _blocks(path)
        if MEASURED_TIME.search(text) and not CITATION.search(text)
    ]
    assert uncited == [], "a measured time belongs in benchmarks/MEASURED.md; cite its entry instead:\n" + "\n".join(uncited)
