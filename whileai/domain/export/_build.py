"""Reading export sources and building rows: sources, targets, the profile warning, training and preference rows.

The public entry points are in export/__init__.py; this module turns what they were
given into rows and counts, and leaves the gate and the write to them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, NotRequired, TypedDict, TypeVar

from whileai.domain.rows import jsonl
from whileai.core.errors import MissingPolicyWarning

from whileai.domain.export import _gate, _shape
from whileai.core.errors import ExportValidationError, RowFormatError
from whileai.domain.rows.rollouts import SimulationData, as_row, check_rows, read_rows, row_problems, with_profile

__all__ = [
    "MissingPolicyWarning",
    "Source",
    "Built",
    "LeakReport",
    "TrainingCounts",
    "PreferenceCounts",
    "resolve",
    "warn_missing_counts",
    "resolve_pairs",
    "target",
    "pair_from_openai",
    "build_training",
    "build_preference",
]


class LeakReport(TypedDict):
    """``leak_report``'s answer, the export report's ``privileged_leaks``: the rows checked, the recitals found,
    and whether the check ran."""

    checked: int  #: rows that carried a privileged block to check against
    could_not_run: int  #: rows without one
    leaks: list[_gate.Leak]  #: ``find_leaks``' recitals, each with its row
    status: str
    note: NotRequired[str]  #: why the check ran on fewer rows than the export holds


class TrainingCounts(_shape.ConversionCounts):
    """``build_training``'s counts, the training export report's: the conversion's, the rows left out for having
    no assistant turn to train, and the rows ``unroll`` made (0 without it)."""

    no_assistant_dropped: int
    unrolled_samples: int


class PreferenceCounts(_shape.ConversionCounts):
    """``build_preference``'s counts, the preference export report's: the conversion's and the pairs left out (ties,
    a side with no completion, sides with different prompts)."""

    ties_dropped: int
    no_completion_dropped: int
    prompt_mismatch_dropped: int


#: a build's counts: TrainingCounts or PreferenceCounts
CountsT = TypeVar("CountsT", TrainingCounts, PreferenceCounts)


@dataclass(frozen=True)
class Source:
    """What an export reads: its rows (or pairs), where they came from, and the policy to give them."""

    rows: list[Any]
    lines: list[int] | None = None  #: each row's line in its file (a file source)
    path: Path | None = None  #: the file the rows came from
    system_prompt: str | None = None
    tools: list[Any] | None = None
    rows_without_tools: int = 0  #: rows that carry no tools and that nothing (``tools=``) gives any
    owned: bool = False  #: the rows were read here, so building may change them in place


@dataclass(frozen=True)
class Built(Generic[CountsT]):
    """Rows built for an export: each one's origin (its source row), the conversion's counts and the leak report."""

    rows: list[dict]
    origins: list[int]
    stats: CountsT
    leaks: LeakReport  #: the export report carries it as it is
    mismatches: list[_gate.GateProblem] = field(default_factory=list)  #: preference pairs whose sides' prompts differ


# ---------------------------------------------------------------------------
# Sources and targets
# ---------------------------------------------------------------------------


def resolve(source: Any, system_prompt: str | None, tools: list | None, stacklevel: int) -> Source:
    """Rows (unscrubbed), their file lines, the source path and the profile to apply."""
    if isinstance(source, SimulationData):
        return Source(
            rows=source.trajectories,
            path=source.path,
            system_prompt=source.system_prompt if system_prompt is None else system_prompt,
            tools=source.tools if tools is None else tools,
            rows_without_tools=sum(1 for r in source.trajectories if not r.get("tools")) if tools is None else 0,
        )
    lines: list[int] | None = None
    if isinstance(source, (str, os.PathLike)):
        rows, lines = read_rows(source)
    elif isinstance(source, Iterable) and not isinstance(source, (bytes, Mapping)):
        rows = [as_row(item) for item in source]
        check_rows(rows)
    else:
        raise TypeError(
            f"source must be a SimulationData, a list of rows or trajectories, or a JSONL path; "
            f"got {type(source).__name__}"
        )
    no_tools = warn_missing_policy(rows, system_prompt, tools, stacklevel + 1)
    is_file = isinstance(source, (str, os.PathLike))
    return Source(rows=rows, lines=lines, path=Path(source) if is_file else None, system_prompt=system_prompt,
                  tools=tools, rows_without_tools=no_tools, owned=is_file)


def warn_missing_policy(rows: list[dict], system_prompt: Any, tools: Any, stacklevel: int) -> int:
    """``MissingPolicyWarning`` when rows lack a system message or tools and none were passed; how many rows carry
    no tools that nothing (``tools=``) gives them."""
    no_system = sum(1 for r in rows if r["messages"][0].get("role") != "system") if system_prompt is None else 0
    no_tools = sum(1 for r in rows if not r.get("tools")) if tools is None else 0
    warn_missing_counts(no_system, no_tools, len(rows), system_prompt, tools, stacklevel + 1)
    return no_tools


def warn_missing_counts(
    no_system: int, no_tools: int, total: int, system_prompt: Any, tools: Any, stacklevel: int
) -> None:
    """``warn_missing_policy`` from counts already taken: rows without a system message, rows without tools."""
    missing = []
    if system_prompt is None and no_system:
        missing.append(f"{no_system} of {total} rows have no system message and no system_prompt= was given")
    if tools is None and no_tools:
        missing.append(f"{no_tools} of {total} rows have no tools and no tools= was given")
    if missing:
        warnings.warn(
            "; ".join(missing) + ". A row exported without its policy trains an agent that never saw its rules: "
            "pass system_prompt= and tools= (tools=[] for a policy without tools), or export the SimulationData.",
            MissingPolicyWarning,
            stacklevel=stacklevel,
        )


def target(path: Path | None, output: Any, suffix: str) -> Path:
    """Where to write: ``output``, else ``<name><suffix>`` beside the source file ``path``; never the source itself."""
    if output is None:
        if path is None:
            raise ValueError(
                f"no output given and the source is not a file; pass output= (e.g. 'rows{suffix}'), "
                "or export a JSONL path to write beside it"
            )
        out = path.with_name(path.name.removesuffix(".jsonl") + suffix)
    elif isinstance(output, (str, os.PathLike)):
        out = Path(output)
    else:
        raise TypeError(f"output must be a file path, got {type(output).__name__}")
    if path is not None and jsonl.same_file(out, path):
        problem = {"row": None, "kind": "output_is_source", "detail": f"{str(out)!r} is the source {str(path)!r}"}
        raise ExportValidationError(
            f"refusing to write {str(out)!r}: it is the source file {str(path)!r} (same file through a link or "
            f"another spelling of the path), and an export never overwrites its source; pass another output=",
            [problem],
            {"output": str(out)},
        )
    return out


def resolve_pairs(
    pairs: Any, system_prompt: str | None, tools: list | None, warn: bool = True, stacklevel: int = 3
) -> Source:
    """Pairs from a list or a JSONL file, every side checked against the row contract."""
    if isinstance(pairs, (str, os.PathLike)):
        rows, lines = jsonl.read_jsonl(pairs, what="preference pair")
        src = Source(rows=rows, lines=lines, path=Path(pairs), system_prompt=system_prompt, tools=tools)
    elif isinstance(pairs, Iterable) and not isinstance(pairs, (bytes, Mapping)):
        src = Source(rows=list(pairs), system_prompt=system_prompt, tools=tools)
    else:
        raise TypeError(f"pairs must be a list of {{'chosen', 'rejected'}} pairs or a JSONL path; got {type(pairs).__name__}")
    problems: list[jsonl.RowProblem] = []
    sides = []
    for index, pair in enumerate(src.rows):
        if not isinstance(pair, Mapping) or "chosen" not in pair or "rejected" not in pair:
            problems.append(pair_problem(src, index, "a pair must be {'chosen': row, 'rejected': row, 'winner'?: ...}"))
            continue
        for side in ("chosen", "rejected"):
            row = as_row(pair[side])
            for detail in row_problems(row):
                problems.append(pair_problem(src, index, f"{side}: {detail}"))
            sides.append(row)
    if problems:
        fix = "each side is a rollout row or a message list; see docs/rows.md"
        if src.path is not None:
            raise jsonl.file_error(src.path, problems, fix)
        from whileai.domain.defaults import EXPORT_PROBLEMS_IN_MESSAGE

        shown = [f"  pair {p['row']}: {p['detail']}" for p in problems[:EXPORT_PROBLEMS_IN_MESSAGE]]
        if len(problems) > len(shown):
            shown.append(f"  ... and {len(problems) - len(shown)} more (see .problems)")
        bad = len({p["row"] for p in problems})
        raise RowFormatError(f"{bad} pair(s) are not valid; {fix}:\n" + "\n".join(shown), problems)
    if warn:
        warn_missing_policy(sides, system_prompt, tools, stacklevel + 1)
    return src


def pair_problem(src: Source, index: int, detail: str) -> jsonl.RowProblem:
    line = src.lines[index] if src.lines else None
    return {"row": index, "line": line, "path": str(src.path) if src.path else None, "detail": detail}


def pair_from_openai(row: Any) -> Any:
    """A pair from an OpenAI-shape preference row (prompt text + whole conversations); pairs pass unchanged."""
    if isinstance(row, Mapping) and isinstance(row.get("prompt"), str):
        return {k: v for k, v in row.items() if k != "prompt"}
    return row


# ---------------------------------------------------------------------------
# Building rows
# ---------------------------------------------------------------------------


def new_stats() -> _shape.ConversionCounts:
    return {"think_stripped": 0, "tool_output_truncated": 0, "tool_output_chars_cut": 0}


def build_training(
    src: Source,
    mask_mode: Any,
    strip_think: bool,
    unroll: bool,
    cap: Any,
    fmt: str = "openai",
    start: int = 0,
    one_shape: bool | None = None,
) -> Built[TrainingCounts]:
    """Training rows of ``src.rows`` and each one's origin (the index of its source row, from ``start``).

    ``one_shape`` is for TRL rows built a chunk at a time: None turns every row
    to prompt/completion when the rows mix the two shapes (a file holds one),
    True does so always, False never (the caller decides for the whole file).
    """
    mode = _shape.check_mask_mode(mask_mode)
    cap = _shape.check_cap(cap)
    system_prompt, tools = src.system_prompt, src.tools
    copy_all = not src.owned
    to_dict = fmt == "trl"
    stats: TrainingCounts = {**new_stats(), "no_assistant_dropped": 0, "unrolled_samples": 0}
    dropped = 0
    out: list[dict] = []
    origins: list[int] = []
    leaks: list[_gate.Leak] = []
    checked = 0
    for index, raw in enumerate(src.rows, start):
        row = with_profile(raw, system_prompt, tools)
        before = (stats["tool_output_truncated"], stats["tool_output_chars_cut"])
        messages, assistant_at, ask = _shape.convert_messages(
            row["messages"], strip_think=strip_think, cap=cap, to_dict=to_dict, stats=stats, copy_all=copy_all
        )
        privileged = raw.get("privileged")
        if privileged is not None:
            checked += 1
            for leak in _gate.find_leaks(privileged, messages, raw.get("gold")):
                leaks.append({"row": index, **leak})
        counters = None
        if cap is not None:
            counters = {
                "tool_output_truncated": stats["tool_output_truncated"] - before[0],
                "tool_output_chars_cut": stats["tool_output_chars_cut"] - before[1],
            }
        samples = _shape.training_samples(
            row, messages, source=raw, fmt=fmt, mask_mode=mode, unroll=unroll, index=index, counters=counters,
            assistant_at=assistant_at, ask=ask,
        )
        if not samples:
            dropped += 1
        elif len(samples) == 1:
            out.append(samples[0])
            origins.append(index)
        else:
            out.extend(samples)
            origins.extend([index] * len(samples))
    if one_shape is None:
        one_shape = fmt == "trl" and any("messages" in r for r in out) and any("completion" in r for r in out)
    if one_shape and out:
        out, origins = _shape.to_prompt_completion(out, origins)  # one shape per file
    stats["no_assistant_dropped"] = dropped
    stats["unrolled_samples"] = len(out) if unroll else 0
    return Built(rows=out, origins=origins, stats=stats, leaks=leak_report(leaks, checked, len(src.rows)))


def build_preference(src: Source, fmt: str, drop_ties: bool, strip_think: bool, cap: int | None
                     ) -> Built[PreferenceCounts]:
    to_dict = fmt == "trl"
    stats: PreferenceCounts = {**new_stats(), "ties_dropped": 0, "no_completion_dropped": 0,
                               "prompt_mismatch_dropped": 0}
    out: list[dict] = []
    origins: list[int] = []
    leaks: list[_gate.Leak] = []
    mismatches: list[_gate.GateProblem] = []
    checked = considered = 0
    for index, pair in enumerate(src.rows):
        if pair.get("winner") == "tie" and drop_ties:
            stats["ties_dropped"] += 1
            continue
        sides = {}
        for side in ("chosen", "rejected"):
            raw = as_row(pair[side])
            row = with_profile(raw, src.system_prompt, src.tools)
            messages, _, _ = _shape.convert_messages(
                row["messages"], strip_think=strip_think, cap=cap, to_dict=to_dict, stats=stats
            )
            sides[side] = (raw, row, messages)
        cut = {side: _shape.split_prompt(m) for side, (_, _, m) in sides.items()}
        if any(cut[side] >= len(sides[side][2]) for side in sides):
            stats["no_completion_dropped"] += 1
            continue
        prompts = {side: sides[side][2][: cut[side]] for side in sides}
        if _shape.comparable(prompts["chosen"]) != _shape.comparable(prompts["rejected"]):
            mismatches.append({"row": index, "kind": "prompt_mismatch",
                               "detail": "chosen and rejected start from different prompts; pair rows of one task"})
            continue
        considered += 1
        privileged = [sides[s][0].get("privileged") for s in sides if sides[s][0].get("privileged") is not None]
        if privileged:
            checked += 1
            for side in sides:
                for secret in privileged:
                    for leak in _gate.find_leaks(secret, sides[side][2], sides[side][0].get("gold")):
                        leaks.append({"row": index, "side": side, **leak})
        tools = sides["chosen"][1].get("tools") or sides["rejected"][1].get("tools")
        line: dict[str, Any]
        if fmt == "trl":
            line = {"prompt": prompts["chosen"], "chosen": sides["chosen"][2][cut["chosen"]:],
                    "rejected": sides["rejected"][2][cut["rejected"]:]}
        else:
            line = {"prompt": _shape.ask_text(prompts["chosen"]), "chosen": sides["chosen"][2],
                    "rejected": sides["rejected"][2]}
        if tools:
            line["tools"] = tools
        out.append(line)
        origins.append(index)
    stats["prompt_mismatch_dropped"] = len(mismatches)
    return Built(rows=out, origins=origins, stats=stats, mismatches=mismatches,
                 leaks=leak_report(leaks, checked, considered))


def leak_report(leaks: list[_gate.Leak], checked: int, total: int) -> LeakReport:
    report: LeakReport = {"checked": checked, "could_not_run": total - checked, "leaks": leaks, "status": "ran"}
    if total and not checked:
        report["status"] = "could not run"
        report["note"] = (
            "no row carried a privileged block: rows that came through rows(), save() or a file are already "
            "scrubbed; pass the SimulationData or its trajectories to check for leaks"
        )
    elif checked < total:
        report["status"] = "ran on rows with a privileged block"
        report["note"] = f"{total - checked} row(s) carry no privileged block, so the check could not run on them"
    return report
