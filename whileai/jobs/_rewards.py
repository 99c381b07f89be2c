"""GRPO's reward functions, as TRL takes them: one callable per ``reward`` entry, and their weights.

Each function has TRL's shape, ``f(prompts, completions, completion_ids=None, **columns) -> list[float]``,
and a ``__name__`` that becomes TRL's ``rewards/<name>`` curve on the run page:

- ``first_action``: 1.0 when the reply's first action satisfies the row's gold, else 0.0 (the exact judge,
  decided as the held-out measurement decides, ``judge_reply``);
- ``fine_grained``: ``whileai.domain.judges.rewards.fine_grained_score`` of the same parsed reply;
- ``reward_model``: the rm run named by ``reward_model``, resolved by the platform at launch (the job row's
  ``reward_rm``), its score mapped to (0, 1) around the rm's own threshold (REWARD_RM_TEMPERATURE);
- ``python:MODULE:FUNCTION``: the user's function as it is, under its own name.

``truncated="zero"`` scores a reply the token cap cut 0 for the built-in rewards; a user's function gets
``completion_ids`` and decides for itself.

:func:`proxy_vs_gold` is what the run records when the reward is not the exact judge: the held-out reward
and the exact judge before and after, on the same prompts, and whether the reward rose more than the task.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict, cast

from whileai.core.spec import GRPOSpec
from whileai.domain import defaults
from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._training_fields import RewardVsExact

__all__ = ["first_action_reward", "reward_functions", "proxy_reward", "reply_text", "proxy_vs_gold",
           "reward_search_path", "AssistantMessage"]

Reward = Callable[..., list[float]]


class AssistantMessage(TypedDict):
    """A generated reply as an OpenAI assistant message: its text, and its tool calls in the wire's shape
    (``{"type", "function": {"name", "arguments"}}``) where it made any."""

    role: str  # always "assistant"
    content: str | None
    tool_calls: NotRequired[list[dict[str, Any]]]


def _as_assistant_message(completion: Any) -> AssistantMessage:
    """A parsed reply (TRL's message, arguments as dicts) as an OpenAI assistant message."""
    if isinstance(completion, list):
        completion = completion[-1] if completion else {}
    if isinstance(completion, str):
        from whileai.kit import parse_tool_calls

        content, calls = parse_tool_calls(completion)
        parsed: AssistantMessage = {"role": "assistant", "content": content}
        if calls:
            parsed["tool_calls"] = calls
        return parsed
    message: AssistantMessage = {"role": "assistant", "content": completion.get("content")}
    if completion.get("tool_calls"):
        message["tool_calls"] = completion["tool_calls"]
    return message


def reply_text(completion: Any, ids: Any, tokenizer: Any, tool_format: str = "hermes") -> str:
    """The generated text: the decoded token ids, else the completion's text, else its calls as the template writes
    them (in ``tool_format``, the format the verdict parses)."""
    if tokenizer is not None and ids is not None:
        return cast(str, tokenizer.decode(list(ids), skip_special_tokens=False))
    if isinstance(completion, str):
        return completion
    from whileai.core.toolcalls import format_tool_call

    message = _as_assistant_message(completion)
    calls = [c.get("function", c) for c in message.get("tool_calls") or []]
    return "\n".join([message.get("content") or ""] + [format_tool_call(c["name"], c.get("arguments") or {}, tool_format)
                                                        for c in calls]).strip()


def _cut(truncated: str, stop_ids: set[int], ids: Any) -> bool:
    """Whether ``truncated="zero"`` scores this reply 0: the token cap cut it (no stop token at its end)."""
    return truncated == "zero" and ids is not None and (not ids or ids[-1] not in stop_ids)


def _gold(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _scored(name: str, score: Callable[[str, Mapping[str, Any]], float], truncated: str, stop_ids: set[int],
            tokenizer: Any, tools: Any) -> Reward:
    """A TRL reward named ``name`` that scores each reply's text against its row with ``score(text, row)``."""
    fmt = _format(tokenizer)  # the run's tool convention: one per run, not one per completion

    def reward(prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Sequence[Any] | None = None,
               gold: Any = None, row_tools: Sequence[str] | None = None, **_columns: Any) -> list[float]:
        out: list[float] = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            ids = completion_ids[i] if completion_ids is not None else None
            if _cut(truncated, stop_ids, ids):
                out.append(0.0)
                continue
            own = json.loads(row_tools[i]) if row_tools is not None else None  # the prompt's own row's tools
            row = {"messages": list(prompt) if isinstance(prompt, list) else [], "gold": _gold(gold[i]),
                   "tools": own if own else tools}
            out.append(score(reply_text(completion, ids, tokenizer, fmt), row))
        return out

    reward.__name__ = reward.__qualname__ = name
    return reward


def _format(tokenizer: Any) -> str:
    from whileai.kit import reply_format

    return reply_format(tokenizer) if tokenizer is not None else "hermes"  # the run's tool convention


def tallied(paid: Reward, exact: Reward, tally: list[float]) -> Reward:
    """``paid``, unchanged in name and values, that also judges the same completions with ``exact`` into ``tally``.

    Where a run pays a graded reward, its sampled pass rate comes from here
    (``_grpo_watch``): the exact judge's verdicts are never paid, and TRL's
    weights, sums and unscorable rows are what they would be without it. An
    async ``paid`` stays async; a judge that fails leaves the tally short and
    never the step.
    """

    def judge(kwargs: dict[str, object]) -> None:  # the reward's keyword arguments, handed on unread
        try:
            verdicts = [float(v) for v in exact(**kwargs)]
        except Exception:  # noqa: BLE001 (a figure beside the reward must never stop training)
            return
        tally.extend(verdicts)

    async def async_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> Any:
        values = await cast(Any, paid)(prompts=prompts, completions=completions, **kwargs)
        judge({"prompts": prompts, "completions": completions, **kwargs})
        return values

    def sync_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> Any:
        values = paid(prompts=prompts, completions=completions, **kwargs)
        judge({"prompts": prompts, "completions": completions, **kwargs})
        return values

    is_async = inspect.iscoroutinefunction(paid) or inspect.iscoroutinefunction(getattr(paid, "__call__", None))  # noqa: B004
    reward = cast(Reward, async_reward if is_async else sync_reward)
    reward.__name__ = reward.__qualname__ = getattr(paid, "__name__", "reward")
    return reward


def first_action_reward(truncated: str, stop_ids: set[int], tokenizer: Any = None, tools: Any = None) -> Reward:
    """The exact first-action reward: 1.0 when a reply's first action satisfies the row's gold, else 0.0.

    It decides exactly as the held-out measurement does (``judge_reply``): the reply's text goes through the
    run's tool-call parser, and the first-action judge reads every gold form with the tools' JSON schemas.
    TRL's own response parsing is not used for the verdict, so a reply cannot pass one and fail the other.
    """
    from whileai.domain.judges.judging import judge_reply

    fmt = _format(tokenizer)
    return _scored("first_action", lambda text, row: float(judge_reply(text, row, tool_format=fmt)["reward"]),
                   truncated, stop_ids, tokenizer, tools)


def fine_grained_reward(truncated: str, stop_ids: set[int], tokenizer: Any = None, tools: Any = None) -> Reward:
    """ToolRL's decomposed reward (``whileai.domain.judges.rewards.fine_grained_score``) of each reply."""
    from whileai.core.toolcalls import parse_tool_call_objects
    from whileai.domain.judges.rewards import fine_grained_score

    fmt = _format(tokenizer)

    def score(text: str, row: Mapping[str, Any]) -> float:
        content, calls = parse_tool_call_objects(_visible(text, tokenizer), fmt)
        turn = {"role": "assistant", "content": content,
                "tool_calls": [{"function": {"name": n, "arguments": a}} for n, a in calls]}
        formatted = not _leftover_markup(content, fmt)
        return float(fine_grained_score(turn, row["gold"], formatted=formatted)["reward"])

    return _scored("fine_grained", score, truncated, stop_ids, tokenizer, tools)


def _visible(text: str, tokenizer: Any) -> str:
    """The reply without the tokenizer's special tokens (the end of turn), which no convention reads as content."""
    for token in getattr(tokenizer, "all_special_tokens", None) or ():
        if token:
            text = text.replace(token, "")
    return text


def _leftover_markup(content: str | None, tool_format: str) -> bool:
    """Whether call markup is left in the reply's text after the parse: a call the parser could not read."""
    from whileai.core.toolcalls import CALL_MARKERS

    if tool_format == "llama3":  # its markers include a bare "{" and "[", which plain prose may hold
        return False
    return bool(content) and any(marker in str(content) for marker in CALL_MARKERS[tool_format])


def rm_reward(judge: Any, truncated: str, stop_ids: set[int], tokenizer: Any = None, tools: Any = None) -> Reward:
    """A reward model's score of each reply (prompt, tools and reply, as the rm reads a row), in (0, 1):
    ``sigmoid((score - threshold) / REWARD_RM_TEMPERATURE)``, so the rm's own pass threshold is 0.5."""
    from whileai.core.toolcalls import parse_tool_calls

    fmt = _format(tokenizer)

    def reward(prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Sequence[Any] | None = None,
               **_columns: Any) -> list[float]:
        rows, cut = [], []
        for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            ids = completion_ids[i] if completion_ids is not None else None
            cut.append(_cut(truncated, stop_ids, ids))
            content, calls = parse_tool_calls(_visible(reply_text(completion, ids, tokenizer, fmt), tokenizer), fmt)
            turn: AssistantMessage = {"role": "assistant", "content": content}
            if calls:
                turn["tool_calls"] = calls
            rows.append({"messages": [*(list(prompt) if isinstance(prompt, list) else []), turn], "tools": tools})
        scores = judge.score(rows)
        scale = float(defaults.REWARD_RM_TEMPERATURE)
        return [0.0 if c else 1.0 / (1.0 + math.exp(-(s - judge.threshold) / scale)) for s, c in zip(scores, cut)]

    reward.__name__ = reward.__qualname__ = "reward_model"
    return reward


def reward_search_path() -> str | None:
    """The directory a ``python:`` reward's module is imported from in this job: the launching user's working
    directory, which only the embedded platform records (the job row's ``platform.reward_path``); None elsewhere."""
    from whileai.jobs._loading import JOB_PLATFORM

    platform = JOB_PLATFORM.get()
    return platform.reward_path or None if platform is not None else None


def reward_functions(spec: GRPOSpec, tokenizer: Any, tools: Any, stop_ids: set[int]) -> tuple[list[Reward], list[float]]:
    """The run's reward functions in ``reward``'s order, and their weights (``reward_weights``; 1.0 each)."""
    from whileai.core.spec import PYTHON_PREFIX
    from whileai.domain.judges.rewards import load_python_reward

    funcs: list[Reward] = []
    for name in spec.reward:
        if name == "first_action":
            funcs.append(first_action_reward(spec.truncated, stop_ids, tokenizer, tools))
        elif name == "fine_grained":
            funcs.append(fine_grained_reward(spec.truncated, stop_ids, tokenizer, tools))
        elif name == "rm":
            from whileai.jobs._loading import reward_model_judge

            funcs.append(rm_reward(reward_model_judge(spec), spec.truncated, stop_ids, tokenizer, tools))
        elif name.startswith(PYTHON_PREFIX):
            funcs.append(load_python_reward(name, reward_search_path()))
        else:  # the spec's knob check refuses anything else before a job exists
            raise ValueError(f"reward={name!r} is not a reward this job builds")
    weights = list(spec.reward_weights) if spec.reward_weights is not None else [1.0] * len(funcs)
    return funcs, weights


def proxy_reward(funcs: Sequence[Reward], weights: Sequence[float]) -> Reward:
    """The one number the policy is paid: the rewards' weighted sum (TRL's own sum, None counted as 0)."""
    if len(funcs) == 1 and weights[0] == 1.0:
        return funcs[0]

    def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        total = [0.0] * len(completions)
        for fn, weight in zip(funcs, weights, strict=True):
            for i, value in enumerate(fn(prompts=prompts, completions=completions, **kwargs)):
                total[i] += weight * (float(value) if value is not None else 0.0)
        return total

    reward.__name__ = reward.__qualname__ = "reward"
    return reward


def proxy_vs_gold(before: HeldOutMeasure | None, after: HeldOutMeasure | None) -> RewardVsExact | None:
    """The held-out reward against the exact judge, before and after, on the same prompts; None without both.

    Per prompt, ``gap_change`` is (reward after - before) - (exact after - before): how much more the reward
    rose than the task. ``p`` is the exact two-sided sign test over the prompts where it is not zero, so a
    reward that rises more than the task on most prompts reads as significant. A hacked run shows a positive
    ``gap_change`` with a small ``p``; an honest one a change near zero.
    """
    if before is None or after is None:
        return None
    pb, pa, gb, ga = before.proxy_scores, after.proxy_scores, before.outcomes, after.outcomes
    if pb is None or pa is None or gb is None or ga is None or not len(pb) == len(pa) == len(gb) == len(ga) or not pb:
        return None
    from whileai.core.stats import mcnemar_exact

    diffs = [(b2 - b1) - (g2 - g1) for b1, b2, g1, g2 in zip(pb, pa, gb, ga)]
    rose, fell = sum(1 for d in diffs if d > 1e-9), sum(1 for d in diffs if d < -1e-9)
    n = len(diffs)
    return {"reward_before": sum(pb) / n, "reward_after": sum(pa) / n, "exact_before": sum(gb) / n,
            "exact_after": sum(ga) / n, "gap_change": sum(diffs) / n, "prompts": n,
            "reward_rose_more": rose, "task_rose_more": fell, "p": mcnemar_exact(rose, fell)}
