"""The episode loop: a policy and an environment take turns until the policy stops calling tools or the cap.

It plays an episode the way TRL's GRPOTrainer plays a rollout with ``environment_factory`` (its tool-calling
loop, trl/trainer/grpo_trainer.py), so an episode measured here is the one training sees:

- ``reset(**row)`` starts it (every column of the dataset row); a string it returns is appended to the last
  user message, and a row without a ``prompt`` starts from an empty user message;
- the tool calls of a reply run in order, each answered by ``{"role": "tool", "name": ..., "content":
  str(result)}``;
- a tool that raises, a tool the environment does not have, and arguments that are not a JSON object are
  answered with ``str({"error": "<the message>"})`` as the tool's content; the episode goes on;
- after ``max_turns`` rounds of tool calls the loop stops, and the last reply's calls are not run.

An environment whose episode has several user turns (``environment.episode`` a
:class:`~whileai.domain.episodes.protocol.TurnByTurn`, as BFCL's is) is played past TRL's loop, as BFCL's own
inference plays it: after a reply without calls, the next user turn's messages are appended (and the functions it
offers become callable) and the policy answers again; the episode ends after the last user turn. A turn that reaches
``max_turns`` ends the whole episode (BFCL force-quits an entry whose turn runs out of steps, and fails it), and so
does ``max_rounds`` rounds over all the turns (EPISODE_MAX_ROUNDS: a runaway episode of many turns), each with its
reason in ``stopped``. An environment of one user turn (the kit's) is played exactly as TRL plays it.

    episode = play_episode(policy, KitEnvironment(), row, max_turns=6)
    episode.messages, episode.end_state, episode.stopped   # the conversation, the state, "answered" or "cap"

A policy is any callable from the conversation so far to the next assistant message, a mapping with
``content`` and optional OpenAI-wire ``tool_calls`` (``{"type": "function", "function": {"name",
"arguments"}}``, arguments a mapping or JSON text); a plain string is a reply without calls.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from whileai.domain import defaults
from whileai.domain.episodes.protocol import TurnByTurn, end_state, tool_methods, turn_by_turn

__all__ = ["Policy", "Episode", "Stopped", "play_episode", "run_tool_call"]

#: The conversation so far -> the next assistant message.
Policy = Callable[[list[dict[str, Any]]], Mapping[str, Any] | str]

#: Why an episode stopped: ``answered``, a reply without calls in its last user turn; ``cap``, ``max_turns`` rounds
#: reached in one user turn; ``episode_cap``, ``max_rounds`` rounds reached over all its user turns.
Stopped = Literal["answered", "cap", "episode_cap"]


@dataclass(frozen=True)
class Episode:
    """A played episode: the whole conversation (prompt and later user turns included), the environment's end state,
    the tool-calling rounds that ran (over all user turns), and why it stopped (:data:`Stopped`)."""

    messages: list[dict[str, Any]]
    end_state: dict[str, Any]
    rounds: int
    stopped: Stopped

    @property
    def final_reply(self) -> str:
        """The text of the last assistant message ("" when there is none)."""
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                return str(message.get("content") or "")
        return ""


def _assistant(reply: Mapping[str, Any] | str) -> dict[str, Any]:
    """The policy's reply as an assistant message of the conversation."""
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    if not isinstance(reply, Mapping):
        raise TypeError(f"the policy returned {type(reply).__name__}, not a message; return a mapping "
                        "{'role': 'assistant', 'content': ..., 'tool_calls': [...]} or a string")
    return {**reply, "role": "assistant"}


def _arguments(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, Mapping):
        raise ValueError(f"the arguments {raw!r} are not a JSON object of named arguments")
    return dict(value)


def run_tool_call(tools: Mapping[str, Callable[..., Any]], call: Mapping[str, Any]) -> dict[str, Any]:
    """One tool call run against ``tools`` (name -> bound method), answered as TRL answers it: the result as
    text, or ``{'error': ...}`` as text when the call cannot run or the tool raises."""
    nested = call.get("function")
    function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else call
    name = str(function.get("name") or "unknown")
    result: Any
    try:
        if call.get("type", "function") != "function":
            raise ValueError(f"Unsupported tool call type: {call.get('type')}")
        arguments = _arguments(function.get("arguments"))
        if name not in tools:
            raise ValueError(f"Tool {name} not found.")
        result = tools[name](**arguments)
    except Exception as exc:  # the tool's failure is the model's to read, never the loop's to die of
        result = {"error": str(exc)}
    message: dict[str, Any] = {"role": "tool", "name": name, "content": result if isinstance(result, list)
                               else str(result)}
    if call.get("id"):
        message["tool_call_id"] = call["id"]
    return message


def _start(environment: Any, row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The opening messages: the row's prompt, with what ``reset`` returned appended to its last message."""
    prompt = row.get("prompt")
    messages = ([{"role": "user", "content": prompt}] if isinstance(prompt, str)
                else [dict(m) for m in prompt] if prompt else [{"role": "user", "content": ""}])
    observation = environment.reset(**row)
    if observation is not None:
        messages[-1] = {**messages[-1], "content": str(messages[-1].get("content") or "") + str(observation)}
    return messages


def _play_turn(policy: Policy, tools: Mapping[str, Callable[..., Any]], messages: list[dict[str, Any]], cap: int,
               left: int) -> int:
    """One user turn: the policy answers, its calls run, until a reply without calls, ``cap`` rounds in the turn or
    ``left`` rounds in the episode; the rounds that ran (the last reply's calls, at a cap, never run)."""
    messages.append(_assistant(policy(list(messages))))
    rounds = 0
    while messages[-1].get("tool_calls") and rounds < min(cap, left):
        calls: Sequence[Mapping[str, Any]] = messages[-1]["tool_calls"]
        messages.extend(run_tool_call(tools, call) for call in calls)
        rounds += 1
        messages.append(_assistant(policy(list(messages))))
    return rounds


def _run_by_name(turns: TurnByTurn, name: str, **arguments: Any) -> Any:
    return turns.call(name, arguments)


def _offer(tools: dict[str, Callable[..., Any]], turns: TurnByTurn) -> None:
    """Make each function the episode offers from this turn on callable (BFCL's withheld functions, at their turn)."""
    for schema in turns.tools():
        name = str(schema["function"]["name"])
        if name not in tools:
            tools[name] = functools.partial(_run_by_name, turns, name)


def play_episode(policy: Policy, environment: Any, row: Mapping[str, Any], *,
                 max_turns: int | None = None, max_rounds: int | None = None) -> Episode:
    """Play one episode of ``environment`` from the dataset ``row`` with ``policy``, every user turn of it.

    ``max_turns`` caps the rounds of tool calls in one user turn (None: ``EPISODE_MAX_TURNS``): in an episode of one
    user turn the policy is asked at most ``max_turns + 1`` times. ``max_rounds`` caps them over all its user turns
    (None: ``EPISODE_MAX_ROUNDS``). Returns the :class:`Episode`; only the policy's own exceptions escape.
    """
    cap = defaults.EPISODE_MAX_TURNS if max_turns is None else max_turns
    total = defaults.EPISODE_MAX_ROUNDS if max_rounds is None else max_rounds
    tools = {method.__name__: method for method in tool_methods(environment)}
    messages = _start(environment, row)
    turns = turn_by_turn(environment)
    rounds = 0
    while True:
        played = _play_turn(policy, tools, messages, cap, total - rounds)
        rounds += played
        if messages[-1].get("tool_calls"):  # a cap: the turn's, or the episode's over all its turns
            if turns is not None:
                turns.force_end()
            stopped: Stopped = "cap" if played >= cap else "episode_cap"
            break
        following = turns.next_turn() if turns is not None else None
        if turns is None or following is None:
            stopped = "answered"
            break
        messages.extend(dict(m) for m in following)
        _offer(tools, turns)
    return Episode(messages=messages, end_state=end_state(environment), rounds=rounds, stopped=stopped)
