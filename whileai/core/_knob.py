"""Declaring a knob: :func:`knob` makes a spec model's field, :class:`Knob` is what its declaration says beyond its
type (a row of the knob table, :class:`KnobRow`), and :func:`knob_of`, :func:`knob_fields` and :func:`is_whole` read
the declarations back off a model. Its public names are re-exported by ``whileai.core.spec``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, get_args

from pydantic import BaseModel, Field

__all__ = ["Surface", "KnobRow", "Knob", "knob", "knob_of", "knob_fields", "is_whole"]

Surface = Literal["argument", "config", "export"]


class KnobRow(TypedDict):
    """One row of the knob table (:func:`knob_table`): a knob's default, its source and its reason for one method,
    with what it accepts where its declaration says."""

    default: Any
    paper: Any  #: the cited paper's value, or None
    source: str
    reason: str
    help: str
    choices: NotRequired[tuple[Any, ...]]
    range: NotRequired[tuple[float, float]]
    open_low: NotRequired[bool]
    many: NotRequired[bool]
    pattern: NotRequired[str]
    pattern_hint: NotRequired[str]


@dataclass(frozen=True)
class Knob:
    """What a knob's declaration says beyond its type: the row of the knob table for one method."""

    help: str
    surface: Surface
    default: Any
    reason: str = ""
    range: tuple[float, float] | None = None
    choices: tuple[Any, ...] | None = None
    open_low: bool = False
    paper: Any = None
    source: str = ""
    #: a list of the choices (``report_to``), not one of them; a comma string is read as that list
    many: bool = False
    #: a regular expression a value (or a list item) may match instead of being one of the choices, and how
    #: to write such a value in a message (``python:MODULE:FUNCTION``)
    pattern: str | None = None
    pattern_hint: str = ""

    def row(self) -> KnobRow:
        """The knob table's row (``range``/``choices``, ``open_low``, ``default``, ``paper``, ``source``, ...)."""
        out: KnobRow = {"default": self.default, "paper": self.paper, "source": self.source,
                               "reason": self.reason, "help": self.help}
        if self.choices is not None:
            out["choices"] = self.choices
        if self.range is not None:
            out["range"] = self.range
        if self.open_low:
            out["open_low"] = True
        if self.many:
            out["many"] = True
        if self.pattern is not None:
            out["pattern"], out["pattern_hint"] = self.pattern, self.pattern_hint
        return out


def knob(default: Any, *, help: str, surface: Surface = "config", reason: str = "",
         range: tuple[float, float] | None = None, choices: tuple[Any, ...] | None = None,
         open_low: bool = False, paper: Any = None, source: str = "", many: bool = False,
         pattern: str | None = None, pattern_hint: str = "") -> Any:
    """A knob's field: ``default`` with its reason, ``range`` or ``choices``, the paper's value and ``source``.

    ``surface`` says where a user gives it: a keyword argument of ``wai.train`` (``argument``), a key
    of its ``config=`` (``config``), or an export setting (``export``: ``export_dataset``'s own names).
    ``many`` makes it a list of ``choices`` (a comma string is read as that list), or of numbers in
    ``range``. ``pattern`` (a regular expression, written for people as ``pattern_hint``) accepts
    values besides the choices, or is the whole rule of a free-text knob.
    """
    if range is not None and choices is not None or range is None and choices is None and pattern is None:
        raise TypeError("a knob has a range, choices or a pattern: not a range with choices, and not none")
    meta = Knob(help=help, surface=surface, default=default, reason=reason, range=range, choices=choices,
                open_low=open_low, paper=paper, source=source, many=many, pattern=pattern,
                pattern_hint=pattern_hint)
    return Field(default=default, description=help, json_schema_extra={"knob": meta})  # type: ignore[dict-item]


def _unset(model: type[BaseModel], name: str) -> bool:
    """Whether None for ``name`` means "not given": a knob whose declared default is a value (None is not one of its
    values), so an older record's None reads as that default and a launch naming None is not resolved."""
    info = model.model_fields.get(name)
    extra = info.json_schema_extra if info is not None else None
    if info is None or not (isinstance(extra, dict) and isinstance(extra.get("knob"), Knob)):
        return False
    return type(None) not in get_args(info.annotation)


def knob_of(model: type[BaseModel], name: str) -> Knob:
    """The declaration of knob ``name`` on ``model``."""
    extra = model.model_fields[name].json_schema_extra
    meta = extra.get("knob") if isinstance(extra, dict) else None
    if not isinstance(meta, Knob):
        raise KeyError(f"{name} is not a knob of {model.__name__}")
    return meta


def knob_fields(model: type[BaseModel]) -> list[str]:
    """The knob names of ``model``, in declaration order."""
    out = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and isinstance(extra.get("knob"), Knob):
            out.append(name)
    return out


def is_whole(model: type[BaseModel], name: str) -> bool:
    """Whether knob ``name`` takes a whole number (its annotation says int)."""
    annotation = model.model_fields[name].annotation
    return annotation is int or annotation == (int | None)
