"""GRPO's rewards besides the exact judge: ToolRL's fine-grained score, and a user's own reward function.

``reward`` (a GRPO knob) names what the policy optimises. ``first_action`` is the
exact first-action judge (``judges.first_action_judge``); this module holds the
two others that are plain code:

- :func:`fine_grained_score`: a reply's first assistant turn scored in the manner
  of ToolRL (arXiv:2504.13958): a format term, then how far the tool names, the
  argument names and the argument values agree with the gold, each in [0, 1],
  weighted by REWARD_FINE_GRAINED_WEIGHTS and scaled to [0, 1]. It pays partial
  credit, so it is a weaker judge than the exact one: a policy can raise it
  without passing more prompts.
- :func:`load_python_reward` / :func:`python_reward_problems`: a
  ``python:MODULE:FUNCTION`` reward, a TRL-shaped function
  ``f(prompts, completions, **kwargs) -> list[float]``, imported and tried on
  sample rows before any run exists.

:func:`reward_problems` is what the resolution of a GRPO spec checks across the
three reward knobs (``reward``, ``reward_weights``, ``reward_model``).
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import numbers
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

from whileai.core.spec import PYTHON_PREFIX
from whileai.domain import defaults
from whileai.domain.rows.gold import ReplyCall, no_call_verdict, gold_options, value_ok, first_turn
from whileai.domain.rows.actions import parse_arguments

__all__ = ["fine_grained_score", "load_python_reward", "python_reward_problems", "reward_problems",
           "reward_strength", "FineGrainedScore"]


class FineGrainedScore(TypedDict):
    """``fine_grained_score``'s answer: the weighted reward and the terms it averages, each in [0, 1]."""

    reward: float
    terms: dict[str, float]  #: format, tool_name, argument_names, argument_values


# ---------------------------------------------------------------------------
# Fine-grained (ToolRL)
# ---------------------------------------------------------------------------


def _jaccard(a: set[Any], b: set[Any]) -> float:
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def _call_terms(want: Mapping[str, Any], got: Mapping[str, Any] | None, rule: str) -> tuple[float, float]:
    """(argument-name agreement, argument-value agreement) of one reply call against one gold call."""
    if got is None:
        return 0.0, 0.0
    reference = want.get("arguments")
    reference = reference if isinstance(reference, dict) else parse_arguments(reference)
    reference = reference if isinstance(reference, dict) else {}
    values = want.get("values") or {}
    optional = set(want.get("optional") or ())
    given = got.get("arguments")
    arguments: dict[str, Any] = given if isinstance(given, dict) else {}
    required = (reference.keys() | values.keys()) - optional
    expected = required | (optional & arguments.keys())  # an optional argument counts where the reply gives it
    names = _jaccard(set(expected), set(arguments))
    if not expected:
        return names, 1.0 if not arguments else 0.0
    right = 0
    for key in expected:
        acceptable = values.get(key, [reference[key]] if key in reference else None)
        if key in arguments and (acceptable is None or value_ok(arguments[key], acceptable, rule)):
            right += 1
    return names, right / len(expected)


def _option_terms(calls: list[Mapping[str, Any]], rule: str, replies: list[ReplyCall]) -> dict[str, float]:
    gold_names = {str(c.get("name")) for c in calls}
    reply_names = {str(c.get("name")) for c in replies}
    used: set[int] = set()
    names_sum = values_sum = 0.0
    for want in calls:  # each gold call pairs with the first unused reply call of its tool
        index = next((i for i, c in enumerate(replies) if i not in used and c.get("name") == want.get("name")), None)
        if index is not None:
            used.add(index)
        n, v = _call_terms(want, replies[index] if index is not None else None, rule)
        names_sum, values_sum = names_sum + n, values_sum + v
    extra = max(0, len(replies) - len(calls))  # calls the gold does not ask for dilute both argument terms
    count = len(calls) + extra
    return {"tool_name": _jaccard(gold_names, reply_names), "argument_names": names_sum / count,
            "argument_values": values_sum / count}


def fine_grained_score(turn: Mapping[str, Any] | None, gold: Mapping[str, Any], formatted: bool = True) -> FineGrainedScore:
    """A reply turn's ToolRL-style score against ``gold``: ``{"reward": [0, 1], "terms": {...}}``.

    ``turn`` is the reply as an assistant message (``{"content", "tool_calls"}``);
    ``formatted`` says whether its text parsed cleanly in the run's tool convention
    (no call markup left unparsed), which the format term pays for. The terms are
    ``format``, ``tool_name`` (Jaccard of the tool names called and wanted),
    ``argument_names`` (Jaccard of argument names, per wanted call) and
    ``argument_values`` (share of wanted arguments with an acceptable value),
    each in [0, 1]; the reward is their REWARD_FINE_GRAINED_WEIGHTS average,
    the best over the gold's acceptable answers. An answer gold (no call
    wanted) pays the three correctness terms only for the exact answer, a
    ``no_call`` gold only for a reply the judge passes (one without a call).
    """
    weights = defaults.REWARD_FINE_GRAINED_WEIGHTS
    parsed = first_turn([turn]) if turn is not None else None
    replies = parsed["calls"] if parsed is not None else []
    best: dict[str, float] | None = None
    if "answer" in gold:
        from whileai.domain.rows.actions import action_matches, first_action

        ok = action_matches(first_action([turn]) if turn is not None else None, gold)[0]
        best = {"format": float(formatted and not replies), "tool_name": float(ok), "argument_names": float(ok),
                "argument_values": float(ok)}
    elif "no_call" in gold:  # the judge's verdict decides every correctness term: there is no call to part-score
        ok = no_call_verdict(replies, str(gold.get("match", "exact")))[0]
        best = {"format": float(formatted and not replies), "tool_name": float(ok), "argument_names": float(ok),
                "argument_values": float(ok)}
    else:
        for calls, rule, _ in gold_options(gold, "exact"):
            terms = {"format": float(formatted and bool(replies)), **_option_terms(calls, rule, replies)}
            if best is None or _weighted(terms, weights) > _weighted(best, weights):
                best = terms
    terms = best or {name: 0.0 for name in weights}
    return {"reward": _weighted(terms, weights), "terms": terms}


def _weighted(terms: Mapping[str, float], weights: Mapping[str, float]) -> float:
    total = sum(weights.values())
    return sum(weights[name] * terms.get(name, 0.0) for name in weights) / total


# ---------------------------------------------------------------------------
# A user's own reward: python:MODULE:FUNCTION
# ---------------------------------------------------------------------------


def _split(ref: str) -> tuple[str, str]:
    module, _, function = ref[len(PYTHON_PREFIX):].rpartition(":")
    return module, function


def load_python_reward(ref: str, search_path: str | None = None) -> Callable[..., Any]:
    """The function ``python:MODULE:FUNCTION`` names, imported (``search_path`` first on ``sys.path`` while it is).

    Raises ValueError naming the module or function that is missing and the fix.
    """
    module_name, function = _split(ref)
    added = bool(search_path) and search_path not in sys.path
    if added:
        sys.path.insert(0, str(search_path))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure is the user's module's, named as such
        raise ValueError(f"reward={ref!r}: module {module_name!r} does not import ({type(exc).__name__}: {exc}); "
                         f"make it importable from the directory you run in (or installed), or fix the error "
                         "in it") from exc
    finally:
        if added:
            sys.path.remove(str(search_path))
    fn = getattr(module, function, None)
    if not callable(fn):
        raise ValueError(f"reward={ref!r}: {module_name} has no function {function!r}; define "
                         f"def {function}(prompts, completions, **kwargs) -> list[float] there, or name another")
    return fn


def _signature_problem(ref: str, fn: Callable[..., Any]) -> str | None:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None  # a builtin or C function: its call below decides
    kinds = {p.kind for p in params.values()}
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    missing = [n for n in ("prompts", "completions") if n not in named]
    if missing or inspect.Parameter.VAR_KEYWORD not in kinds:
        return (f"reward={ref!r}: {fn.__name__}{inspect.signature(fn)} does not take "
                f"{', '.join(missing + ([] if inspect.Parameter.VAR_KEYWORD in kinds else ['**kwargs']))}; "
                "TRL calls a reward as f(prompts=..., completions=..., completion_ids=..., <dataset columns>=...): "
                f"define it as def {fn.__name__}(prompts, completions, **kwargs) -> list[float]")
    return None


def _sample_call(ref: str, fn: Callable[..., Any], rows: Sequence[Mapping[str, Any]]) -> str | None:
    prompts = [list(r["prompt"]) for r in rows]
    completions = [[{"role": "assistant", "content": r["completion"]}] for r in rows]
    # the columns as GRPO's dataset holds them (jobs/grpo.py mixed_prompts): gold and the row's tools as JSON text
    columns = {"gold": [json.dumps(r.get("gold")) for r in rows], "task": [str(r.get("task")) for r in rows],
               "row_tools": [json.dumps(r.get("tools") or []) for r in rows]}
    try:
        out = fn(prompts=prompts, completions=completions, completion_ids=None, **columns)
    except Exception as exc:  # the user's code failing on sample rows is the problem to report
        return (f"reward={ref!r} raised {type(exc).__name__}: {exc} when called on {len(rows)} sample rows; it must "
                "accept TRL's keyword arguments (prompts, completions, completion_ids, the dataset's columns such as "
                "gold) and return one number per completion")
    if not isinstance(out, Sequence) or isinstance(out, (str, bytes)):
        return (f"reward={ref!r} returned {type(out).__name__}, not a list; return a list of floats, one per "
                f"completion ({len(rows)} here)")
    if len(out) != len(rows):
        return (f"reward={ref!r} returned {len(out)} value(s) for {len(rows)} completions; return exactly one number "
                "per completion, in their order")
    bad = [v for v in out if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real)
                                                or not math.isfinite(float(v)))]
    if bad:
        return (f"reward={ref!r} returned {bad[0]!r}, which is not a finite number; return finite floats (None "
                "skips a completion in TRL, which this check allows)")
    return None


def python_reward_problems(ref: str, rows: Sequence[Mapping[str, Any]] | None = None,
                           search_path: str | None = None) -> list[str]:
    """Why ``python:MODULE:FUNCTION`` cannot be a reward: it does not import, does not take ``prompts``,
    ``completions`` and ``**kwargs``, or does not return one finite number per completion on two sample rows
    (``rows``: ``{"prompt", "completion", "gold"}``; the kit's sample when None). Empty when it can."""
    try:
        fn = load_python_reward(ref, search_path)
    except ValueError as exc:
        return [str(exc)]
    problem = _signature_problem(ref, fn) or _sample_call(ref, fn, list(rows or _sample_rows()))
    return [problem] if problem else []


def _sample_rows() -> list[dict[str, Any]]:
    """Two prompts of the kit's sample task, one answered with its gold call and one with plain text."""
    from whileai.core.toolcalls import format_tool_call
    from whileai.kit import load_sample

    from whileai.domain.rows.taskkey import prompt_messages, task_key

    out: list[dict[str, Any]] = []
    for row in load_sample()[: defaults.REWARD_CHECK_SAMPLE_ROWS]:
        gold = row.get("gold") or {}
        text = (format_tool_call(gold["name"], gold.get("arguments") or {}, "hermes") if "name" in gold
                else "I cannot help with that.")
        out.append({"prompt": prompt_messages(row), "completion": text if not out else "I am not sure.",
                    "gold": gold, "task": task_key(row), "tools": row.get("tools") or []})
    return out


# ---------------------------------------------------------------------------
# The three knobs together
# ---------------------------------------------------------------------------


def reward_strength(reward: Sequence[str]) -> str:
    """``exact`` when the reward is the exact first-action judge alone, else ``weaker`` (partial credit, a
    learned model, or the user's own code): what the HackMonitor's gold must be compared against."""
    return "exact" if list(reward) == ["first_action"] else "weaker"


def reward_problems(values: Mapping[str, Any], *, check_python: bool = True,
                    search_path: str | None = None) -> list[str]:
    """Every problem across ``reward``, ``reward_weights`` and ``reward_model`` of a GRPO spec's ``values``."""
    reward = list(values.get("reward") or ["first_action"])
    weights = values.get("reward_weights")
    model = values.get("reward_model")
    problems = []
    if isinstance(weights, list) and len(weights) != len(reward):
        problems.append(f"reward_weights={weights} has {len(weights)} weight(s) for {len(reward)} reward(s) "
                        f"({', '.join(reward)}); pass one weight per reward, in the same order, or leave it None "
                        "(1.0 each)")
    if "rm" in reward and not model:
        problems.append("reward=rm needs reward_model: the id of a finished rm run of this account, or stages.NAME "
                        "for an rm stage of the recipe; pass reward_model=...")
    if model and "rm" not in reward:
        problems.append(f"reward_model={model!r} is read only when reward includes rm (reward={','.join(reward)}); "
                        "add rm to reward, or leave reward_model out")
    if check_python:
        for ref in reward:
            if ref.startswith(PYTHON_PREFIX):
                problems += python_reward_problems(ref, search_path=search_path)
    return problems
