"""The package's comments give reasons; the history of a change lives in git, not in the code.

A reference such as "issue 18" or "#30" tells a reader where a number came from only if they can look
the ticket up, and it goes stale as the code moves on; the measured fact behind the number is what the
comment should say. This test fails on any ticket reference in the package's text files: "issue N" (any
case, with or without ``#``) anywhere in the file, and a bare ``#N`` inside a Python comment.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "whileai"

#: Text the package ships and people read; the vendored minified scripts are not ours.
SUFFIXES = {".py", ".md", ".html", ".jinja", ".css", ".js"}
SKIPPED_DIRS = {"vendor", "__pycache__"}

ISSUE_WORD = re.compile(r"\bissues?\s*#?\s*\d+", re.IGNORECASE)
#: ``#30`` as a ticket reference (read in Python comments only); not a hex colour (``#1f2937``), an HTML
#: entity (``&#39;``) or part of a word (``abc#1``).
HASH_NUMBER = re.compile(r"(?<![\w&])#\d+\b(?![0-9a-fA-F])")


def _files() -> list[Path]:
    out = []
    for path in sorted(PACKAGE.rglob("*")):
        rel = path.relative_to(PACKAGE)
        if not path.is_file() or path.suffix not in SUFFIXES:
            continue
        if SKIPPED_DIRS & set(rel.parts):
            continue
        out.append(path)
    return out


def _comment_lines(source: str) -> list[tuple[int, str]]:
    """(line number, text) of each ``#`` comment in a Python source."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(tok.start[0], tok.string) for tok in tokens if tok.type == tokenize.COMMENT]


def ticket_references(path: Path) -> list[str]:
    """Every ticket reference in one file, as ``path:line: text``."""
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(PACKAGE.parent)
    found = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in ISSUE_WORD.finditer(text)]
    if path.suffix == ".py":
        for line, comment in _comment_lines(text):
            # the comment's own leading "#" is not a reference; "# 30 s" is not one either
            found += [f"{rel}:{line}: {m.group(0)}" for m in HASH_NUMBER.finditer(comment, 1)]
    return found


def test_the_patterns_catch_references_and_spare_colours_and_entities():
    assert ISSUE_WORD.search("a hook (issue 29)") and ISSUE_WORD.search("Issue #7") and ISSUE_WORD.search("issues 3")
    assert not ISSUE_WORD.search("no issues found") and not ISSUE_WORD.search("tissue 3")
    assert HASH_NUMBER.search("# see #30 for why")
    assert not any(HASH_NUMBER.search(s) for s in ("&#39;", "#a0b0c0", "#1f2937", "abc#1"))


def test_no_file_in_the_package_names_an_issue():
    assert PACKAGE.is_dir() and _files(), "the package's files were not found"
    found = [ref for path in _files() for ref in ticket_references(path)]
    assert found == [], ("ticket references in the package (say the measured reason instead; "
                         "the history belongs in the commit message):\n  " + "\n  ".join(found))
