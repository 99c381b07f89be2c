"""Gold episodes as rollout rows: what SFT clones, what GRPO resets its environment from, what the judge replays.

Each kit task becomes one rollout row (docs/rows.md) that the runner loads, pushes and cuts by task like any
other dataset:

- ``messages``: the instruction, then one assistant turn per gold call, each answered by its tool message exactly
  as the episode loop and TRL answer it (:func:`~whileai.domain.episodes.loop.run_tool_call`), then a final reply
  that says what the task asks to be said;
- ``tools``: the environment's tools as TRL shows them (``tool_schemas``);
- ``passed: true`` and ``reward: 1.0``; ``gold``: the first gold call (what the first-action judge and the data
  gates read); ``task_id``; ``category``: the task's kind, so held-out figures break down per kind;
- ``episode`` (:data:`EPISODE_FIELD`): ``{"environment", "reset", "calls", "responses"}``, the environment's
  name, the keyword arguments its ``reset`` takes, the gold calls and the words the final reply must say.

The prompt carries no system message: the kit model's context (KIT_MAX_POSITIONS) holds the tool list, the
instruction and a four-call episode only without KIT_SYSTEM_PROMPT's 84 tokens (measured with the kit tokenizer:
561 tokens with it, 477 without, for the longest task kind).

    rows = kit_episode_rows(kit_tasks(1000))
    gold = episode_gold(rows[0])            # EpisodeGold(environment="kit", reset={...}, calls=(...), ...)
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from whileai.domain.episodes.judge import GoldCall, read_gold_call
from whileai.domain.episodes.kit import KitEnvironment, KitTask
from whileai.domain.episodes.loop import run_tool_call
from whileai.domain.episodes.protocol import tool_methods, tool_schemas

__all__ = ["EPISODE_FIELD", "EpisodeGold", "WireCall", "episode_gold", "gold_messages", "wire_call", "kit_reply",
           "kit_episode_rows", "has_episode", "held_out_episodes", "episode_digest"]

#: The row field that makes a rollout row an episode row.
EPISODE_FIELD = "episode"


@dataclass(frozen=True)
class EpisodeGold:
    """What an episode row says of its episode: the environment's name, ``reset``'s keyword arguments, the gold calls
    (``{"name", "arguments"}`` each) and the words the final reply must say."""

    environment: str
    reset: dict[str, Any]
    calls: tuple[GoldCall, ...]
    responses: tuple[str, ...] = ()

    def to_json(self) -> str:
        """The gold as JSON text (a dataset column TRL passes through to the reward)."""
        return json.dumps({"environment": self.environment, "reset": self.reset, "calls": list(self.calls),
                           "responses": list(self.responses)}, sort_keys=True)


def has_episode(row: Mapping[str, Any]) -> bool:
    """Whether ``row`` is an episode row (it carries :data:`EPISODE_FIELD`)."""
    return isinstance(row.get(EPISODE_FIELD), Mapping)


def episode_gold(row: Mapping[str, Any] | str) -> EpisodeGold:
    """The :class:`EpisodeGold` of an episode row (or of its :meth:`EpisodeGold.to_json` text).

    Raises ValueError naming what is missing and how such a row is made."""
    data = json.loads(row) if isinstance(row, str) else row.get(EPISODE_FIELD)
    if not isinstance(data, Mapping):
        raise ValueError(f"the row has no {EPISODE_FIELD!r} field (a mapping), so it is not an episode row; make "
                         "episode rows with whileai.domain.episodes.kit_episode_rows, or load dataset=episodes")
    missing = [key for key in ("environment", "reset", "calls") if key not in data]
    if missing or not isinstance(data["reset"], Mapping) or not isinstance(data["calls"], list):
        raise ValueError(f"the row's {EPISODE_FIELD!r} field {dict(data)!r} needs 'environment' (a name), 'reset' (a "
                         f"mapping of reset's arguments) and 'calls' (a list of gold calls); missing: "
                         f"{', '.join(missing) or 'none, but reset or calls has the wrong type'}")
    return EpisodeGold(environment=str(data["environment"]), reset=dict(data["reset"]),
                       calls=tuple(read_gold_call(c) for c in data["calls"]),
                       responses=tuple(str(r) for r in data.get("responses") or ()))


class WireFunction(TypedDict):
    """The function of an OpenAI-wire tool call: its name and its arguments as JSON text."""

    name: str
    arguments: str


class WireCall(TypedDict):
    """A tool call in OpenAI wire shape: its id, its type (``function``) and the function called."""

    id: str
    type: str
    function: WireFunction


def wire_call(index: int, call: Mapping[str, Any]) -> WireCall:
    """A gold call as an OpenAI-wire tool call (arguments as JSON text), numbered within its episode."""
    return {"id": f"call_{index}", "type": "function",
            "function": {"name": str(call["name"]), "arguments": json.dumps(call.get("arguments") or {})}}


def gold_messages(factory: Callable[[], Any], gold: EpisodeGold, prompt: Sequence[Mapping[str, Any]],
                  reply: str) -> list[dict[str, Any]]:
    """The gold episode's conversation: ``prompt``, one assistant turn per gold call answered by the tool message the
    episode loop writes (run on a fresh environment from ``factory``, reset with ``gold.reset``), then ``reply``.

    Raises ValueError when a gold call's tool answers with an error: such a gold would teach a failing call."""
    environment = factory()
    environment.reset(**gold.reset)
    tools = {method.__name__: method for method in tool_methods(environment)}
    messages = [dict(m) for m in prompt]
    for index, call in enumerate(gold.calls):
        wire = wire_call(index, call)
        answer = run_tool_call(tools, wire)
        if str(answer["content"]).startswith("{'error'"):
            raise ValueError(f"gold call {index} ({call['name']} with {call.get('arguments')!r}) was answered "
                             f"{answer['content']}; fix the task's gold calls so each runs in order")
        messages += [{"role": "assistant", "content": None, "tool_calls": [wire]},
                     {**answer, "tool_call_id": wire["id"]}]
    return [*messages, {"role": "assistant", "content": reply}]


def kit_reply(task: KitTask) -> str:
    """The gold final reply of a kit task: one short sentence, saying each number the task asks to be told."""
    if not task.responses:
        return "Done."
    return "Done. The balance is " + " and ".join(task.responses) + "."


def kit_episode_rows(tasks: Iterable[KitTask]) -> list[dict[str, Any]]:
    """One passing episode row per kit task (see the module): its gold conversation, tools, gold and episode."""
    schemas = tool_schemas(KitEnvironment())
    rows = []
    for task in tasks:
        gold = EpisodeGold(environment="kit", reset={"kit_task": task.to_json()}, calls=task.gold,
                           responses=task.responses)
        prompt = [{"role": "user", "content": task.instruction}]
        rows.append({
            "messages": gold_messages(KitEnvironment, gold, prompt, kit_reply(task)),
            "tools": schemas,
            "reward": 1.0,
            "passed": True,
            "gold": dict(task.gold[0]),
            "task_id": task.task_id,
            "category": task.kind,
            EPISODE_FIELD: json.loads(gold.to_json()),
        })
    return rows


def _gold_key(row: Mapping[str, Any]) -> str:
    return hashlib.sha256(episode_gold(row).to_json().encode()).hexdigest()


def held_out_episodes(rows: Sequence[Mapping[str, Any]], limit: int | None, seed: int) -> list[Mapping[str, Any]]:
    """One row per distinct episode of ``rows`` (its environment, reset arguments and gold), at most ``limit`` of
    them, drawn with ``seed`` as the first-action measurement draws its prompts: what a held-out measure plays."""
    seen: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if has_episode(row):
            seen.setdefault(_gold_key(row), row)
    chosen = list(seen.values())
    if limit is not None and len(chosen) > limit:
        chosen = random.Random(seed).sample(chosen, limit)
    return chosen


def episode_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """Which episodes were played, in which order: two runs pair episode by episode only when their digests are
    equal."""
    keys = "[" + ", ".join(_gold_key(row) for row in rows) + "]"
    return hashlib.sha256(keys.encode()).hexdigest()[:16]
