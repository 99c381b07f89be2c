"""The one knob checker: a value against its row of the knob table (range, choices, paper, source).

``wai.train`` (the SDK) and the runner's schema both call :func:`check_knob`, so a refusal
names the same range, the same paper value and the same citation wherever it is raised;
only the spelling of the key (``beta`` or ``method.beta``) and of "unset" (``None`` in
Python, ``null`` in YAML) differ between the two surfaces.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["check_knob", "fmt_num", "knob_reference", "knob_interval", "many_value"]


def fmt_num(x: Any) -> str:
    """A number as people write it: ``0.04``, ``1e-05``, ``300``."""
    return f"{x:g}" if isinstance(x, float) else str(x)


def knob_reference(spec: Mapping[str, Any]) -> str:
    """``(DeepSeekMath used 0.04; arXiv:2402.03300)``, or our default when no paper gave one."""
    paper, source = spec.get("paper"), spec.get("source") or ""
    if paper is None:
        default = spec.get("default")
        return f"(our default is {fmt_num(default)})" if default is not None else "(no default)"
    name, _, cite = source.partition(", ")
    return f"({name} used {fmt_num(paper)}; {cite})" if cite else f"({name} used {fmt_num(paper)})"


def knob_interval(spec: Mapping[str, Any]) -> str:
    """``[0, 1]``, or ``(0, 1]`` when the low end is open."""
    lo, hi = spec["range"]
    return f"{'(' if spec.get('open_low') else '['}{fmt_num(lo)}, {fmt_num(hi)}]"


def many_value(value: Any, numbers: bool = False) -> Any:
    """A list knob's value as a list: ``"wandb, mlflow"`` -> ``["wandb", "mlflow"]``, a tuple as a list, each name
    once in the order given; with ``numbers`` (``reward_weights``) each item read as a number and none dropped
    (``"1, 0.5"`` -> ``[1.0, 0.5]``). Anything else as it is (the knob check names what is wrong with it)."""
    if isinstance(value, str):
        value = [part.strip() for part in value.strip("[]").split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        if numbers:
            return [float(v) if isinstance(v, str) and _is_number(v) else v for v in value]
        return list(dict.fromkeys(value)) if all(isinstance(v, str) for v in value) else list(value)
    return value


def check_knob(
    name: str,
    value: Any,
    method: str,
    per_method: Mapping[str, Mapping[str, Any]],
    *,
    whole: bool = False,
    label: str | None = None,
    unset: str = "None",
    suggest_method: bool = False,
) -> str | None:
    """The problem with ``name=value`` for ``method``, or None when the value is accepted.

    ``per_method`` is the knob's row of the table (method -> range/choices/paper/source);
    ``whole`` asks for an integer; ``label`` is how the key is written where it was given
    (``method.beta``); ``unset`` is that surface's word for "leave it to the default";
    ``suggest_method`` words a knob the method does not read as "pick another method".
    """
    key = label or name
    if method not in per_method:
        readers = ", ".join(per_method)
        if suggest_method:
            return (f"{key}={value!r} is not read by {method} ({name} is read by {readers}); "
                    f"remove it, or pick method={next(iter(per_method))}")
        return f"{key}={value!r} does not apply to {method} (it is read by {readers}); leave it {unset}"
    spec = per_method[method]
    if spec.get("many"):
        return _many_problem(key, value, method, spec, unset)
    if "choices" not in spec and "range" not in spec:  # a free-text knob: its pattern is the rule
        if isinstance(value, str) and _matches(spec, value):
            return None
        return f"{key}={value!r} is not {spec['pattern_hint']}; pass {spec['pattern_hint']} or leave it {unset}"
    if "choices" in spec:
        if value in spec["choices"] and type(value) is type(spec["choices"][0]):
            return None
        accepted = ", ".join(repr(c) for c in spec["choices"])
        return f"{key}={value!r} is not accepted for {method}; pass one of {accepted} {knob_reference(spec)} or leave it {unset}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or (whole and not isinstance(value, numbers.Integral)):
        kind = "a whole number" if whole else "a number"
        return f"{key}={value!r} is not {kind}; pass {kind} in {knob_interval(spec)} for {method} or leave it {unset}"
    if not math.isfinite(value):
        return f"{key}={value!r} is not finite; pass a value in {knob_interval(spec)} for {method} or leave it {unset}"
    lo, hi = spec["range"]
    if value > hi or value < lo or (spec.get("open_low") and value == lo):
        return (f"{key}={fmt_num(value)} is outside {knob_interval(spec)} for {method} {knob_reference(spec)}; "
                f"pass a value in range or leave it {unset}")
    return None


def _matches(spec: Mapping[str, Any], value: str) -> bool:
    """Whether ``value`` matches the knob's ``pattern`` (whole), where it has one."""
    pattern = spec.get("pattern")
    return pattern is not None and re.fullmatch(pattern, value) is not None


def _number_list_problem(key: str, value: Any, method: str, spec: Mapping[str, Any], unset: str) -> str | None:
    """What is wrong with a list-of-numbers knob's value (``reward_weights``): each a finite number in range."""
    items = many_value(value, numbers=True)
    if not isinstance(items, list) or not items:
        return f"{key}={value!r} is not a list of numbers; pass e.g. [1.0, 0.5], or leave it {unset}"
    bad = [item for item in items if isinstance(item, bool) or not isinstance(item, numbers.Real)
           or not math.isfinite(item) or not spec["range"][0] <= item <= spec["range"][1]]
    if not bad:
        return None
    return (f"{key}={value!r}: {', '.join(repr(b) for b in bad)} not a number in {knob_interval(spec)} for {method}; "
            f"pass one number per item in range, or leave it {unset}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _many_problem(key: str, value: Any, method: str, spec: Mapping[str, Any], unset: str) -> str | None:
    """What is wrong with a list knob's value (``report_to``, ``reward``): each item one of the choices (or its
    pattern); for a list of numbers (``reward_weights``), each in range."""
    if "range" in spec:
        return _number_list_problem(key, value, method, spec, unset)
    items = many_value(value)
    choices = spec["choices"]
    accepted = ", ".join([repr(c) for c in choices] + ([spec["pattern_hint"]] if spec.get("pattern") else []))
    example = f"[{choices[0]}, {choices[1]}] or '{choices[0]},{choices[1]}'" if len(choices) > 1 else f"[{choices[0]}]"
    if not isinstance(items, list):
        return f"{key}={value!r} is not a list; pass a list of {accepted} ({example}), or leave it {unset} for none"
    bad = [item for item in items if not isinstance(item, str) or item not in choices and not _matches(spec, item)]
    if not bad:
        return None
    return (f"{key}={value!r}: {', '.join(repr(b) for b in bad)} not accepted for {method}; pass a list of "
            f"{accepted} ({example}), or leave it {unset} for none")
