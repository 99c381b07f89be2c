"""JSON and JSONL input/output for rows and exports: line-numbered reads, atomic writes.

The codec is whileai.core.codec (orjson when installed, the standard library
otherwise, so the choice of codec never changes what can be read); this module
adds what JSONL files need on top: line numbers in errors, exact parsing of
lines holding long integers, and line breaks JSON may leave raw escaped.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict

from whileai.core import codec
from whileai.core.collector import gc_paused  # noqa: F401  (re-exported: the exporter's bulk paths use it)
from whileai.core.errors import RowFormatError

__all__ = [
    "loads",
    "dumps",
    "dumps_bytes",
    "read_jsonl",
    "RowProblem",
    "iter_jsonl",
    "write_jsonl",
    "JsonlWriter",
    "same_file",
    "gc_paused",
    "JSONL_CODEC",
]



class RowProblem(TypedDict):
    """One bad row or line of ``RowFormatError.problems``: the row's index (None for a file line that holds no row),
    its line in the file and the file (None where the rows came from none), and what is wrong."""

    row: int | None
    line: int | None
    path: str | None
    detail: str


_UMASK_LOCK = threading.Lock()

#: The codec in use, for benchmark reports.
JSONL_CODEC = codec.NAME

#: Parse JSON text exactly (whileai.core.codec.loads_exact): tool-call arguments, small texts;
#: files go through ``read_jsonl``.
loads = codec.loads_exact

#: The fastest parser installed, with no fallback and no exactness check (whileai.core.codec.parse_fast).
parse_object_fast = codec.parse_fast

_loads_fast = codec.loads


def _long_number_lines(data: bytes) -> set[int]:
    """1-based numbers of the lines holding a run of 19+ digits (the lines orjson could round)."""
    digits = data.translate(_DIGITS_ONLY)
    found: set[int] = set()
    line, counted, start = 1, 0, 0
    while (pos := digits.find(_LONG_DIGIT_RUN, start)) != -1:
        line += data.count(b"\n", counted, pos)
        counted = pos
        found.add(line)
        end = data.find(b"\n", pos)
        if end == -1:
            break
        start = end
    return found


#: bytes.translate table: digits stay "0", everything else becomes a space
_DIGITS_ONLY = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
#: the shortest digit run that can spell an integer outside orjson's exact range
_LONG_DIGIT_RUN = b"0" * 19


def dumps(obj: Any) -> str:
    """Compact JSON text, non-ASCII kept as is (how tool-call arguments are written)."""
    return codec.dumps(obj, allow_nan=True)


#: Characters that ``str.splitlines()`` (and so many hand-written JSONL readers) treat as
#: line breaks but JSON may leave raw inside a string: written as \u escapes instead.
#: Each with its UTF-8 bytes, their last byte (searched for first) and the escape.
_LINE_BREAKS = (
    (b"\xc2\x85", b"\x85", b"\\u0085"),
    (b"\xe2\x80\xa8", b"\xa8", b"\\u2028"),
    (b"\xe2\x80\xa9", b"\xa9", b"\\u2029"),
)


def dumps_bytes(obj: Any) -> bytes:
    """One JSONL line's bytes (no newline): valid UTF-8, and one line for every line splitter."""
    return _escape_line_breaks(codec.dumps_bytes(obj, allow_nan=True))


def _escape_line_breaks(data: bytes) -> bytes:
    """UTF-8 JSON text with U+0085, U+2028 and U+2029 written as \\u escapes.

    Each character's last byte is looked for first: a one-byte search runs at
    memory speed, where a search for the whole sequence costs as much as orjson
    took to encode the rows. UTF-8 is self-synchronising, so a byte swap is exact.
    """
    if data.isascii():
        return data
    for raw, last, escaped in _LINE_BREAKS:
        if last in data:
            data = data.replace(raw, escaped)
    return data


def jsonl_bytes(rows: list[Any]) -> bytes:
    """The rows as JSONL text, each line as ``dumps_bytes`` writes it, newline-terminated (empty for no rows).

    The same bytes as joining ``dumps_bytes`` of each row: the escaped characters
    never span a newline, so escaping the joined text once is escaping each line.
    """
    if not rows:
        return b""
    dump = codec.fast_dumps
    if dump is not None:
        try:
            lines = [dump(row) for row in rows]
        except TypeError:  # a value orjson refuses: the exact per-row path for all
            lines = [codec.dumps_bytes(row, allow_nan=True) for row in rows]
    else:
        lines = [codec.dumps_bytes(row, allow_nan=True) for row in rows]
    lines.append(b"")
    return _escape_line_breaks(b"\n".join(lines))


def read_jsonl(path: str | os.PathLike, what: str = "row") -> tuple[list[Any], list[int]]:
    """Every JSON value in a JSONL file and the 1-based line it came from. Blank lines are skipped.

    A line that is not JSON, or not a JSON object, raises ``RowFormatError``
    naming the file, the line and what is wrong, all such lines at once.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(_no_such_file(path, what)) from None
    values: list[Any] = []
    lines: list[int] = []
    problems: list[RowProblem] = []
    _parse_block(data, 0, path, what, values, lines, problems)
    if problems:
        raise file_error(path, problems, line_fix(what))
    return values, lines


def iter_jsonl(path: str | os.PathLike, chunk_bytes: int, what: str = "row"):
    """``read_jsonl`` a chunk of whole lines at a time: yields ``(values, lines, problems)`` per chunk.

    A chunk is the lines read until they reach ``chunk_bytes`` (at least one
    line). Line numbers count over the whole file; ``problems`` are the chunk's
    lines that ``read_jsonl`` would refuse, worded the same (raise them with
    ``file_error(path, problems, line_fix(what))``). Only one chunk is held.
    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise FileNotFoundError(_no_such_file(path, what)) from None
    with handle:
        first = 0
        while True:
            block = handle.readlines(chunk_bytes)
            if not block:
                return
            values: list[Any] = []
            lines: list[int] = []
            problems: list[RowProblem] = []
            _parse_block(b"".join(block), first, path, what, values, lines, problems)
            first += len(block)
            del block
            yield values, lines, problems


def line_fix(what: str) -> str:
    return f"each line must hold one JSON object (a {what}); fix or remove these lines"


def _no_such_file(path: Path, what: str) -> str:
    return f"no such file: {str(path)!r}; pass the path of a JSONL file of {what}s"


def _parse_block(data: bytes, first: int, path: Path, what: str, values: list, lines: list, problems: list) -> None:
    """Parse whole lines of JSONL text whose first line is line ``first + 1`` of the file."""
    exact = _long_number_lines(data)
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if not raw or raw.isspace():
            continue
        try:
            value = json.loads(raw) if lineno in exact else _loads_fast(raw)
        except UnicodeDecodeError as exc:
            problems.append(_line_problem(path, first + lineno, f"not UTF-8 text ({exc.reason} at byte {exc.start})"))
            continue
        except ValueError as exc:
            problems.append(_line_problem(path, first + lineno, f"not valid JSON ({_json_reason(exc, raw)})"))
            continue
        if not isinstance(value, dict):
            detail = f"a JSON {_json_type(value)}, but each line must be one JSON object (a {what})"
            problems.append(_line_problem(path, first + lineno, detail))
            continue
        values.append(value)
        lines.append(first + lineno)


def file_error(path: str | os.PathLike[Any], problems: list[RowProblem], fix: str) -> RowFormatError:
    """A RowFormatError listing line problems of one file, the first few spelled out."""
    from whileai.domain.defaults import EXPORT_PROBLEMS_IN_MESSAGE

    shown = [f"  line {p['line']}: {p['detail']}" for p in problems[:EXPORT_PROBLEMS_IN_MESSAGE]]
    more = len(problems) - len(shown)
    if more > 0:
        shown.append(f"  ... and {more} more (see .problems)")
    noun = "line" if len(problems) == 1 else "lines"
    message = f"{str(path)!r}: {len(problems)} bad {noun}; {fix}:\n" + "\n".join(shown)
    return RowFormatError(message, problems)


def _line_problem(path: Path, lineno: int, detail: str) -> RowProblem:
    return {"row": None, "line": lineno, "path": str(path), "detail": detail}


def json_column(exc: ValueError, line: str | bytes) -> tuple[int | None, str]:
    """(the column of the file's line where JSON parsing stopped, what is wrong) for one line's JSON error.

    The line is parsed without its line break, so the column is the file's own (a parser handed the
    newline too would say "line 2 column 1" for a line cut short); past the line's end it says so.
    """
    if not isinstance(exc, json.JSONDecodeError):
        return None, str(exc)
    text = line.rstrip(b"\r\n") if isinstance(line, bytes) else line.rstrip("\r\n")
    column = exc.pos + 1 if exc.lineno == 1 else len(text) + 1
    what = exc.msg + ("" if exc.msg.endswith(" at") else " at") + f" column {column}"
    if exc.pos >= len(text):
        what += "; the line ends there: it is cut short, or one row was split over two lines"
    return column, what


def _json_reason(exc: ValueError, raw: bytes = b"") -> str:
    return json_column(exc, raw)[1]


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    """Write rows as JSONL atomically; returns the number of rows written.

    The rows go to a temporary file in the target's directory, which is synced
    and then renamed over the target, so a crash leaves either the old file or
    the whole new one, never half of it. A symlink at ``path`` is replaced by the
    file, not written through.
    """
    path = Path(path)
    _check_output(path)  # a bad target is refused before any row is encoded
    writer = JsonlWriter(path)
    try:
        writer.write(rows if type(rows) is list else list(rows))
        return writer.commit()
    finally:
        writer.discard()  # a no-op after commit(); removes the temporary file when anything failed


def _check_output(path: Path) -> Path:
    """The folder to write ``path`` in; raises when ``path`` is a folder or its folder does not exist."""
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise IsADirectoryError(f"output {str(path)!r} is a directory; pass a file path such as {str(path / 'rows.jsonl')!r}")
    if not directory.is_dir():
        raise FileNotFoundError(f"the folder of output {str(path)!r} does not exist; create {str(directory)!r} first")
    return directory


class JsonlWriter:
    """An atomic JSONL write a chunk of rows at a time (``write_jsonl`` is one ``write`` and a ``commit``).

    The rows go to a temporary file beside ``path`` as they come; ``commit()``
    syncs it and renames it over ``path``, ``discard()`` removes it (call one of
    them, in a ``finally`` at the latest). When ``path`` cannot be written (a
    folder, a missing or read-only folder) the rows are counted and dropped, and
    ``commit()`` raises what ``write_jsonl`` raises, at the point it would: after
    everything the export checks first.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.rows = 0
        self._handle = None
        self._tmp: str | None = None
        try:
            directory = _check_output(self.path)
            fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        except OSError:
            return  # commit() raises it, after the checks that come first
        self._handle = os.fdopen(fd, "wb")

    def write(self, rows: list[Any]) -> None:
        if self._handle is not None:
            self._handle.write(jsonl_bytes(rows))
        self.rows += len(rows)

    def commit(self) -> int:
        """Sync and rename the file over ``path``; returns the number of rows written."""
        # the handle and the temporary file are set together (neither when the target could not be written)
        if self._handle is None or self._tmp is None:  # the target could not be written when the export began: raise why
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=_check_output(self.path))
            os.close(fd)
            os.unlink(tmp)
            raise FileNotFoundError(
                f"output {str(self.path)!r} could not be written when the export began and can be now; export again"
            )
        try:
            handle = self._handle
            os.fchmod(handle.fileno(), _file_mode(self.path))  # mkstemp makes 0600: the mode open() would give
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            self._handle = None
            os.replace(self._tmp, self.path)
            self._tmp = None
        except BaseException:
            self.discard()
            raise
        return self.rows

    def discard(self) -> None:
        """Remove the temporary file (nothing is renamed); safe to call twice or after ``commit()``."""
        handle, tmp = self._handle, self._tmp
        self._handle = self._tmp = None
        if handle is not None:
            handle.close()
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass


def _file_mode(path: Path) -> int:
    """The mode to give the written file: the replaced file's, else 0666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        pass
    with _UMASK_LOCK:  # os.umask can only be read by setting it
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """True when two paths name one file: the same path, a symlink to it, a hard link, a relative spelling."""
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
    except OSError:
        return False
