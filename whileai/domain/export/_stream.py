"""Exporting a JSONL file of rollout rows a chunk at a time, so memory follows the chunk and not the file.

``export_dataset`` sends a path source here. Each chunk of whole lines
(``defaults.EXPORT_CHUNK_BYTES`` of them, at least one row) is read, checked
against the row contract, converted, gated and written to a temporary file
beside the target before the next is read; the file is renamed over the target
at the end. What
comes out is what the whole-file path in export/__init__.py writes and reports, to the
byte: row numbers count over the whole file, every bad line is listed at once,
nothing is written when a check fails, and the decisions that need the whole
file are taken over the whole file:

- the ``MissingPolicyWarning`` counts rows over the whole file, and is raised
  once the file has been read (before any gate error, as the whole-file path does);
- a TRL file holds one shape. When some rows come out as ``messages`` and some
  as prompt/completion (``weight: 0`` turns in some rows only), every row must
  be prompt/completion; the first pass stops where it sees both and a second
  pass converts the file again with the shape fixed. Only such files are read
  twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whileai.domain.rows import jsonl
from whileai.domain.export import _build, _gate, _shape
from whileai.domain.export._report import TrainingExport
from whileai.core.errors import ExportValidationError
from whileai.domain.rows.rollouts import row_problems

__all__ = ["export_training_file"]

#: what ``rows.check_rows`` tells a file's author to fix (the same words, so the error reads the same)
_ROW_FIX = "each row needs messages (role + content, tool_calls on assistant turns); see docs/rows.md"


@dataclass
class _Pass:
    """One pass's running counts over the file, a chunk added at a time (``_count_chunk``): rows read and written,
    rows given no system prompt or tools, the calls checked and those that do not round-trip, the rows checked for
    leaks and the recitals found, the gates' problems with their lines in the file, the conversion's counts, and
    whether the first row written is prompt/completion (None before one is)."""

    rows_in: int = 0
    rows_out: int = 0
    no_system: int = 0
    no_tools: int = 0
    calls: int = 0
    checked: int = 0
    stats: _build.TrainingCounts | None = None
    first_is_completion: bool | None = None
    invalid: list[_gate.InvalidCall] = field(default_factory=list)
    leaks: list[_gate.Leak] = field(default_factory=list)
    roundtrip_problems: list[_gate.GateProblem] = field(default_factory=list)
    roundtrip_lines: list[int] = field(default_factory=list)
    leak_problems: list[_gate.GateProblem] = field(default_factory=list)
    leak_lines: list[int] = field(default_factory=list)


def export_training_file(
    source: Any,
    output: Any,
    fmt: str,
    system_prompt: str | None,
    tools: list | None,
    mask_mode: str,
    strip_think: bool,
    unroll: bool,
    cap: int | None,
    validate: bool,
    stacklevel: int,
) -> TrainingExport:
    """``export_dataset`` of a JSONL path, a chunk at a time; the same file, report, errors and warnings."""
    from whileai.domain.defaults import EXPORT_CHUNK_BYTES

    path = Path(source)
    try:
        target = _build.target(path, output, ".train.jsonl")
    except (TypeError, ExportValidationError):
        target = None  # raised again once the file is read, where the whole-file path raises it
    mode = _shape.check_mask_mode(mask_mode)
    options = (fmt, system_prompt, tools, mode, strip_think, unroll, cap, validate)
    writer = jsonl.JsonlWriter(target) if target is not None else None
    try:
        state = _one_pass(source, path, writer, options, EXPORT_CHUNK_BYTES, one_shape=False)
        if state is None:  # a TRL file of both shapes: again, every row as prompt/completion
            # only a pass that writes builds rows and so sees their shapes; one_shape=True never returns None
            assert writer is not None and target is not None
            writer.discard()
            writer = jsonl.JsonlWriter(target)
            state = _one_pass(source, path, writer, options, EXPORT_CHUNK_BYTES, one_shape=True)
            assert state is not None
        rows_in = state.rows_in
        _build.warn_missing_counts(
            state.no_system, state.no_tools, rows_in, system_prompt, tools, stacklevel + 1
        )
        if target is None:
            _build.target(path, output, ".train.jsonl")  # raises what it raised above
        report = _training_report(state, target, fmt, mode, strip_think, unroll, cap)
        problems = _located_problems(state)
        leaks = _build.leak_report(state.leaks, state.checked, rows_in)
        report.update({"roundtrip": _roundtrip(state, fmt), "privileged_leaks": leaks, "problems": problems,
                       "validated": bool(validate)})
        if problems and validate:
            raise ExportValidationError(_gate.refusal(problems, fmt), problems, report)
        assert writer is not None  # without a target, _build.target raised above
        report["rows_written"] = writer.commit()
        return report
    finally:
        if writer is not None:
            writer.discard()  # after a commit there is nothing left to remove


def _training_report(state: _Pass, target: Any, fmt: str, mode: str, strip_think: bool, unroll: bool,
                     cap: int | None) -> TrainingExport:
    """The export report's counts and settings from the last pass's ``state``: rows in and out, the format and
    its argument encoding, the mask mode, the conversion options, the stats, and a TRL file's shape."""
    stats = state.stats
    assert stats is not None  # a pass that returns has its counts, an empty build's where it read no rows
    report: TrainingExport = {
        "output": str(target),
        "format": fmt,
        "argument_encoding": _gate.ENCODINGS[fmt],
        "kind": "training",
        "rows_in": state.rows_in,
        "rows_out": state.rows_out,
        "mask_mode": "unrolled" if unroll else mode,
        "strip_think": bool(strip_think),
        "unroll": bool(unroll),
        "max_tool_output_chars": cap,
        "rows_without_tools": state.no_tools,
        **stats,
    }
    if fmt == "trl":
        report["trl_shape"] = "prompt_completion" if state.first_is_completion else "messages"
    return report


def _roundtrip(state: _Pass, fmt: str) -> _gate.RoundtripReport:
    """The report's ``roundtrip``: how many of the written rows' tool calls parse back in ``fmt``, and which not."""
    invalid = state.invalid
    return {
        "format": fmt,
        "encoding": _gate.ENCODINGS[fmt],
        "rows": state.rows_out,
        "calls": state.calls,
        "valid": state.calls - len(invalid),
        "invalid": invalid,
        "ok": not invalid,
    }


def _located_problems(state: _Pass) -> list[_gate.GateProblem]:
    """The gates' problems (round trip, then privileged leaks), each given its line in the file, in row order."""
    problems = state.roundtrip_problems + state.leak_problems
    for problem, line in zip(problems, state.roundtrip_lines + state.leak_lines):
        problem["line"] = line
    problems.sort(key=lambda p: p["row"])
    return problems


def _one_pass(
    source: Any, path: Path, writer: Any, options: tuple, chunk_rows: int, one_shape: bool
) -> _Pass | None:
    """Read, check, convert, gate and write the file a chunk at a time; None when a TRL file turns out to mix shapes.

    Raises ``RowFormatError`` for bad lines (every one in the file, JSON
    problems before contract problems, as ``rows.read_rows`` does) after
    reading to the end. Once a line is bad, or when there is nowhere to write
    (``writer`` None: the target was refused), the rest is only checked.
    """
    fmt, system_prompt, tools, mode, strip_think, unroll, cap, validate = options
    state = _Pass()
    bad_lines: list[jsonl.RowProblem] = []
    bad_rows: list[jsonl.RowProblem] = []
    known_tools: list = []
    shapes = [False, False]  # some row in messages shape, some in prompt/completion shape
    row_path = str(source) if source else None
    for values, lines, problems in jsonl.iter_jsonl(path, chunk_rows, what="rollout row"):
        base = state.rows_in
        state.rows_in += len(values)
        bad_lines.extend(problems)
        if bad_lines:
            continue  # a file with lines that are not JSON objects is refused before any row is checked
        for offset, row in enumerate(values):
            for detail in row_problems(row, known_tools):
                bad_rows.append({"row": base + offset, "line": lines[offset], "path": row_path, "detail": detail})
        if bad_rows:
            continue
        if system_prompt is None:
            state.no_system += sum(1 for r in values if r["messages"][0].get("role") != "system")
        if tools is None:
            state.no_tools += sum(1 for r in values if not r.get("tools"))
        if writer is None:
            continue
        src = _build.Source(rows=values, system_prompt=system_prompt, tools=tools, owned=True)
        built = _build.build_training(src, mode, strip_think, unroll, cap, fmt, start=base, one_shape=one_shape)
        del values, src
        rows = built.rows
        if fmt == "trl" and not one_shape:
            shapes[0] = shapes[0] or any("messages" in r for r in rows)
            shapes[1] = shapes[1] or any("completion" in r for r in rows)
            if shapes[0] and shapes[1]:
                return None
        refused = _count_chunk(state, built, lines, base, fmt)
        if validate and refused:
            writer.discard()  # the export is refused: nothing more goes to disk, the rows are only counted
        writer.write(rows)
    if bad_lines:
        raise jsonl.file_error(path, bad_lines, jsonl.line_fix("rollout row"))
    if bad_rows:
        raise jsonl.file_error(source, bad_rows, _ROW_FIX)
    if state.stats is None:  # no rows: the counts of an empty build
        state.stats = _build.build_training(
            _build.Source(rows=[], system_prompt=system_prompt, tools=tools, owned=True),
            mode, strip_think, unroll, cap, fmt,
        ).stats
    return state


def _count_chunk(state: _Pass, built: _build.Built[_build.TrainingCounts], lines: list[int], base: int,
                 fmt: str) -> bool:
    """Add one built chunk to the pass's counts: its stats, its calls that do not round-trip, its leaks;
    True when it has either (``base`` is the chunk's first row, ``lines`` its rows' lines in the file)."""
    rows, origins = built.rows, built.origins
    if state.first_is_completion is None and rows:
        state.first_is_completion = "completion" in rows[0]
    if state.stats is None:
        state.stats = built.stats
    else:
        state.stats = _added(state.stats, built.stats)
    roundtrip = _gate.roundtrip_report(rows, fmt)
    state.calls += roundtrip["calls"]
    for bad in roundtrip["invalid"]:
        bad["output_row"] = bad["row"] + state.rows_out
        bad["row"] = origins[bad["row"]]
        state.invalid.append(bad)
        state.roundtrip_problems.append(_gate.roundtrip_problem(bad))
        state.roundtrip_lines.append(lines[bad["row"] - base])
    leak_report = built.leaks
    state.checked += leak_report["checked"]
    for leak in leak_report["leaks"]:
        state.leaks.append(leak)
        state.leak_problems.append(_gate.leak_problem(leak))
        state.leak_lines.append(lines[leak["row"] - base])
    state.rows_out += len(rows)
    return bool(roundtrip["invalid"] or leak_report["leaks"])


def _added(total: _build.TrainingCounts, more: _build.TrainingCounts) -> _build.TrainingCounts:
    """``total`` with one more chunk's counts added, key by key, in ``build_training``'s order."""
    return {
        "think_stripped": total["think_stripped"] + more["think_stripped"],
        "tool_output_truncated": total["tool_output_truncated"] + more["tool_output_truncated"],
        "tool_output_chars_cut": total["tool_output_chars_cut"] + more["tool_output_chars_cut"],
        "no_assistant_dropped": total["no_assistant_dropped"] + more["no_assistant_dropped"],
        "unrolled_samples": total["unrolled_samples"] + more["unrolled_samples"],
    }
