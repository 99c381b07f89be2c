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
None, "value": 99}``). ``to_hf_dataset(rows)`` builds a Dataset that TRL's
trainers read back exactly (see export/_hf.py for how and for its limits).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from whileai.domain.rows import jsonl
from whileai.domain.export import _build, _gate, _shape, _stream
from whileai.domain.export._build import MissingPolicyWarning
from whileai.domain.export._gate import GateProblem, RoundtripReport
from whileai.domain.export._report import PreferenceExport, TrainingExport
from whileai.domain.export._template import write_template_files
from whileai.core.errors import ExportValidationError, ExportWarning, RowFormatError
from whileai.domain.rows.rollouts import as_row, check_rows, row_problems, with_profile

__all__ = [
    "training_rows",
    "loss_mask",
    "export_dataset",
    "export_training",
    "export_preference",
    "to_trl",
    "tool_call_roundtrip",
    "to_hf_dataset",
    "decoding_chat_template",
    "MissingPolicyWarning",
    "write_template_files",
    "TrainingExport",
    "PreferenceExport",
    "RoundtripReport",
    "GateProblem",
]

#: an export report of either kind, as the gate and the template files fill it
_ReportT = TypeVar("_ReportT", TrainingExport, PreferenceExport)


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
    mode = _shape.check_mask_mode(mask_mode)
    messages = row.get("messages") if isinstance(row, Mapping) else row
    problems = row_problems({"messages": messages})
    if problems or not isinstance(messages, list):  # row_problems refuses anything but a list
        raise RowFormatError(f"loss_mask needs a row or a list of messages: {problems[0]}", [])
    return _shape.assistant_bits(messages, mode)


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
    _shape.check_mask_mode(mask_mode)  # argument errors before any file is read
    _shape.check_cap(max_tool_output_chars)
    with jsonl.gc_paused():
        src = _build.resolve(source, system_prompt, tools, stacklevel=3)
        built = _build.build_training(src, mask_mode, strip_think, unroll, max_tool_output_chars)
    if built.stats["no_assistant_dropped"]:
        warnings.warn(
            f"{built.stats['no_assistant_dropped']} row(s) have no assistant turn to train and were left out",
            ExportWarning,
            stacklevel=2,
        )
    return built.rows


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
    base_model: str | None = None,
    tool_format: str | None = None,
) -> TrainingExport:
    """Write ``training_rows(source, ...)`` as JSONL and return a report. Never overwrites the source.

    ``export_training`` is this same function under its older name. With a path
    source (or data read by ``SimulationData.load``) and no ``output``, writes
    ``<name>.train.jsonl`` beside it. The write is atomic: a crash leaves no
    half file. A path source is read, converted and written a chunk at a time
    (``defaults.EXPORT_CHUNK_BYTES``), so memory does not grow with the file.

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

    ``base_model=`` (with the run's ``tool_format``, None meaning ``auto``)
    also writes, beside the file, the chat template the run renders the rows
    with and a manifest naming the tool convention and its reply parser
    (``export/_template.py``): where the base's own template drops tools, the
    rows train as whileai trained them only with that template. The report
    then carries ``tool_format``, ``chat_template`` and ``manifest``.

        report = export_dataset(data, "train.jsonl", format="trl")
        report = export_dataset(data, "train.jsonl", format="trl", base_model="smollm2-135m")
    """
    fmt = _gate.check_format(format)  # argument errors before any file is read
    _shape.check_mask_mode(mask_mode)
    _shape.check_cap(max_tool_output_chars)
    with jsonl.gc_paused():  # the rows are freed when the call returns, before the collector resumes
        report = _export_training(
            source, output, fmt, system_prompt, tools, mask_mode, strip_think, unroll, max_tool_output_chars, validate
        )
    return _with_template(report, base_model, tool_format)


def _with_template(report: _ReportT, base_model: str | None, tool_format: str | None) -> _ReportT:
    """The report, with the chat template and manifest written beside its file when a base is named."""
    if base_model:
        report.update({**write_template_files(report["output"], base_model, tool_format)})
    return report


def _export_training(
    source, output, fmt, system_prompt, tools, mask_mode, strip_think, unroll, max_tool_output_chars, validate
) -> TrainingExport:
    if isinstance(source, (str, os.PathLike)):  # a file: a chunk at a time (see _stream.py)
        return _stream.export_training_file(
            source, output, fmt, system_prompt, tools, mask_mode, strip_think, unroll, max_tool_output_chars,
            validate, stacklevel=4,
        )
    src = _build.resolve(source, system_prompt, tools, stacklevel=4)
    target = _build.target(src.path, output, ".train.jsonl")
    built = _build.build_training(src, mask_mode, strip_think, unroll, max_tool_output_chars, fmt)
    rows, origins = built.rows, built.origins
    report: TrainingExport = {
        "output": str(target),
        "format": fmt,
        "argument_encoding": _gate.ENCODINGS[fmt],
        "kind": "training",
        "rows_in": len(src.rows),
        "rows_out": len(rows),
        "mask_mode": "unrolled" if unroll else _shape.check_mask_mode(mask_mode),
        "strip_think": bool(strip_think),
        "unroll": bool(unroll),
        "max_tool_output_chars": max_tool_output_chars,
        # rows that carry no tool list and were given none (tools=): nothing renders tools for them
        "rows_without_tools": src.rows_without_tools,
        **built.stats,
    }
    if fmt == "trl":
        report["trl_shape"] = "prompt_completion" if rows and "completion" in rows[0] else "messages"
    return _gate_and_write(rows, origins, src, built.leaks, fmt, target, validate, report)


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
    base_model: str | None = None,
    tool_format: str | None = None,
) -> PreferenceExport:
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
    problems too. ``base_model=`` and ``tool_format=`` write the chat template
    and manifest beside the file, as in ``export_dataset``.

        report = export_preference(pairs, "dpo.jsonl", format="trl")
    """
    fmt = _gate.check_format(format)  # argument errors before any file is read
    cap = _shape.check_cap(max_tool_output_chars)
    with jsonl.gc_paused():  # the rows are freed when the call returns, before the collector resumes
        report = _export_pairs(pairs, output, fmt, drop_ties, validate, system_prompt, tools, strip_think, cap)
    return _with_template(report, base_model, tool_format)


def _export_pairs(pairs, output, fmt, drop_ties, validate, system_prompt, tools, strip_think, cap) -> PreferenceExport:
    src = _build.resolve_pairs(pairs, system_prompt, tools, stacklevel=4)
    target = _build.target(src.path, output, ".preference.jsonl")
    built = _build.build_preference(src, fmt, drop_ties, strip_think, cap)
    report: PreferenceExport = {
        "output": str(target),
        "format": fmt,
        "argument_encoding": _gate.ENCODINGS[fmt],
        "kind": "preference",
        "pairs_in": len(src.rows),
        "pairs_out": len(built.rows),
        "drop_ties": bool(drop_ties),
        "strip_think": bool(strip_think),
        "max_tool_output_chars": cap,
        **built.stats,
    }
    return _gate_and_write(built.rows, built.origins, src, built.leaks, fmt, target, validate, report, built.mismatches)


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
        out, _ = _shape.trl_training_rows(wire, list(range(len(wire))), None)
        return out
    if kind == "preference":
        src = _build.resolve_pairs([_build.pair_from_openai(row) for row in rows], None, None, warn=False)
        return _build.build_preference(src, "trl", True, False, None).rows
    raise ValueError(f"kind={kind!r} is not a TRL shape; accepted: 'training' (SFT rows) or 'preference' (DPO pairs)")


def to_hf_dataset(rows: Iterable[Mapping[str, Any]]):
    """A ``datasets.Dataset`` of the rows that TRL's trainers read back exactly, tool-call argument dicts included.

    ``Dataset.from_list`` would fill every argument dict with the keys of all
    the others, and datasets' ``Json`` type rounds floats to 10 decimal places;
    here lists and dicts are stored as exact JSON text and decoded on read (see
    export/_hf.py). Columns are the union of all rows' keys. Where rows differ in
    a value's JSON type (which Arrow cannot hold in one column), tool-call
    arguments and tools are carried as JSON text; train inside
    ``decoding_chat_template(tokenizer)`` so any chat template renders the objects.

        trainer = SFTTrainer(model=model, train_dataset=to_hf_dataset(to_trl(rows)), ...)
    """
    from whileai.domain.export._hf import to_hf_dataset as build

    return build(rows)


def decoding_chat_template(tokenizer: Any) -> Any:
    """A context manager: the tokenizer's chat template decodes JSON-text arguments and tools before rendering.

        with decoding_chat_template(tokenizer):
            trainer = SFTTrainer(..., train_dataset=to_hf_dataset(rows), processing_class=tokenizer)
            trainer.train()
    """
    from whileai.domain.export._hf import decoding_chat_template as build

    return build(tokenizer)


def tool_call_roundtrip(rows: Iterable[Any], format: str = "openai") -> RoundtripReport:
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
    return _gate.roundtrip_report(list(rows), format)


# ---------------------------------------------------------------------------
# The gate and the write
# ---------------------------------------------------------------------------


def _gate_and_write(
    rows: list[dict],
    origins: list[int],
    src: _build.Source,
    leak_report: _build.LeakReport,
    fmt: str,
    target: Path,
    validate: bool,
    report: _ReportT,
    extra_problems: list[GateProblem] | None = None,
) -> _ReportT:
    roundtrip = _gate.roundtrip_report(rows, fmt)
    lines = src.lines
    problems: list[GateProblem] = []
    for bad in roundtrip["invalid"]:
        bad["output_row"] = bad["row"]
        bad["row"] = origins[bad["row"]]
        problems.append(_gate.roundtrip_problem(bad))
    problems.extend(_gate.leak_problem(leak) for leak in leak_report["leaks"])
    problems.extend(extra_problems or [])
    if lines:
        for problem in problems:
            problem["line"] = lines[problem["row"]]
    problems.sort(key=lambda p: p["row"])
    report.update({"roundtrip": roundtrip, "privileged_leaks": leak_report, "problems": problems,
                   "validated": bool(validate)})
    if problems and validate:
        raise ExportValidationError(_gate.refusal(problems, fmt), problems, report)
    report["rows_written"] = jsonl.write_jsonl(target, rows)
    return report

