"""Rollouts to training files: SFT rows, preference pairs, TRL's shapes, and the gate in front of them.

Two row shapes come out, picked with ``format``:

- ``"openai"`` (the default), the OpenAI chat-completions wire row: the whole
  ``messages`` list with ``function.arguments`` as JSON strings, the function
  schemas under ``tools``, the ask as text under ``prompt``, and the row's
  metadata (reward, passed, gold, markers, task key, sampling). Each assistant
  turn carries ``weight`` 1 or 0 (OpenAI fine-tuning's field) saying whether it
  is trained under the mask mode.
- ``"trl"``: what TRL's trainers load as conversational. SFT rows are
  ``{"messages": [...], "tools": [...], "prompt_text": ...}`` with arguments as
  dicts, trained with ``SFTConfig(assistant_only_loss=True)``. There is no
  ``prompt`` key: TRL decides "conversational?" from the column set, and a
  prompt string beside the messages makes it skip the chat template and train
  on the bare ask, without an error. When only some assistant turns train
  (``mask_mode="final"``, ``unroll=True``, or ``weight: 0`` turns), a
  messages-only row cannot say so, and every row becomes TRL's conversational
  prompt/completion pair instead (``{"prompt": [...context], "completion":
  [the trained turn], ...}``), which TRL masks to the completion.
  Preference rows are TRL's conversational triple: ``prompt`` is the messages
  up to the first assistant turn, ``chosen``/``rejected`` the completions only.

Loading the files: ``datasets.load_dataset("json", data_files=...)`` reads every
exported file, keeping argument dicts whole (no null-filled keys) but rounding
floats to 10 decimal places on the way (datasets 5.2's ``Json`` type).
``datasets.Dataset.from_list`` is worse: it fills every tool-call argument dict
with the keys of all the others (``{"value": 99}`` comes back as ``{"city":
None, "value": 99}``). ``to_hf_dataset(rows)`` builds a Dataset that gives every
row back exactly; hand that to TRL's trainers.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import _export_gate, _export_io, _export_shape
from .errors import ExportValidationError, RowFormatError
from .rows import SimulationData, as_row, check_rows, read_rows, row_problems, with_profile

__all__ = [
    "training_rows",
    "loss_mask",
    "export_dataset",
    "export_training",
    "export_preference",
    "to_trl",
    "tool_call_roundtrip",
    "to_hf_dataset",
    "MissingPolicyWarning",
]


class MissingPolicyWarning(UserWarning):
    """Rows go out without the system prompt or tools the policy was given."""


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def loss_mask(row: Mapping[str, Any] | list[Mapping[str, Any]], mask_mode: str = "assistant") -> list[int]:
    """Per message, 1 when it carries loss and 0 when it does not.

    ``"assistant"`` trains every assistant turn (the multi-turn default);
    ``"final"`` only the last one, for conversations whose earlier agent turns
    were scripted or came from another policy. System, user and tool messages
    are always 0: tool output is the environment speaking, and training on it
    teaches the model to invent tool results. An assistant turn with
    ``weight: 0`` is never trained.

        >>> loss_mask({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
        [0, 1]
    """
    mode = _export_shape.check_mask_mode(mask_mode)
    messages = row.get("messages") if isinstance(row, Mapping) else row
    problems = row_problems({"messages": messages})
    if problems:
        raise RowFormatError(f"loss_mask needs a row or a list of messages: {problems[0]}", [])
    return _export_shape.assistant_bits(messages, mode)


def training_rows(
    source: Any,
    system_prompt: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    mask_mode: str = "assistant",
    strip_think: bool = True,
    unroll: bool = False,
    max_tool_output_chars: int | None = None,
) -> list[dict[str, Any]]:
    """Rollouts as OpenAI-wire training rows, privileged block removed.

    ``source`` is a SimulationData (its profile supplies the system prompt and
    tools), a list of rows or trajectories, or a JSONL path; for lists and paths
    pass ``system_prompt=`` and ``tools=`` (``tools=[]`` for a policy without
    tools), or a ``MissingPolicyWarning`` says the policy's rules are missing.

    ``mask_mode`` picks the trained assistant turns (see ``loss_mask``); each
    assistant turn gets ``weight`` 1 or 0. ``strip_think`` removes ``<think>``
    blocks and ``reasoning_content`` from assistant turns. ``unroll=True`` makes
    one row per assistant turn, ending at that turn and training only it, with
    ``unroll`` = {turn, turns} and ``lineage.unrolled_from`` = {prompt_hash,
    rollout_index} and no group fields; mask_mode is then ignored.
    ``max_tool_output_chars`` cuts longer tool outputs and appends
    ``[... N chars of tool output truncated]``, counting per row in
    ``tool_output_truncated`` and ``tool_output_chars_cut``. Rows with no
    trained assistant turn are left out with a warning.

        rows = training_rows(data, mask_mode="final")
    """
    src = _resolve(source, system_prompt, tools, stacklevel=3)
    built = _build_training(src, mask_mode, strip_think, unroll, max_tool_output_chars)
    if built["stats"]["no_assistant_dropped"]:
        warnings.warn(
            f"{built['stats']['no_assistant_dropped']} row(s) have no assistant turn to train and were left out",
            stacklevel=2,
        )
    return built["rows"]


def export_dataset(
    source: Any,
    output: str | os.PathLike | None = None,
    *,
    format: str = "openai",
    system_prompt: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    mask_mode: str = "assistant",
    strip_think: bool = True,
    unroll: bool = False,
    max_tool_output_chars: int | None = None,
    validate: bool = True,
) -> dict[str, Any]:
    """Write ``training_rows(source, ...)`` as JSONL and return a report. Never overwrites the source.

    ``export_training`` is this same function under its older name. With a path
    source (or data read by ``SimulationData.load``) and no ``output``, writes
    ``<name>.train.jsonl`` beside it. The write is atomic: a crash leaves no
    half file.

    ``validate=True`` raises ``ExportValidationError`` listing every offending
    row when a tool call's arguments do not round-trip in the format's encoding
    (see ``tool_call_roundtrip``) or an assistant turn recites the row's
    privileged block; nothing is written. ``validate=False`` writes anyway and
    the report lists the same problems. The leak check reads the privileged
    block before the scrub, so pass the SimulationData or its trajectories: rows
    that came through ``rows()``, ``save()`` or a file carry none, and
    ``report["privileged_leaks"]`` says the check could not run for them.

    ``format="openai"`` writes the wire rows; ``format="trl"`` TRL's shape (see
    the module docstring). The report names the format and the argument
    encoding the gate checked.

        report = export_dataset(data, "train.jsonl", format="trl")
    """
    fmt = _export_gate.check_format(format)
    src = _resolve(source, system_prompt, tools, stacklevel=3)
    target = _target(src, output, ".train.jsonl")
    built = _build_training(src, mask_mode, strip_think, unroll, max_tool_output_chars, fmt)
    rows, origins = built["rows"], built["origins"]
    report = {
        "output": str(target),
        "format": fmt,
        "argument_encoding": _export_gate.ENCODINGS[fmt],
        "kind": "training",
        "rows_in": len(src["rows"]),
        "rows_out": len(rows),
        "mask_mode": "unrolled" if unroll else _export_shape.check_mask_mode(mask_mode),
        "strip_think": bool(strip_think),
        "unroll": bool(unroll),
        "max_tool_output_chars": max_tool_output_chars,
        **built["stats"],
    }
    if fmt == "trl":
        report["trl_shape"] = "prompt_completion" if rows and "completion" in rows[0] else "messages"
    return _gate_and_write(rows, origins, src, built["leaks"], fmt, target, validate, report)


#: The older name of ``export_dataset``: the same function object, kept so existing code keeps working.
export_training = export_dataset


def export_preference(
    pairs: Any,
    output: str | os.PathLike | None = None,
    *,
    format: str = "openai",
    drop_ties: bool = True,
    validate: bool = True,
    system_prompt: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    strip_think: bool = True,
    max_tool_output_chars: int | None = None,
) -> dict[str, Any]:
    """Write preference pairs as JSONL and return a report. Never overwrites the source.

    ``pairs`` are ``{"chosen": row, "rejected": row, "winner"?: "chosen"|"tie"}``
    (from ``ScoredData.select_for_preference()`` / ``build_preference_pairs``;
    a side may also be a bare message list), or a JSONL path of them (default
    output ``<name>.preference.jsonl`` beside it).

    ``format="openai"`` lines are ``{"prompt": "<the ask>", "chosen": [...],
    "rejected": [...]}`` with whole conversations and arguments as JSON
    strings. TRL cannot load that shape (``maybe_apply_chat_template`` either
    raises ``TypeError: string indices must be integers`` or treats the row as
    plain text, depending on the hash seed), so pass ``format="trl"`` for a TRL
    trainer: ``prompt`` is the messages up to the first assistant turn,
    ``chosen``/``rejected`` the completions only, arguments as dicts.

    Ties are left out unless ``drop_ties=False`` (``ties_dropped``); pairs whose
    chosen or rejected side has no completion after the prompt are left out
    (``no_completion_dropped``). The gate checks both sides, as in
    ``export_dataset``; pairs whose two sides have different prompts are gate
    problems too.

        report = export_preference(pairs, "dpo.jsonl", format="trl")
    """
    fmt = _export_gate.check_format(format)
    src = _resolve_pairs(pairs, system_prompt, tools)
    target = _target(src, output, ".preference.jsonl")
    cap = _export_shape.check_cap(max_tool_output_chars)
    built = _build_preference(src, fmt, drop_ties, strip_think, cap)
    report = {
        "output": str(target),
        "format": fmt,
        "argument_encoding": _export_gate.ENCODINGS[fmt],
        "kind": "preference",
        "pairs_in": len(src["rows"]),
        "pairs_out": len(built["rows"]),
        "drop_ties": bool(drop_ties),
        "strip_think": bool(strip_think),
        "max_tool_output_chars": cap,
        **built["stats"],
    }
    return _gate_and_write(
        built["rows"], built["origins"], src, built["leaks"], fmt, target, validate, report, built["mismatches"]
    )


def to_trl(rows: Iterable[Any], kind: str = "training") -> list[dict[str, Any]]:
    """Rows in TRL's shape, for callers that already hold them (same as ``format="trl"`` on the exporters).

    ``kind="training"`` reshapes SFT rows (from ``training_rows`` or raw rollout
    rows) into conversational SFT rows; ``kind="preference"`` reshapes pairs
    (``{"chosen": row, "rejected": row}``) or OpenAI-shape preference rows into
    TRL's prompt/chosen/rejected triple. Privileged blocks are removed; ties and
    pairs without a completion after the prompt are left out. Nothing is
    validated: run ``tool_call_roundtrip(rows, format="trl")`` on the result.

        dpo_rows = to_trl(pairs, kind="preference")
    """
    if kind == "training":
        rows = [as_row(row) for row in rows]
        check_rows(rows)
        wire = [with_profile(row, None, None) for row in rows]
        out, _ = _export_shape.trl_training_rows(wire, list(range(len(wire))), None)
        return out
    if kind == "preference":
        src = _resolve_pairs([_pair_from_openai(row) for row in rows], None, None, warn=False)
        return _build_preference(src, "trl", True, False, None)["rows"]
    raise ValueError(f"kind={kind!r} is not a TRL shape; accepted: 'training' (SFT rows) or 'preference' (DPO pairs)")


def tool_call_roundtrip(rows: Iterable[Any], format: str = "openai") -> dict[str, Any]:
    """Check that every tool call's arguments round-trip to structured arguments in the format's encoding.

    ``format="openai"`` (encoding ``"json_string"``): arguments must be a JSON
    string that parses back to an object. Un-parseable strings get re-quoted by
    chat templates and teach the model to emit string-wrapped arguments, which
    then spiral on tool rejections. ``format="trl"`` (encoding ``"dict"``):
    arguments must already be dicts; a JSON string is valid wire and still wrong
    for a chat template, which renders it quoted twice. Invalid, and named: a
    double-encoded string, a string that is not JSON, a JSON array or scalar, a
    dict where the wire needs a string, and (trl) a JSON string where a dict
    belongs. Every conversation key is checked (messages, prompt, completion,
    chosen, rejected).

    Returns ``{"format", "encoding", "rows", "calls", "valid", "invalid": [{"row",
    "field", "message", "call", "id", "name", "arguments", "problem"}], "ok"}``.

        report = tool_call_roundtrip(rows, format="trl")
        assert report["ok"], report["invalid"]
    """
    return _export_gate.roundtrip_report(list(rows), format)


def to_hf_dataset(rows: Iterable[Mapping[str, Any]]):
    """A ``datasets.Dataset`` that gives every row back exactly, tool-call argument dicts included.

    ``datasets`` cannot hold tool calls exactly on its own (measured with
    datasets 5.2): ``Dataset.from_list`` takes its columns from the first row
    and fills every struct with the keys of all the others (``{"value": 99}``
    beside ``{"city": "Paris"}`` comes back as ``{"city": None, "value": 99}``,
    and a chat template renders the invented keys); its ``Json`` type
    (``on_mixed_types="use_json"``, and what ``load_dataset("json")`` uses for
    mixed structures) keeps the keys but writes floats with 10 decimal places
    (``1e-11`` becomes ``0.0``), parses some 16-17 digit floats one unit off,
    and double-encodes integers past 64 bits.

    Here every column holding lists or dicts (messages, prompt, completion,
    chosen, rejected, tools, metadata) is stored as exact JSON text and decoded
    back on access by the dataset's transform, which ``map``, iteration and
    indexing all apply, so TRL's trainers see plain lists of dicts. Scalar
    columns stay native. The text is what ``to_json``/``to_pandas`` see: write
    files with ``export_dataset``/``export_preference`` instead.

        ds = to_hf_dataset(read_rows_or_to_trl_output)      # then SFTTrainer(train_dataset=ds, ...)
    """
    import datasets

    rows = [row if isinstance(row, Mapping) else dict(row) for row in rows]
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    table: dict[str, list] = {}
    encoded: list[str] = []
    for column in columns:
        values = [row.get(column) for row in rows]
        kinds = {type(v) for v in values if v is not None}
        native = len(kinds) <= 1 and kinds <= {str, bool, int, float}
        if native and kinds == {int}:
            native = all(v is None or -(2**63) <= v < 2**63 for v in values)
        if native:
            table[column] = values
        else:
            table[column] = [None if v is None else _export_io.dumps(v) for v in values]
            encoded.append(column)
    dataset = datasets.Dataset.from_dict(table)
    return dataset.with_transform(_JsonColumns(encoded)) if encoded else dataset


class _JsonColumns:
    """The dataset transform that decodes the JSON-text columns of ``to_hf_dataset``."""

    def __init__(self, columns: list[str]):
        self.columns = list(columns)

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        for column in self.columns:
            if column in batch:
                batch[column] = [_export_io.loads(v) if isinstance(v, str) else v for v in batch[column]]
        return batch


# ---------------------------------------------------------------------------
# Sources and targets
# ---------------------------------------------------------------------------


def _resolve(source: Any, system_prompt: str | None, tools: list | None, stacklevel: int) -> dict[str, Any]:
    """Rows (unscrubbed), their file lines, the source path and the profile to apply."""
    if isinstance(source, SimulationData):
        return {
            "rows": source.trajectories,
            "lines": None,
            "path": source.path,
            "system_prompt": source.system_prompt if system_prompt is None else system_prompt,
            "tools": source.tools if tools is None else tools,
        }
    if isinstance(source, (str, os.PathLike)):
        rows, lines = read_rows(source)
        src = {"rows": rows, "lines": lines, "path": Path(source), "owned": True}
    elif isinstance(source, Iterable) and not isinstance(source, (bytes, Mapping)):
        rows = [as_row(item) for item in source]
        check_rows(rows)
        src = {"rows": rows, "lines": None, "path": None}
    else:
        raise TypeError(
            f"source must be a SimulationData, a list of rows or trajectories, or a JSONL path; "
            f"got {type(source).__name__}"
        )
    _warn_missing_policy(src["rows"], system_prompt, tools, stacklevel + 1)
    src.update(system_prompt=system_prompt, tools=tools)
    return src


def _warn_missing_policy(rows: list[dict], system_prompt: Any, tools: Any, stacklevel: int) -> None:
    missing = []
    if system_prompt is None:
        bare = sum(1 for r in rows if r["messages"][0].get("role") != "system")
        if bare:
            missing.append(f"{bare} of {len(rows)} rows have no system message and no system_prompt= was given")
    if tools is None:
        bare = sum(1 for r in rows if not r.get("tools"))
        if bare:
            missing.append(f"{bare} of {len(rows)} rows have no tools and no tools= was given")
    if missing:
        warnings.warn(
            "; ".join(missing) + ". A row exported without its policy trains an agent that never saw its rules: "
            "pass system_prompt= and tools= (tools=[] for a policy without tools), or export the SimulationData.",
            MissingPolicyWarning,
            stacklevel=stacklevel,
        )


def _target(src: dict, output: Any, suffix: str) -> Path:
    path = src.get("path")
    if output is None:
        if path is None:
            raise ValueError(
                f"no output given and the source is not a file; pass output= (e.g. 'rows{suffix}'), "
                "or export a JSONL path to write beside it"
            )
        target = path.with_name(path.name.removesuffix(".jsonl") + suffix)
    elif isinstance(output, (str, os.PathLike)):
        target = Path(output)
    else:
        raise TypeError(f"output must be a file path, got {type(output).__name__}")
    if path is not None and _export_io.same_file(target, path):
        problem = {"row": None, "kind": "output_is_source", "detail": f"{str(target)!r} is the source {str(path)!r}"}
        raise ExportValidationError(
            f"refusing to write {str(target)!r}: it is the source file {str(path)!r} (same file through a link or "
            f"another spelling of the path), and an export never overwrites its source; pass another output=",
            [problem],
            {"output": str(target)},
        )
    return target


def _resolve_pairs(pairs: Any, system_prompt: str | None, tools: list | None, warn: bool = True) -> dict[str, Any]:
    if isinstance(pairs, (str, os.PathLike)):
        rows, lines = _export_io.read_jsonl(pairs, what="preference pair")
        src = {"rows": rows, "lines": lines, "path": Path(pairs)}
    elif isinstance(pairs, Iterable) and not isinstance(pairs, (bytes, Mapping)):
        src = {"rows": list(pairs), "lines": None, "path": None}
    else:
        raise TypeError(f"pairs must be a list of {{'chosen', 'rejected'}} pairs or a JSONL path; got {type(pairs).__name__}")
    problems = []
    sides = []
    for index, pair in enumerate(src["rows"]):
        if not isinstance(pair, Mapping) or "chosen" not in pair or "rejected" not in pair:
            problems.append(_pair_problem(src, index, "a pair must be {'chosen': row, 'rejected': row, 'winner'?: ...}"))
            continue
        for side in ("chosen", "rejected"):
            row = as_row(pair[side])
            for detail in row_problems(row):
                problems.append(_pair_problem(src, index, f"{side}: {detail}"))
            sides.append(row)
    if problems:
        fix = "each side is a rollout row or a message list; see docs/rows.md"
        if src["path"] is not None:
            raise _export_io.file_error(src["path"], problems, fix)
        raise RowFormatError(
            f"{len({p['row'] for p in problems})} pair(s) are not valid; {fix}:\n"
            + "\n".join(f"  pair {p['row']}: {p['detail']}" for p in problems[:10]),
            problems,
        )
    if warn:
        _warn_missing_policy(sides, system_prompt, tools, 4)
    src.update(system_prompt=system_prompt, tools=tools)
    return src


def _pair_problem(src: dict, index: int, detail: str) -> dict[str, Any]:
    line = src["lines"][index] if src["lines"] else None
    return {"row": index, "line": line, "path": str(src["path"]) if src["path"] else None, "detail": detail}


def _pair_from_openai(row: Any) -> Any:
    """A pair from an OpenAI-shape preference row (prompt text + whole conversations); pairs pass unchanged."""
    if isinstance(row, Mapping) and isinstance(row.get("prompt"), str):
        return {k: v for k, v in row.items() if k != "prompt"}
    return row


# ---------------------------------------------------------------------------
# Building rows
# ---------------------------------------------------------------------------


def _new_stats() -> dict[str, int]:
    return {"think_stripped": 0, "tool_output_truncated": 0, "tool_output_chars_cut": 0}


def _build_training(
    src: dict, mask_mode: Any, strip_think: bool, unroll: bool, cap: Any, fmt: str = "openai"
) -> dict[str, Any]:
    mode = _export_shape.check_mask_mode(mask_mode)
    cap = _export_shape.check_cap(cap)
    system_prompt, tools = src["system_prompt"], src["tools"]
    copy_all = not src.get("owned", False)
    to_dict = fmt == "trl"
    stats = _new_stats()
    dropped = 0
    out: list[dict] = []
    origins: list[int] = []
    leaks: list[dict] = []
    checked = 0
    for index, raw in enumerate(src["rows"]):
        row = with_profile(raw, system_prompt, tools)
        before = (stats["tool_output_truncated"], stats["tool_output_chars_cut"])
        messages, assistant_at, ask = _export_shape.convert_messages(
            row["messages"], strip_think=strip_think, cap=cap, to_dict=to_dict, stats=stats, copy_all=copy_all
        )
        privileged = raw.get("privileged")
        if privileged is not None:
            checked += 1
            for leak in _export_gate.find_leaks(privileged, messages, raw.get("gold")):
                leaks.append({"row": index, **leak})
        counters = None
        if cap is not None:
            counters = {
                "tool_output_truncated": stats["tool_output_truncated"] - before[0],
                "tool_output_chars_cut": stats["tool_output_chars_cut"] - before[1],
            }
        samples = _export_shape.training_samples(
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
    if fmt == "trl" and out and any("messages" in r for r in out) and any("completion" in r for r in out):
        out, origins = _export_shape.to_prompt_completion(out, origins)  # one shape per file
    stats["no_assistant_dropped"] = dropped
    stats["unrolled_samples"] = len(out) if unroll else 0
    return {"rows": out, "origins": origins, "stats": stats, "leaks": _leak_report(leaks, checked, len(src["rows"]))}


def _build_preference(src: dict, fmt: str, drop_ties: bool, strip_think: bool, cap: int | None) -> dict[str, Any]:
    to_dict = fmt == "trl"
    stats = {**_new_stats(), "ties_dropped": 0, "no_completion_dropped": 0}
    out: list[dict] = []
    origins: list[int] = []
    leaks: list[dict] = []
    mismatches: list[dict] = []
    checked = considered = 0
    for index, pair in enumerate(src["rows"]):
        if pair.get("winner") == "tie" and drop_ties:
            stats["ties_dropped"] += 1
            continue
        sides = {}
        for side in ("chosen", "rejected"):
            raw = as_row(pair[side])
            row = with_profile(raw, src["system_prompt"], src["tools"])
            messages, _, _ = _export_shape.convert_messages(
                row["messages"], strip_think=strip_think, cap=cap, to_dict=to_dict, stats=stats
            )
            sides[side] = (raw, row, messages)
        cut = {side: _export_shape.split_prompt(m) for side, (_, _, m) in sides.items()}
        if any(cut[side] >= len(sides[side][2]) for side in sides):
            stats["no_completion_dropped"] += 1
            continue
        prompts = {side: sides[side][2][: cut[side]] for side in sides}
        if _export_shape.comparable(prompts["chosen"]) != _export_shape.comparable(prompts["rejected"]):
            mismatches.append({"row": index, "kind": "prompt_mismatch",
                               "detail": "chosen and rejected start from different prompts; pair rows of one task"})
            continue
        considered += 1
        privileged = [sides[s][0].get("privileged") for s in sides if sides[s][0].get("privileged") is not None]
        if privileged:
            checked += 1
            for side in sides:
                for secret in privileged:
                    for leak in _export_gate.find_leaks(secret, sides[side][2], sides[side][0].get("gold")):
                        leaks.append({"row": index, "side": side, **leak})
        tools = sides["chosen"][1].get("tools") or sides["rejected"][1].get("tools")
        if fmt == "trl":
            line = {"prompt": prompts["chosen"], "chosen": sides["chosen"][2][cut["chosen"]:],
                    "rejected": sides["rejected"][2][cut["rejected"]:]}
        else:
            line = {"prompt": _export_shape.ask_text(prompts["chosen"]), "chosen": sides["chosen"][2],
                    "rejected": sides["rejected"][2]}
        if tools:
            line["tools"] = tools
        out.append(line)
        origins.append(index)
    stats["prompt_mismatch_dropped"] = len(mismatches)
    return {"rows": out, "origins": origins, "stats": stats, "mismatches": mismatches,
            "leaks": _leak_report(leaks, checked, considered)}


def _leak_report(leaks: list[dict], checked: int, total: int) -> dict[str, Any]:
    report: dict[str, Any] = {"checked": checked, "could_not_run": total - checked, "leaks": leaks}
    if total and not checked:
        report["status"] = "could not run"
        report["note"] = (
            "no row carried a privileged block: rows that came through rows(), save() or a file are already "
            "scrubbed; pass the SimulationData or its trajectories to check for leaks"
        )
    elif checked < total:
        report["status"] = "ran on rows with a privileged block"
        report["note"] = f"{total - checked} row(s) carry no privileged block, so the check could not run on them"
    else:
        report["status"] = "ran"
    return report


# ---------------------------------------------------------------------------
# The gate and the write
# ---------------------------------------------------------------------------


def _gate_and_write(
    rows: list[dict],
    origins: list[int],
    src: dict,
    leak_report: dict,
    fmt: str,
    target: Path,
    validate: bool,
    report: dict,
    extra_problems: list[dict] | None = None,
) -> dict[str, Any]:
    roundtrip = _export_gate.roundtrip_report(rows, fmt)
    lines = src.get("lines")
    problems: list[dict[str, Any]] = []
    for bad in roundtrip["invalid"]:
        bad["output_row"] = bad["row"]
        bad["row"] = origins[bad["row"]]
        where = f"{bad['field']}[{bad['message']}].tool_calls[{bad['call']}]"
        problems.append({"row": bad["row"], "kind": "roundtrip",
                         "detail": f"{where} {bad['name']!r}: {bad['problem']}: {bad['arguments']}"})
    for leak in leak_report["leaks"]:
        side = f"{leak['side']} " if "side" in leak else ""
        key = f" (privileged[{leak['key']!r}])" if leak["key"] is not None else ""
        problems.append({"row": leak["row"], "kind": "privileged_leak",
                         "detail": f"{side}messages[{leak['message']}] recites the privileged block{key}: "
                                   f"{leak['recited']!r}"})
    problems.extend(extra_problems or [])
    if lines:
        for problem in problems:
            problem["line"] = lines[problem["row"]]
    problems.sort(key=lambda p: p["row"])
    report.update(roundtrip=roundtrip, privileged_leaks=leak_report, problems=problems, validated=bool(validate))
    if problems and validate:
        raise ExportValidationError(_refusal(problems, fmt), problems, report)
    report["rows_written"] = _export_io.write_jsonl(target, rows)
    return report


def _refusal(problems: list[dict], fmt: str) -> str:
    from .defaults import EXPORT_PROBLEMS_IN_MESSAGE

    kinds: dict[str, int] = {}
    for problem in problems:
        kinds[problem["kind"]] = kinds.get(problem["kind"], 0) + 1
    counts = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    shown = []
    for p in problems[:EXPORT_PROBLEMS_IN_MESSAGE]:
        where = f"row {p['row']}" + (f" (line {p['line']})" if p.get("line") else "")
        shown.append(f"  {where}: {p['kind']}: {p['detail']}")
    if len(problems) > len(shown):
        shown.append(f"  ... and {len(problems) - len(shown)} more (see .problems)")
    rows = len({p["row"] for p in problems})
    encoding = _export_gate.ENCODINGS[fmt]
    return (
        f"export refused, nothing written: {rows} row(s) failed the gate ({counts}; format={fmt!r}, "
        f"arguments checked as {encoding}):\n" + "\n".join(shown) + "\nFix those rows, or pass validate=False "
        "to write anyway and read report['problems']."
    )
