"""Which training examples fit a base model's context, counted before any model loads.

An example longer than the context is left out and counted, never truncated: a
cut row teaches a conversation that was never had (cut inside the assistant
turn, a call that never closes). The job counts them on the model it loads
(``training["left_out_too_long"]``); ``check_context`` counts the same examples
before the run starts, with only the base's tokenizer, for the selection report
(``report["context"]``). Both render with the functions here, so the two counts
are of one thing.

    found = check_context(rows, "sft", "whileai/tiny-tooluse-base")
    found["limit"], found["too_long"], found["left_out"]
"""

from __future__ import annotations

import copy
import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from whileai.core import defaults as core_defaults
from whileai.domain import defaults
from whileai.kit import defaults as kit_defaults
from whileai.domain.rows.basetokenizer import base_tokenizer, context_limit

__all__ = ["ContextCheck", "ContextSummary", "LeftOut", "context_limit", "longest_sequence", "prompt_length", "base_tokenizer", "check_context", "export_options",
           "tool_schemas", "shared_tools", "prompt_tools", "UNITS"]

#: what the job counts in ``left_out_too_long``, by method: SFT examples, GRPO prompts, DPO and RM pairs
UNITS = {"sft": "rows", "grpo": "prompts", "dpo": "pairs", "rm": "pairs"}



class LeftOut(TypedDict):
    """A unit too long for the context: its task, its row indices and its tokens."""

    task: str
    rows: list[int]
    tokens: int


class ContextSummary(TypedDict):
    """What the selection report keeps of a ``ContextCheck`` as its ``context``: all of it but ``by_task``."""

    checked: bool  #: False where the base cannot be read here; ``why`` says why, and the job still checks
    base_model: str
    limit: int | None  #: the base's context in tokens
    unit: str  #: what is counted (UNITS)
    too_long: int
    left_out: list[LeftOut]  #: the first SELECTION_CONTEXT_SHOWN units too long
    why: str | None
    #: the convention that renders the tools: the tokenizer's ``ToolFormat``, empty where it carries none
    tool_format: NotRequired[Mapping[str, object]]
    max_completion_length: NotRequired[int]  #: GRPO's reply cap, counted into each prompt


class ContextCheck(ContextSummary):
    """What ``check_context`` found (the selection report keeps it, less ``by_task``, as ``context``)."""

    by_task: dict[str, int]  #: units too long per task


#: the conversation keys of a training example, and which of them render together as one sequence
_SEQUENCES = (("messages",), ("prompt", "completion"), ("prompt", "chosen"), ("prompt", "rejected"), ("chosen",),
              ("rejected",))


def longest_sequence(tokenizer: Any, example: Mapping[str, Any]) -> int:
    """Tokens of the longest sequence a training example renders to (the chat template over its turns and tools)."""
    longest = 0
    for keys in _SEQUENCES:
        if all(isinstance(example.get(k), list) for k in keys):
            messages = [m for k in keys for m in example[k]]
            ids = tokenizer.apply_chat_template(messages, tools=example.get("tools") or None, tokenize=True,
                                                return_dict=True)["input_ids"]
            longest = max(longest, len(ids))
    return longest


def prompt_length(tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: list[Any] | None) -> int:
    """Tokens of a prompt as a GRPO trainer renders it: the chat template with the tools and the generation prompt."""
    return len(tokenizer.apply_chat_template(list(messages), tools=tools or None, add_generation_prompt=True,
                                             tokenize=True, return_dict=True)["input_ids"])


def export_options(config: Mapping[str, Any], method: str) -> dict[str, Any]:
    """The export settings ``method``'s job applies: TRAIN_EXPORT_KNOBS the method reads, None ones left out.

    Left out means the exporter's own default, which is what a run that named
    none of them trains on. The jobs read the same rule (``_trainer_data``).
    """
    return {k: config[k] for k in defaults.TRAIN_EXPORT_KNOBS
            if config.get(k) is not None and method in defaults.TRAINING_KNOBS[k]}


def _trained(row: Mapping[str, Any], options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the job's exporter makes of one row in TRL's shape (``export_dataset(format="trl")``'s conversion, in memory)."""
    from whileai.domain.export import to_trl, training_rows

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rows carry their own system prompt and tools
        return to_trl(training_rows([row], **dict(options)))


def _candidates(rows: Sequence[Mapping[str, Any]], method: str, per_task: int | None,
                gold_prompts: bool = False) -> list[tuple[str, list[int], Any]]:
    """``(task, row indices, what the job renders)`` for each unit ``method`` would train on, in row order.

    ``gold_prompts``: GRPO's ``prompt_source="gold"``, every task with a gold rather than every mixed task."""
    from whileai.domain.rows.rowsource import group_by_task, task_key

    if method == "sft":
        return [(task_key(r), [i], r) for i, r in enumerate(rows) if r.get("passed") is True]
    if method == "grpo":
        out = []
        for key, indices in group_by_task(list(rows)).items():
            labels = {rows[i].get("passed") for i in indices}
            kept = (any(rows[i].get("gold") is not None for i in indices) if gold_prompts
                    else True in labels and False in labels)
            if kept:
                out.append((key, [indices[0]], rows[indices[0]]))  # one prompt per task, as the job balances
        return out
    from whileai.domain.judges.judging import build_preference_pairs

    where = {id(r): i for i, r in enumerate(rows)}
    return [(pair["task_id"], [where[id(pair["chosen"])], where[id(pair["rejected"])]], pair)
            for pair in build_preference_pairs(rows, per_task=per_task)]


def tool_schemas(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every row's tool schemas, one per name, first seen first."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        for schema in row.get("tools") or []:
            fn = schema.get("function", schema) if isinstance(schema, Mapping) else {}
            seen.setdefault(str(fn.get("name")), dict(schema))
    return list(seen.values())


def shared_tools(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The one tool list the GRPO job hands its trainer for every prompt, when every row offers the same tools
    (a simulated environment's); None when the rows' tools differ (a benchmark: each question its own
    functions), and the job renders each prompt with its own row's tools instead.

    A union would show each prompt every other question's functions (BFCL's 400 simple questions: far past a
    small model's context) and keep one schema of two functions that share a name.
    """
    import json

    def key(row: Mapping[str, Any]) -> list[str]:
        return sorted(json.dumps(t, sort_keys=True, default=str) for t in row.get("tools") or [])

    first = key(rows[0]) if rows else []
    return tool_schemas(rows) if all(key(row) == first for row in rows) else None


def prompt_tools(row: Mapping[str, Any], shared: list[dict[str, Any]] | None) -> list[Any] | None:
    """The tools ``row``'s GRPO prompt is rendered with: the shared list, else the row's own."""
    return shared if shared is not None else list(row.get("tools") or []) or None


def _lengths(tokenizer: Any, method: str, items: list[Any], rows: Sequence[Mapping[str, Any]],
             config: Mapping[str, Any]) -> list[int]:
    """Tokens each unit needs, rendered as ``method``'s job renders it (GRPO: prompt plus max_completion_length)."""
    if method == "grpo":
        from whileai.domain.rows.rollouts import prompt_messages

        shared = shared_tools(rows)
        cap = _completion_cap(config)
        return [prompt_length(tokenizer, prompt_messages(row), prompt_tools(row, shared)) + cap for row in items]
    if method == "rm":
        from whileai.domain.judges.reward_model import REWARD_SPAN_DEFAULT, reward_pair_example

        span = str(config.get("reward_span") or REWARD_SPAN_DEFAULT)
        return [longest_sequence(tokenizer, reward_pair_example(p, span)) for p in items]
    options = export_options(config, method)
    if method == "sft":
        return [max((longest_sequence(tokenizer, ex) for ex in _trained(row, options)), default=0) for row in items]
    # dpo: a side's prompt plus its completion is that side's whole conversation, converted as the exporter does
    out = []
    for pair in items:
        tools = pair["chosen"].get("tools") or pair["rejected"].get("tools")
        sides = [_trained(pair[side], options) for side in ("chosen", "rejected")]
        out.append(max((longest_sequence(tokenizer, {"messages": ex["messages"], "tools": tools})
                        for side in sides for ex in side if isinstance(ex.get("messages"), list)), default=0))
    return out


def _completion_cap(config: Mapping[str, Any]) -> int:
    value = config.get("max_completion_length")
    return int(value if value is not None else defaults.TRAINING_KNOBS["max_completion_length"]["grpo"]["default"])


def check_context(rows: Sequence[Mapping[str, Any]], method: str, base_model: str | None,
                  config: Mapping[str, Any] | None = None, per_task: int | None = None) -> ContextCheck:
    """What of ``rows`` is too long for ``base_model``'s context, counted as ``method``'s job will count it.

    The units are the job's (UNITS): SFT's passing rows through the job's
    export settings in ``config`` (mask_mode, unroll, strip_think,
    max_tool_output_chars), GRPO's one prompt per mixed task (its tokens with
    the tools and the generation prompt, plus ``max_completion_length``: the
    reply must fit too), DPO's and RM's length-matched pass-vs-fail pairs
    (``per_task`` of them per task, a pair out when either side is too long).
    Answers ``{"checked", "base_model", "limit", "unit", "too_long",
    "left_out", "by_task", "why"}``: ``left_out`` lists the first
    SELECTION_CONTEXT_SHOWN units (task, row indices, tokens); ``by_task``
    counts them per task for the selection report. When the base cannot be
    read here ``checked`` is False and ``why`` says so: the job still checks.
    """
    base = base_model or kit_defaults.KIT_BASE_NAME
    config = config or {}
    # the runner's selection report and wai.train's gate check the same rows under the same spec, one after the
    # other: the second is answered from the first, not by tokenizing every row again
    # (benchmarks/MEASURED.md#selection-memo)
    memo = _memo_key(rows, method, base, config, per_task)
    if memo is not None and memo in _CHECKED:
        return copy.deepcopy(_CHECKED[memo])
    found = _check_context(rows, method, base, config, per_task)
    if memo is not None and found["checked"]:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.pop(next(iter(_CHECKED)))
        _CHECKED[memo] = copy.deepcopy(found)
    return found


#: check_context's answers in this process, newest last, keyed by a hash of everything they depend on
_CHECKED: dict[str, ContextCheck] = {}
_CHECKED_MAX = 8
#: the knobs check_context reads besides the export ones (TRAIN_EXPORT_KNOBS)
_CONTEXT_KNOBS = ("tool_format", "max_completion_length", "prompt_source", "reward_span", "environment")


def _memo_key(rows: Sequence[Mapping[str, Any]], method: str, base: str, config: Mapping[str, Any],
              per_task: int | None) -> str | None:
    """A hash of the rows, the method, the base (a folder: its path and modification time) and the knobs; None when
    they do not serialise (then nothing is kept)."""
    from pathlib import Path

    read = {k: config.get(k) for k in (*defaults.TRAIN_EXPORT_KNOBS, *_CONTEXT_KNOBS)}  # what the check reads
    read["tool_format"] = read["tool_format"] or "auto"
    try:
        stamp = Path(base).stat().st_mtime if Path(base).exists() else None
        text = json.dumps([list(rows), method, base, stamp, read, per_task], sort_keys=True, default=str)
    except (TypeError, ValueError, OSError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def _check_context(rows: Sequence[Mapping[str, Any]], method: str, base: str, config: Mapping[str, Any],
                   per_task: int | None) -> ContextCheck:
    found: ContextCheck = {"checked": False, "base_model": base, "limit": None, "unit": UNITS[method],
                           "too_long": 0, "left_out": [], "by_task": {}, "why": None}
    try:
        # in an environment an SFT row and a GRPO prompt are an episode's, capped at EPISODE_MAX_LENGTH as the job caps them
        cap = core_defaults.EPISODE_MAX_LENGTH if method in ("sft", "grpo") and config.get("environment") else None
        tokenizer, limit = base_tokenizer(base, config.get("tool_format"), cap)
    except LookupError as exc:
        found["why"] = str(exc)
        return found
    found["checked"], found["limit"] = True, limit
    found["tool_format"] = dict(getattr(tokenizer, "whileai_tool_format", None) or {})  # which convention renders the tools
    if method == "grpo":
        found["max_completion_length"] = _completion_cap(config)
    units = _candidates(rows, method, per_task, gold_prompts=config.get("prompt_source") == "gold")
    lengths = _lengths(tokenizer, method, [item for _, _, item in units], rows, config)
    by_task: dict[str, int] = {}
    for (task, indices, _), tokens in zip(units, lengths, strict=True):
        if tokens > limit:
            by_task[task] = by_task.get(task, 0) + 1
            if len(found["left_out"]) < defaults.SELECTION_CONTEXT_SHOWN:
                found["left_out"].append({"task": task, "rows": indices, "tokens": tokens})
    found["too_long"], found["by_task"] = sum(by_task.values()), by_task
    return found
