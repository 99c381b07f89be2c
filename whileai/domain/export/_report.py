"""The export report: what ``export_dataset`` and ``export_preference`` return, and ``ExportValidationError.report``.

Both open with where the file went and how it was written, carry the build's counts, then the gates' findings
(``roundtrip``, ``privileged_leaks``, ``problems``, ``validated``) and the rows written; with ``base_model=``, the
chat template and manifest written beside the file (``_template.TemplateFiles``). A report refused by the gate has
no ``rows_written``.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from whileai.domain.export._build import LeakReport, PreferenceCounts, TrainingCounts
from whileai.domain.export._gate import GateProblem, RoundtripReport

__all__ = ["TrainingExport", "PreferenceExport"]


class _ExportFields(TypedDict):
    """What both reports hold: the file and its format, the conversion's settings, the gates' findings, the rows
    written, and the template files beside the file where a base was named."""

    output: str
    format: str
    argument_encoding: str
    strip_think: bool
    max_tool_output_chars: int | None
    roundtrip: NotRequired[RoundtripReport]
    privileged_leaks: NotRequired[LeakReport]
    problems: NotRequired[list[GateProblem]]
    validated: NotRequired[bool]
    rows_written: NotRequired[int]
    tool_format: NotRequired[dict[str, Any]]  #: the tool convention the base's template was given (free-form)
    chat_template: NotRequired[str | None]  #: None where the runner could not read the base's tokenizer
    manifest: NotRequired[str]
    chat_template_why: NotRequired[str]  #: why there is no chat template beside the file (the runner's)


class TrainingExport(_ExportFields, TrainingCounts):
    """``export_dataset``'s report: the rows in and out, the mask, unrolling, the rows given no tools, and (TRL) the
    file's one shape."""

    kind: Literal["training"]
    rows_in: int
    rows_out: int
    mask_mode: str
    unroll: bool
    rows_without_tools: int
    trl_shape: NotRequired[str]


class PreferenceExport(_ExportFields, PreferenceCounts):
    """``export_preference``'s report: the pairs in and out, and whether ties were left out."""

    kind: Literal["preference"]
    pairs_in: int
    pairs_out: int
    drop_ties: bool
