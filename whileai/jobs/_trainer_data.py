"""What a trainer reads: the job's rows exported with the gates on, in the shape each TRL trainer takes."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from whileai.core.spec import RunSpec
from whileai.jobs._training_fields import ExportOptions

from whileai.domain.rows import context

__all__ = ["within_context", "export_options", "export_training", "export_pairs"]


def within_context(tokenizer: Any, examples: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], int]:
    """The examples whose every rendered sequence fits ``limit`` tokens, and how many were left out.

    A longer example is left out and counted, never truncated: a cut row would
    teach a conversation that was never had (or, cut inside the assistant turn,
    a call that never closes). The selection report counts the same examples
    before the run (``whileai.domain.rows.context``, one rendering for both).
    """
    kept = [example for example in examples if context.longest_sequence(tokenizer, example) <= limit]
    return kept, len(examples) - len(kept)


def export_options(spec: RunSpec, method: str) -> ExportOptions:
    """The export settings the run gave (TRAIN_EXPORT_KNOBS the method reads), None ones left out.

    The selection report's rule (``context.export_options``), so both count the same rows; the spec has checked
    each knob's value, so what comes back is one of its settings.
    """
    return cast(ExportOptions, context.export_options(spec.knobs(), method))


#: the keys of a TRL training row a trainer reads (the messages shape, or prompt/completion when only some turns train)
_TRL_ROW_KEYS = ("messages", "prompt", "completion", "tools")


def export_training(rows: Sequence[Mapping[str, Any]], folder: Path | None,
                    options: ExportOptions | None = None) -> list[dict[str, Any]]:
    """Rows in TRL's conversational shape with the export gates on (arguments round-trip, no privileged leak).

    ``options`` are export_dataset's settings (mask_mode, unroll, strip_think,
    max_tool_output_chars; see ``export_options``). Rows whose every assistant
    turn trains are ``{"messages", "tools"}``; a mask that trains only some turns
    (``mask_mode="final"``, ``unroll=True``) gives ``{"prompt", "completion",
    "tools"}`` rows instead. Written to ``folder/train.trl.jsonl`` when a folder
    is given (the job's record of what it trained on). Raises
    ExportValidationError naming the rows.
    """
    import tempfile

    from whileai.domain.export import export_dataset

    with tempfile.TemporaryDirectory() as tmp:
        target = (folder or Path(tmp)) / "train.trl.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rows carry their own system prompt and tools
            export_dataset(list(rows), target, format="trl", validate=True, **(options or ExportOptions()))
        with open(target, encoding="utf-8") as f:
            return [{k: v for k, v in json.loads(line).items() if k in _TRL_ROW_KEYS} for line in f if line.strip()]


def export_pairs(pairs: list[dict[str, Any]], folder: Path | None,
                 options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Preference pairs as TRL's prompt/chosen/rejected triple, gates on (``folder/pairs.trl.jsonl``).

    ``options`` are export_preference's strip_think and max_tool_output_chars.
    """
    import tempfile

    from whileai.domain.export import export_preference

    with tempfile.TemporaryDirectory() as tmp:
        target = (folder or Path(tmp)) / "pairs.trl.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_preference(pairs, target, format="trl", validate=True, **dict(options or {}))
        with open(target, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
