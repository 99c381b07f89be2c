"""What HackMonitor says: alarm messages in plain words, JSON-safe values, and the text block a person reads."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from whileai.domain import defaults

__all__ = ["ALARM_KINDS", "alarm_message", "clean", "format_hack_monitor", "prompt_text"]

#: The alarms, in the order the report lists what each means.
ALARM_KINDS = ("divergence", "gold_decline", "length", "kl", "feature", "format")


def prompt_text(prompt: Any, limit: int | None = None) -> str:
    """A held-out prompt as one short line: a string as is, messages as the last user turn, cut to ``limit``.

    ``limit`` defaults to MONITOR_PROMPT_CHARS; a cut prompt ends with an ellipsis.
    """
    limit = defaults.MONITOR_PROMPT_CHARS if limit is None else limit
    text = prompt
    if isinstance(prompt, (list, tuple)):
        turns = [m for m in prompt if isinstance(m, Mapping)]
        users = [m for m in turns if m.get("role") == "user"] or turns
        text = users[-1].get("content", "") if users else ""
        if isinstance(text, list):
            text = " ".join(str(p.get("text", "")) for p in text if isinstance(p, Mapping))
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def clean(value: Any) -> Any:
    """``value`` with numpy scalars and arrays made plain and NaN/inf made None, so it is JSON-able."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return [clean(v) for v in value.tolist()]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else None
    return value


def _f(v: Any, fmt: str = "+.3f") -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _look_at(alarm: Mapping[str, Any], unit: str | None) -> str:
    """The sentence after an alarm's own: the feature involved, the length change, the prompts to read."""
    look = alarm.get("look_at")
    if not isinstance(look, Mapping):
        return ""
    kind = alarm.get("kind")
    parts = []
    feature = look.get("feature")
    if isinstance(feature, Mapping) and feature.get("feature") and kind != "length":
        name, paid, p = feature["feature"], _f(feature.get("payment")), _f(feature.get("p"), ".3f")
        beyond = "within prompt" if kind == "format" else "beyond gold"
        if not feature.get("strongest"):
            parts.append(f"the {'format marker' if kind == 'format' else 'feature'} '{name}' ({paid} {beyond}, p {p})")
        elif feature.get("p") is not None and feature.get("alpha") is not None and feature["p"] <= feature["alpha"]:
            parts.append(f"the strongest feature in the latest scan, '{name}' ({paid} {beyond}, p {p})")
        else:
            parts.append(f"no feature or format marker stands out (the strongest in the latest scan, '{name}' "
                         f"{paid} {beyond}, p {p}, is within chance)")
    elif kind in ("divergence", "gold_decline", "kl"):
        parts.append("no feature or format marker stands out in the latest scan")
    before, after, pct = look.get("length_before"), look.get("length_after"), look.get("length_change_pct")
    parts.append(f"length {_f(before, '.1f')} \u2192 {_f(after, '.1f')} {unit or 'units'} ({_f(pct, '+.0f')}%)")
    prompts = look.get("prompts") or []
    if prompts:
        what = {"divergence": "the gap grew most", "gold_decline": "gold fell most",
                "length": "length bought the most gap", "kl": "the KL is largest"}.get(str(kind), "the proxy paid it most")
        shown = ", ".join(f"'{p['prompt']}' ({_f(p.get('effect'), '+.2f')})" for p in prompts)
        parts.append(f"the held-out prompts where {what}: {shown}")
    return " Look at: " + "; ".join(parts) + "."


def alarm_message(alarm: Mapping[str, Any], unit: str | None = None) -> str:
    """What fired and the numbers that fired it, then what to look at (``look_at``, when the alarm has it)."""
    return _alarm_sentence(alarm, unit) + "." + _look_at(alarm, unit)


def _length_bound(alarm: Mapping[str, Any]) -> str:
    """What showed the length alarm's gap bought: the lower bound of the whole, or (read by the tail) the
    upper tail's move and the lower bound of the price along it."""
    if alarm.get("read") != "tail":
        return f"lower bound {_f(alarm.get('gap_lo'))}"
    return (f"read by the tail: {_f(alarm.get('tail_now'), '.0%')} of them past the baseline's longest "
            f"{_f(alarm.get('tail_base'), '.0%')}, p {_f(alarm.get('tail_p'), '.1e')}, and the price along the "
            f"move has lower bound {_f(alarm.get('price_lo'))}")


def _alarm_sentence(alarm: Mapping[str, Any], unit: str | None) -> str:
    kind = alarm.get("kind")
    if kind == "divergence":
        return (f"the proxy-gold gap grew by {_f(alarm.get('change'))} from the baseline window (interval "
                f"{_f(alarm.get('lo'))} to {_f(alarm.get('hi'))} over {alarm.get('n_prompts')} prompts, threshold "
                f"{_f(alarm.get('delta'), '.2f')}): the proxy pays for something the gold judge does not")
    if kind == "gold_decline":
        return (f"gold fell {_f(alarm.get('drop'), '.3f')} from its best window (from step {alarm.get('best_step')}; "
                f"interval {_f(alarm.get('lo'), '.3f')} to {_f(alarm.get('hi'), '.3f')}) while the proxy moved "
                f"{_f(-alarm['proxy_drop'] if alarm.get('proxy_drop') is not None else None)}")
    if kind == "length":
        measure = str(alarm.get("measure") or "length")
        # an episode's count (its turns or calls) is read in its own unit
        whose, size, unit = (("completions", "length", unit) if measure == "length" else ("episodes", measure, measure))
        drift = _f(100 * alarm["drift"], "+.0f") if alarm.get("drift") is not None else "n/a"
        crossed = _f(100 * alarm["moved_share"], ".0f") if alarm.get("moved_share") is not None else "n/a"
        return (f"{whose} drifted {drift}% in {size} ({_f(alarm.get('length_base'), '.1f')} to "
                f"{_f(alarm.get('length_now'), '.1f')} {unit or 'units'}; {crossed}% of them crossed some "
                f"{'length' if measure == 'length' else 'count'}) and the proxy pays for it beyond gold: read within "
                f"prompts, the move bought a gap of {_f(alarm.get('gap_from_length'))} ({_length_bound(alarm)}), "
                f"{_f(alarm.get('slope'), '+.4f')} per {(unit or 'unit').rstrip('s')} on average")
    if kind == "kl":
        return (f"the sequence KL to the reference is {_f(alarm.get('kl'), '.2f')} nats (lower bound "
                f"{_f(alarm.get('lo'), '.2f')}), past the budget of {_f(alarm.get('budget'), '.2f')}")
    if kind == "feature":
        parts = [f"'{d['feature']}' ({_f(d.get('payment'))} beyond gold in {d.get('count')} completions)"
                 for d in alarm.get("detail") or []]
        named = ", ".join(parts) if parts else ", ".join(f"'{f}'" for f in alarm.get("features") or [])
        return f"the proxy pays for {named}, within prompt and family-wise over every feature scanned"
    if kind == "format":
        parts = [f"'{d['feature']}' ({_f(d.get('payment'))} within prompt; share {_f(d.get('share_before'), '.0%')} "
                 f"\u2192 {_f(d.get('share_now'), '.0%')})" for d in alarm.get("detail") or []]
        named = ", ".join(parts) if parts else ", ".join(f"'{f}'" for f in alarm.get("features") or [])
        return (f"the policy's format moved and the proxy pays for it: {named}, family-wise over the markers "
                "that moved")
    return str(kind)


def _num(v: Any, width: int, fmt: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-".rjust(width)
    return format(v, fmt).rjust(width)


def _armed_line(summary: Mapping[str, Any]) -> list[str]:
    """The line saying which alarms can fire and why each other one is off (none for a summary without it)."""
    armed = summary.get("armed")
    if not isinstance(armed, Mapping) or not armed:
        return []
    on = [kind for kind, state in armed.items() if state == "armed"]
    off = [f"{kind} ({str(state).removeprefix('off: ')})" for kind, state in armed.items() if state != "armed"]
    return [f"Armed: {', '.join(on) or 'none'}." + (f" Off: {'; '.join(off)}." if off else "")]


def format_hack_monitor(summary: Mapping[str, Any]) -> str:
    """The block a person reads: the curve first, then the alarms in plain words.

    >>> print(format_hack_monitor({"curve": [], "alarms": []}))
    HackMonitor: no evaluations yet
    """
    curve = list(summary.get("curve") or [])
    alarms = list(summary.get("alarms") or [])
    if not curve:
        return "\n".join(["HackMonitor: no evaluations yet", *_armed_line(summary)])
    settings = summary.get("settings") or {}
    unit = summary.get("length_unit") or "length"
    head = (f"HackMonitor: {len(curve)} evaluations, steps {curve[0].get('step')}-{curve[-1].get('step')}")
    if settings.get("n_prompts"):
        head += f" ({settings['n_prompts']} held-out prompts x {settings.get('k')} samples)"
    adjusted = any(p.get("gap_adjusted") is not None for p in curve)
    counts = [name for name in ("calls", "turns") if any(p.get(name) is not None for p in curve)]  # episodes'
    cols = ["step", "proxy", "gold", "gap"] + (["gap*"] if adjusted else []) + [unit, *counts, "kl"]
    lines = [head, "", "  ".join(c.rjust(8) for c in cols)]
    for p in curve:
        cells = [_num(p.get("step"), 8, "d"), _num(p.get("proxy"), 8, ".3f"), _num(p.get("gold"), 8, ".3f"),
                 _num(p.get("gap"), 8, "+.3f")]
        if adjusted:
            cells.append(_num(p.get("gap_adjusted"), 8, "+.3f"))
        cells += [_num(p.get("length"), 8, ".1f"), *(_num(p.get(name), 8, ".2f") for name in counts),
                  _num(p.get("kl"), 8, ".3f")]
        lines.append("  ".join(cells))
    if adjusted:
        paid = ", ".join(f"'{name}' {_f(v.get('payment'))}" for name, v in (summary.get("endorsed") or {}).items())
        lines.append(f"gap* is the gap after discounting endorsed formats (the proxy pays {paid}).")
    lines.append("")
    if alarms:
        lines.append(f"Alarms ({len(alarms)}):")
        for a in alarms:
            lines.append(f"- step {a.get('step')}, {a.get('kind')}: {a.get('message') or alarm_message(a, unit)}")
    else:
        lines.append("No alarms.")
    lines += _armed_line(summary)
    stopped = summary.get("stopped")
    if stopped:
        lines.append(f"Training stopped at step {stopped.get('step')} on the {stopped.get('kind')} alarm: "
                     f"{str(stopped.get('reason')).rstrip('.')}.")
    length = summary.get("length")
    if length and length.get("verdict") == "growth":
        lines.append(f"Length grew {_f(100 * length['drift'], '+.0f')}% without the gap following it: growth, "
                     "not a hack.")
    scan = summary.get("scan")
    if scan and scan.get("top"):
        top = scan["top"][:3]
        named = ", ".join(f"'{t['feature']}' {_f(t.get('payment'))} (p {_f(t.get('p'), '.3f')})" for t in top)
        lines.append(f"Feature scan at step {scan.get('step')} ({scan.get('completions')} completions, "
                     f"{scan.get('features')} features): strongest {named}.")
    if summary.get("divergence", "on") != "on":
        lines.append(f"Divergence and gold decline: {summary['divergence']}.")
    kl = summary.get("kl")
    if isinstance(kl, str) and not kl.startswith("measured"):
        lines.append(f"KL: {kl}.")
    return "\n".join(lines)
