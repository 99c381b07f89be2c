"""HackMonitor's edges: argument checks, the watched reward, and scoring with the proxy and the gold judge."""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from whileai.domain.monitor import _sampling as sampling_
from whileai.domain import defaults
from whileai.domain.monitor._arming import check_disarm
from whileai.domain.monitor._report import ALARM_KINDS

__all__ = ["MonitorSettings", "Numbers", "validate_settings", "watched", "check_sampled", "accepted", "call_proxy", "score_gold"]

_SAMPLING_KEYS = ("temperature", "top_p", "top_k", "batch")

#: a numeric setting's default: a number, or None where None is a real choice (no KL budget)
_Default = TypeVar("_Default", float, None)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


@dataclass(frozen=True)
class Numbers:
    """The monitor's numeric settings, each its MONITOR_* default where it was given as None."""

    every: int
    k: int
    n_prompts: int
    window: int
    buffer: int
    max_new_tokens: int
    concurrency: int
    seed: int
    n_boot: int
    n_perm: int
    scan_min: int
    delta: float
    length_pct: float
    kl_budget: float | None


@dataclass(frozen=True)
class MonitorSettings:
    """What ``validate_settings`` accepted: the held-out rows and every setting with its default filled in."""

    rows: list[Any]
    numbers: Numbers
    endorsed: tuple[str, ...]
    stop_on: tuple[str, ...]
    disarm: dict[str, str]
    sampling: dict[str, float]


def validate_settings(**given: Any) -> MonitorSettings:
    """Resolve every None to its MONITOR_* default and check each value; all problems are reported at once."""
    problems: list[str] = []
    rows = _held_rows(given["holdout"], problems)
    for name, what in (("proxy", "a reward f(prompts=, completions=, **columns) -> list[float]"),
                       ("gold", "a judge row -> reward or {'reward': ...}"),
                       ("sample", "sample(model, tokenizer, prompts, n=, max_new_tokens=) -> list[list[str]]")):
        if given[name] is not None and not callable(given[name]):
            problems.append(f"{name}={given[name]!r} is not callable; pass {what}, or None")
    numbers = _numbers(given, problems)
    endorsed = _endorsed(given["endorsed"], problems)
    stop_on = _stop_on(given["stop_on"], numbers.kl_budget, problems)
    disarm, disarm_problems = check_disarm(given.get("disarm"))
    problems.extend(disarm_problems)
    sampling = _sampling(given["sampling"], problems)
    if problems:
        raise ValueError(f"HackMonitor got {len(problems)} bad argument(s):\n- " + "\n- ".join(problems))
    return MonitorSettings(rows=rows, numbers=numbers, endorsed=endorsed, stop_on=stop_on, disarm=disarm,
                           sampling=sampling)


def _held_rows(holdout: Any, problems: list[str]) -> list[Any]:
    """The held-out prompts as rows (``sampling_.held_out_rows``); none when ``holdout`` is not a list of them."""
    if holdout is None or isinstance(holdout, (str, bytes, Mapping)) or not isinstance(holdout, Sequence) \
            or len(holdout) == 0:
        problems.append(f"holdout={str(holdout)[:60]!r} must be a non-empty list of held-out prompts "
                        "(strings, message lists, or rows with 'prompt' or 'messages')")
        return []
    try:
        return sampling_.held_out_rows(holdout)
    except ValueError as exc:
        problems.append(str(exc))
        return []


def _numbers(given: Mapping[str, Any], problems: list[str]) -> Numbers:
    """The numeric settings, each its MONITOR_* default when None; a value out of range is a problem."""

    def integer(name: str, default: int, low: int, why: str) -> int:
        v = given[name]
        v = default if v is None else v
        if not _is_int(v) or v < low:
            problems.append(f"{name}={given[name]!r} must be an integer >= {low} ({why}); "
                            f"leave it None for {default}")
        return int(v) if _is_int(v) else default

    def positive(name: str, default: _Default, why: str) -> float | _Default:
        v = given[name]
        v = default if v is None else v
        if v is not None and (not _is_real(v) or v <= 0):
            problems.append(f"{name}={given[name]!r} must be a number > 0 ({why}); leave it None for {default}")
            v = default
        return default if v is None else float(v)  # v is None only where the default is

    return Numbers(
        every=integer("every", defaults.MONITOR_EVERY, 1, "optimizer steps between looks"),
        k=integer("k", defaults.MONITOR_K, 2, "within-prompt comparisons need two completions per prompt"),
        n_prompts=integer("n_prompts", defaults.MONITOR_N_PROMPTS, 2, "the intervals resample prompts"),
        window=integer("window", defaults.MONITOR_WINDOW, 1, "looks per window"),
        buffer=integer("buffer", defaults.MONITOR_BUFFER, 0, "training completions kept; 0 keeps none"),
        max_new_tokens=integer("max_new_tokens", defaults.MONITOR_MAX_NEW_TOKENS, 1, "tokens per sampled completion"),
        concurrency=integer("concurrency", defaults.MONITOR_CONCURRENCY, 1, "gold calls in flight"),
        seed=integer("seed", defaults.MONITOR_SEED, 0, "a random seed"),
        n_boot=integer("n_boot", defaults.MONITOR_N_BOOT, 20, "a standard error needs tens of resamples at least"),
        n_perm=integer("n_perm", defaults.MONITOR_N_PERM, 10, "the scan's null needs at least ten permutations"),
        scan_min=integer("scan_min", defaults.MONITOR_SCAN_MIN, 2, "a feature seen once cannot be tested"),
        delta=positive("delta", defaults.MONITOR_DELTA, "the smallest change worth an alarm, in reward units"),
        length_pct=positive("length_pct", defaults.MONITOR_LENGTH_PCT, "relative length drift, e.g. 0.25 for 25%"),
        kl_budget=positive("kl_budget", defaults.MONITOR_KL_BUDGET, "nats of sequence KL; None for no budget"),
    )


def _endorsed(given: Any, problems: list[str]) -> tuple[str, ...]:
    """The endorsed formats as a tuple of names or texts (one string is one format)."""
    endorsed = () if given is None else ((given,) if isinstance(given, str) else given)
    if not isinstance(endorsed, Sequence) or not all(isinstance(e, str) and e.strip() for e in endorsed):
        problems.append(f"endorsed={given!r} must be a list of feature names or texts "
                        "(e.g. ['think'] or ['<answer>'])")
        endorsed = ()
    return tuple(endorsed)


def _stop_on(given: Any, kl_budget: float | None, problems: list[str]) -> tuple[str, ...]:
    """The alarm kinds that stop training, the unknown ones left out; 'kl' needs a ``kl_budget``."""
    stop_on = () if given is None else ((given,) if isinstance(given, str) else tuple(given))
    bad = [s for s in stop_on if s not in ALARM_KINDS and s != "any"]
    if bad:
        problems.append(f"stop_on={given!r} names {bad}; accepted: {list(ALARM_KINDS)} or 'any'")
        stop_on = tuple(s for s in stop_on if s not in bad)
    if "kl" in stop_on and kl_budget is None:
        problems.append("stop_on names 'kl' but kl_budget is None, so the KL alarm can never fire; "
                        "pass kl_budget= (nats of sequence KL)")
    return stop_on


def _sampling(given: Any, problems: list[str]) -> dict[str, float]:
    """MONITOR_SAMPLING with the given keys over it, each checked."""
    sampling = dict(defaults.MONITOR_SAMPLING)
    if given is not None:
        if not isinstance(given, Mapping):
            problems.append(f"sampling={given!r} must be a mapping with keys {list(_SAMPLING_KEYS)}")
        else:
            unknown = sorted(set(given) - set(_SAMPLING_KEYS))
            if unknown:
                problems.append(f"sampling has unknown keys {unknown}; accepted: {list(_SAMPLING_KEYS)}")
            sampling.update({k: v for k, v in given.items() if k in _SAMPLING_KEYS})
    s = sampling
    if not _is_real(s["temperature"]) or s["temperature"] <= 0:
        problems.append(f"sampling temperature={s['temperature']!r} must be > 0 (1.0 samples the policy itself)")
    if not _is_real(s["top_p"]) or not 0 < s["top_p"] <= 1:
        problems.append(f"sampling top_p={s['top_p']!r} must be in (0, 1]")
    if not _is_int(s["top_k"]) or s["top_k"] < 0:
        problems.append(f"sampling top_k={s['top_k']!r} must be an integer >= 0 (0 turns it off)")
    if not _is_int(s["batch"]) or s["batch"] < 1:
        problems.append(f"sampling batch={s['batch']!r} must be an integer >= 1 (sequences per generate call)")
    return sampling


def watched(fn: Callable[..., Any], record: Callable[[Any, tuple, dict, Any], None]) -> Callable[..., Any]:
    """``fn`` with ``record(fn, args, kwargs, rewards)`` after each call; same name, async stays async."""
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 (an async __call__, not callability)
    if is_async:
        async def watched_reward(*args: Any, **kwargs: Any) -> Any:
            rewards = await fn(*args, **kwargs)
            record(fn, args, kwargs, rewards)
            return rewards
    else:
        def watched_reward(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            rewards = fn(*args, **kwargs)
            record(fn, args, kwargs, rewards)
            return rewards
    functools.update_wrapper(watched_reward, fn)
    if not hasattr(fn, "__name__"):
        watched_reward.__name__ = type(fn).__name__
        watched_reward.__qualname__ = type(fn).__qualname__
    return watched_reward


def check_sampled(texts: Any, n: int, k: int) -> None:
    """Raise unless ``texts`` (what ``sample=`` returned) is ``n`` lists of ``k`` strings."""
    ok = isinstance(texts, (list, tuple)) and len(texts) == n and all(
        isinstance(ts, (list, tuple)) and len(ts) == k and all(isinstance(t, str) for t in ts) for ts in texts)
    if not ok:
        shape = f"{type(texts).__name__} of {len(texts)}" if isinstance(texts, (list, tuple)) else type(texts).__name__
        raise ValueError(f"sample() returned {shape}; it must return one list of {k} strings (n=) for each "
                         f"of the {n} prompts, in order")


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


def accepted(fn: Callable[..., Any], kwargs: dict[str, object]) -> dict[str, object]:
    """The keyword arguments of ``kwargs`` that ``fn`` takes (all of them when it takes ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return kwargs
    names = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                  inspect.Parameter.KEYWORD_ONLY)}
    return {k: v for k, v in kwargs.items() if k in names}


def _resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        async def wait() -> Any:
            return await value
        return asyncio.run(wait())
    return value


def _number(value: Any) -> float:
    if value is None:
        return math.nan
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    return float(value)


def call_proxy(proxy: Callable[..., Any], held: Sequence[sampling_.HeldOut], texts: list[list[str]],
               completions: list[Any], completion_ids: list[list[list[int]]] | None, state: Any,
               extra: Mapping[str, list[Any]] | None = None) -> np.ndarray:
    """The proxy's rewards for every held-out completion, called the way TRL calls a reward function.

    ``completions`` are the flattened completions in TRL's shape (``trl_completions``); ``extra`` holds what else
    TRL passes per completion (``environments=`` in an environment run).
    """
    prompts = [h.prompt for h, ts in zip(held, texts) for _ in ts]
    names = sorted({key for h in held for key in h.columns})
    kwargs: dict[str, object] = {key: [h.columns.get(key) for h, ts in zip(held, texts) for _ in ts] for key in names}
    kwargs.update(prompts=prompts, completions=completions, trainer_state=state, log_extra=_noop, log_metric=_noop)
    if completion_ids is not None:
        kwargs["completion_ids"] = [c for cs in completion_ids for c in cs]
    kwargs.update(extra or {})
    name = getattr(proxy, "__name__", type(proxy).__name__)
    out = _resolve(proxy(**accepted(proxy, kwargs)))
    try:
        values = np.array([_number(v) for v in out], dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the proxy {name!r} returned {str(out)[:80]!r}; a reward function returns one number "
                         f"(or None) per completion") from exc
    if len(values) != len(completions):
        raise ValueError(f"the proxy {name!r} returned {len(values)} rewards for {len(completions)} completions; "
                         "it must return one per completion")
    return values


def _reward_of(result: Any) -> float:
    if isinstance(result, Mapping):
        result = result.get("reward")
    if isinstance(result, (str, bytes)):
        raise TypeError(f"the gold judge returned {result!r}; a judge returns a number or {{'reward': number}}")
    value = _number(result)
    return value if math.isfinite(value) else math.nan


def score_gold(gold: Callable[..., Any], rows: list[dict[str, Any]], concurrency: int) -> tuple[np.ndarray, int, str | None]:
    """Gold rewards for ``rows`` (NaN where the judge failed), the failure count and the first failure.

    A judge with ``judge_many(rows)`` (a reward-model judge) is asked for all rows
    at once; any other judge row by row, ``concurrency`` calls at a time.
    """
    if not rows:
        return np.zeros(0), 0, None
    many = getattr(gold, "judge_many", None)
    if callable(many):
        try:
            return np.array([_reward_of(r) for r in many(rows)], dtype=float), 0, None
        except Exception:  # fall back to one row at a time, which reports per row
            pass

    def one(row: dict[str, Any]) -> tuple[float, str | None]:
        try:
            return _reward_of(gold(row)), None
        except Exception as exc:
            return math.nan, f"{type(exc).__name__}: {exc}"

    if concurrency > 1 and len(rows) > 1:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(rows))) as pool:
            results = list(pool.map(one, rows))
    else:
        results = [one(r) for r in rows]
    errors = [e for _, e in results if e is not None]
    return np.array([v for v, _ in results], dtype=float), len(errors), (errors[0] if errors else None)
