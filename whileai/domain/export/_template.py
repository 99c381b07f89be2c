"""The chat template and tool convention a training file was made for, written beside it.

Exported rows carry ``messages`` and ``tools`` as structured data; which text a
trainer makes of them is the chat template's business. A base whose template
drops tools (SmolLM2-Instruct's renders the same text with and without them)
trains on the ``hermes`` convention that whileai puts on its tokenizer
(``whileai.kit.use_tool_format``): a ``<tools>`` block in the system turn,
calls as ``<tool_call>{json}</tool_call>``. A TRL user who loads the exported
rows with that base's own tokenizer would train a model that never saw a tool
schema. So an export that names its ``base_model`` also writes:

- ``<stem>.chat_template.jinja``: the template the run renders with (put it on
  the tokenizer: ``tokenizer.chat_template = Path(...).read_text()``, or pass
  it to vLLM's ``--chat-template``);
- ``<stem>.manifest.json``: ``{"base_model", "tool_format", "chat_template",
  "parser", "how"}``: the convention decided for the base (``requested``,
  ``used``, ``renders_tools``, ``why``) and the parser of its replies
  (``whileai.core.toolcalls``, also vLLM's ``--tool-call-parser`` name).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypedDict

__all__ = ["write_template_files", "template_paths", "TemplateFiles"]

_HOW = ("load the rows with datasets, put the template on the base's tokenizer "
        "(tokenizer.chat_template = open(chat_template).read()) and train with TRL, which renders each row's "
        "messages with its tools; parse the trained model's replies with the named parser")


def template_paths(output: Path) -> tuple[Path, Path]:
    """(the template file, the manifest file) beside an export ``output`` (``x.jsonl`` -> ``x.chat_template.jinja``)."""
    stem = output.name[: -len(".jsonl")] if output.name.endswith(".jsonl") else output.name
    return output.with_name(f"{stem}.chat_template.jinja"), output.with_name(f"{stem}.manifest.json")


def _atomic_write(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


class TemplateFiles(TypedDict):
    """What ``write_template_files`` wrote, the export report's part: the tool convention decided for the base,
    and the chat template's and manifest's paths."""

    tool_format: dict[str, Any]
    chat_template: str
    manifest: str


def write_template_files(output: str | os.PathLike, base_model: str, tool_format: str | None = None) -> TemplateFiles:
    """Write the template and manifest for ``base_model`` under ``tool_format`` beside ``output``; the report's part.

    The tokenizer is read as the selection report reads it (no weights, no
    download; a GGUF base is imported on first use), with the run's
    ``tool_format`` put on it, so the template is byte for byte the one the job
    renders with. Raises ``LookupError`` when the base's tokenizer is not on this
    machine, ``ToolFormatError`` for ``native`` on a template that drops tools.
    """
    from whileai.domain.rows.basetokenizer import base_tokenizer

    tokenizer, _ = base_tokenizer(base_model, tool_format)
    template = tokenizer.chat_template
    if not isinstance(template, str) or not template:
        raise LookupError(f"base_model {base_model!r} has no single chat template to write beside the export "
                          "(none, or several named ones); the rows are written, the template is the base's own")
    decided = dict(getattr(tokenizer, "whileai_tool_format", None) or {})
    template_file, manifest_file = template_paths(Path(output))
    manifest = {"base_model": base_model, "tool_format": decided, "parser": decided.get("parser"),
                "chat_template": template_file.name, "how": _HOW}
    _atomic_write(template_file, template)
    _atomic_write(manifest_file, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return {"tool_format": decided, "chat_template": str(template_file), "manifest": str(manifest_file)}
