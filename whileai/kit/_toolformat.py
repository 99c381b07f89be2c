"""Tools reach the model whatever its chat template: the check, and the ``hermes`` convention where it drops them.

Many chat templates take ``tools=`` and ignore it (SmolLM2-Instruct's renders
byte for byte the same text with and without). A run that hands such a template
its tools trains and evaluates a model that never saw a tool schema.
``template_renders_tools`` renders a probe conversation with and without a
probe tool: identical text means the tools were dropped. ``use_tool_format``
then decides the convention (``tool_format``: ``auto`` picks the template's own
when it renders tools, else ``hermes``) and, for ``hermes``, puts whileai's
hermes template (``hermes_chat_template.jinja``) on the tokenizer, so every
place that renders through it (the trainers' data, the selection report's
lengths, held-out evaluation, the saved adapter's tokenizer that serving loads)
renders the same tools, and the one parser of that format
(``whileai.core.toolcalls``) reads the replies.

    info = use_tool_format(tokenizer, "auto")
    info["used"], info["renders_tools"], info["parser"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict, cast

from whileai.core.errors import ToolFormatError  # noqa: F401  (raised here; its home is core.errors)
from whileai.core.toolcalls import template_tool_format

__all__ = ["TOOL_FORMAT_CHOICES", "ToolFormat", "hermes_chat_template", "template_renders_tools", "use_tool_format",
           "reply_format", "ToolFormatError"]

#: ``tool_format`` values: ``auto`` (the template's own where it renders tools, else ``hermes``), ``native``
#: (the template's own; refused where it drops tools), ``hermes`` (whileai's hermes template in any case).
TOOL_FORMAT_CHOICES = ("auto", "native", "hermes")


class ToolFormat(TypedDict):
    """The tool convention decided for a tokenizer (kept on it as ``whileai_tool_format``; a run records it)."""

    requested: str  #: the run's ``tool_format``: ``auto``, ``native`` or ``hermes``
    used: str  #: ``native`` or ``hermes``
    renders_tools: bool  #: whether the base's own template writes the tools into the prompt
    why: str  #: how that was found
    parser: str  #: the ``whileai.core.toolcalls`` format that reads the replies


_PROBE_TOOL = {"type": "function", "function": {
    "name": "whileai_probe_tool", "description": "probe whether the chat template renders tools",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
_PROBE = [{"role": "user", "content": "What is the weather in Paris?"}]


def hermes_chat_template() -> str:
    """The text of whileai's hermes chat template (ChatML turns, a ``<tools>`` block, ``<tool_call>`` JSON)."""
    return (Path(__file__).with_name("hermes_chat_template.jinja")).read_text(encoding="utf-8")


def template_renders_tools(tokenizer: Any) -> tuple[bool, str]:
    """``(renders, why)``: whether ``tokenizer``'s chat template puts a tool schema into the text.

    Renders a one-turn conversation with and without a probe tool; identical text (or
    text without the probe's name) means the template drops tools. A template that
    fails to render with tools counts as dropping them, and ``why`` says how.
    """
    if not getattr(tokenizer, "chat_template", None):
        return False, "the tokenizer has no chat template"
    try:
        bare = tokenizer.apply_chat_template(_PROBE, tokenize=False, add_generation_prompt=True)
        tooled = tokenizer.apply_chat_template(_PROBE, tools=[_PROBE_TOOL], tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # a template that cannot render tools at all drops them just the same
        return False, f"the template fails with tools: {type(exc).__name__}: {str(exc)[:120]}"
    if tooled == bare:
        return False, "rendering with tools gives the same text as without"
    if "whileai_probe_tool" not in tooled:
        return False, "rendering with tools changes the text but leaves out the tool's name"
    return True, "the template writes the tools into the prompt"


def use_tool_format(tokenizer: Any, requested: str | None = None) -> ToolFormat:
    """Decide the tool-call convention for ``tokenizer`` and put it on the tokenizer; returns what was decided.

    ``requested`` is the run's ``tool_format`` (None means ``auto``). Answers
    ``{"requested", "used", "renders_tools", "why", "parser"}``: ``used`` is
    ``native`` or ``hermes``, ``parser`` the ``whileai.core.toolcalls`` format
    that reads the replies. Raises :class:`ToolFormatError` for ``native`` on a
    template that drops tools (nothing trains without its tools silently).
    Calling it again on the same tokenizer gives the same answer.
    """
    requested = requested or "auto"
    if requested not in TOOL_FORMAT_CHOICES:
        raise ToolFormatError(f"tool_format={requested!r} is not a tool convention; accepted: "
                              f"{', '.join(TOOL_FORMAT_CHOICES)} (auto: the template's own where it renders tools)")
    done = getattr(tokenizer, "whileai_tool_format", None)
    if isinstance(done, dict) and done.get("requested") == requested:
        return cast(ToolFormat, dict(done))  # what this function put on the tokenizer, below
    renders, why = template_renders_tools(tokenizer)
    if requested == "native" and not renders:
        raise ToolFormatError(
            f"tool_format='native' but this base's chat template drops tools ({why}): the model would train and be "
            "measured without ever seeing a tool schema; pass tool_format='hermes' (or 'auto', which picks it)")
    used = "native" if requested == "native" or (requested == "auto" and renders) else "hermes"
    if used == "hermes":
        tokenizer.chat_template = hermes_chat_template()
    info = ToolFormat(requested=requested, used=used, renders_tools=renders, why=why,
                      parser=template_tool_format(_template_text(tokenizer)))
    tokenizer.whileai_tool_format = dict(info)
    return info


def reply_format(tokenizer: Any) -> str:
    """The ``whileai.core.toolcalls`` format that reads replies written through ``tokenizer``'s template.

    The convention ``use_tool_format`` put on it, else what its template's markers
    say (a saved adapter's tokenizer carries the hermes template it trained with).
    """
    decided = getattr(tokenizer, "whileai_tool_format", None)
    if isinstance(decided, dict) and decided.get("parser"):
        return str(decided["parser"])
    return template_tool_format(_template_text(tokenizer))


def _template_text(tokenizer: Any) -> str:
    """The chat template's text; a tokenizer with several named templates (``default``, ``tool_use``) gives all."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        return "\n".join(str(t) for t in template.values())
    return str(template or "")
