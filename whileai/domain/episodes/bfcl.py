"""BFCL's multi-turn categories as an environment: bfcl-eval's own backends behind TRL's tool contract.

An episode runs on bfcl-eval's stateful backends loaded with the entry's starting state, each call answered
as BFCL's executor answers it (:class:`~whileai.domain.judges.bfcl_multi_turn.BfclBackends`). This module
wraps them as an environment TRL's ``environment_factory`` takes:

- :func:`bfcl_environments` makes one class per environment name (the entry's backends and the functions
  withheld at its first turn, :func:`~whileai.domain.rows.bfcl_multi_turn.environment_name`); its public
  methods are the offered functions, each with a signature and a Google-style docstring made from BFCL's
  function doc, so ``get_json_schema`` shows the model what BFCL shows it. Pass the dict as TRL's
  ``environment_factory`` with rows from :func:`~whileai.domain.rows.bfcl_multi_turn.episode_rows`.
- ``reset(**row)`` loads the row's entry into fresh backends; ``get_reward()`` is 1.0 when the turns
  played pass BFCL's multi-turn check (``whileai.domain.judges.bfcl_multi_turn``), else 0.0.
- ``environment.episode`` (a property, so not a tool) is what an episode loop drives: the current turn's
  user messages and offered tools, ``call`` for any function by name (BFCL runs whatever the model calls,
  offered or not), ``next_turn`` and the verdict.

bfcl-eval is imported when the first episode starts; without it the error says how to install it.

    envs = bfcl_environments(entries, bfcl_data_folder())   # or environment_factory("multi_turn_base")
    trainer = GRPOTrainer(model, environment_factory=envs, train_dataset=Dataset.from_list(episode_rows(entries)))

What is played: ``whileai.domain.episodes.loop.play_episode`` (and ``whileai.jobs._episode_play.play_episodes``,
the held-out measure's and the HackMonitor's player, built on it) plays every user turn of the entry, as BFCL's own
inference does: after a reply without calls the next turn's user messages follow (BFCL's added-functions prompt at a
turn that only adds functions, which are callable from then on), the episode ends after the last turn, and
``get_reward`` judges all of them. A turn that reaches the loop's turn cap ends the entry (``force_end``; BFCL
force-quits it and fails it).

GRPO under TRL's own loop (``environment_factory``) plays the first user turn only: TRL 1.16's
``GRPOTrainer._tool_call_loop`` ends a rollout at a reply without calls and has no hook for a next user turn, and its
``rollout_func`` does not combine with ``environment_factory`` (with an environment's tools TRL runs its own tool loop
on what ``rollout_func`` returns and builds an all-ones tool mask, dropping the ``env_mask`` that would keep user and
tool turns out of the loss). So a training rollout is the first user turn and ``get_reward`` judges the turns played,
that first turn. Either loop refuses a call of a function not offered (yet) before it reaches the backends; BFCL
would run it.
"""

from __future__ import annotations

import copy
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from whileai.domain.episodes.judge import GoldCall
from whileai.domain.judges.bfcl_multi_turn import (INSTALL_HINT, BfclBackends, MultiTurnVerdict, ToolCall,
                                                   backend_classes, judge_multi_turn)
from whileai.domain.rows.bfcl import bfcl_data_folder
from whileai.domain.rows.bfcl_multi_turn import (BFCL_MULTI_TURN_CATEGORIES, MultiTurnEntry, environment_name,
                                                 parse_environment_name, read_func_docs, read_multi_turn)

__all__ = ["environment_factory", "bfcl_environments", "environment_class", "environment_named", "gold_calls",
           "BfclEnvironment", "BfclEpisode", "ADDED_FUNCTIONS_PROMPT"]

#: The user's message at a turn that only adds withheld functions (bfcl-eval 2026.3.23,
#: constants/default_prompts.py DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
#: A parameter's type as BFCL's function docs name it -> the class a tool's signature annotates it with.
_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "number": float, "boolean": bool,
                        "dict": dict, "object": dict, "array": list, "any": str}


class BfclEpisode:
    """One entry played turn by turn: what an episode loop asks of a BFCL environment.

    ``calls[i]`` holds the calls made in turn ``i`` (in order); ``turn`` is the turn being played.
    """

    def __init__(self, entry: MultiTurnEntry, tools: Mapping[str, Callable[..., Any]]) -> None:
        self.entry = entry
        self.backends = BfclBackends(entry)
        self.turn = 0
        self.calls: list[list[ToolCall]] = [[]]
        self.forced_end = False
        self._tools = tools

    @property
    def done(self) -> bool:
        return self.forced_end or self.turn >= len(self.entry.turns)

    def user_messages(self) -> list[dict[str, str]]:
        """The messages opening the current turn; BFCL's added-functions prompt at a turn that only adds some."""
        if self.turn in self.entry.missed_functions and not self.entry.turns[self.turn]:
            return [{"role": "user", "content": ADDED_FUNCTIONS_PROMPT}]
        return [dict(m) for m in self.entry.turns[self.turn]]

    def tools(self) -> list[dict[str, Any]]:
        """The tools offered in the current turn, as JSON schemas (what TRL renders for the first turn)."""
        withheld = self.entry.withheld(self.turn)
        return [copy.deepcopy(_schema(tool)) for name, tool in self._tools.items() if name not in withheld]

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run a call in the current turn, record it, and return BFCL's response text."""
        call = ToolCall(name, dict(arguments))
        self.calls[-1].append(call)
        return self.backends.run(call)

    def next_turn(self) -> list[dict[str, str]] | None:
        """Close the current turn; the next turn's user messages, or None when every turn is played."""
        self.turn += 1
        if self.done:
            return None
        self.calls.append([])
        return self.user_messages()

    def force_end(self) -> None:
        """End the episode before its last turn (BFCL fails an entry whose model ran out of steps)."""
        self.forced_end = True

    def verdict(self) -> MultiTurnVerdict:
        """BFCL's multi-turn verdict on the turns played so far (all of them once the episode is done)."""
        return judge_multi_turn(self.entry, self.calls, played=None if self.forced_end else len(self.calls))


@functools.cache
def _schema(tool: Callable[..., Any]) -> dict[str, Any]:
    """A tool's JSON schema, made once per tool (an episode asks for its turn's tools at every reply)."""
    from transformers.utils import get_json_schema

    return get_json_schema(tool)


class BfclEnvironment:
    """A BFCL multi-turn environment; :func:`environment_class` adds the tools of one set of backends."""

    #: The tools of every involved function by name, offered or withheld at the first turn (set per class)
    _all_tools: ClassVar[dict[str, Callable[..., Any]]] = {}

    def __init__(self) -> None:
        self._episode: BfclEpisode | None = None

    def reset(self, **row: Any) -> str | None:
        """Load the row's entry (``bfcl_entry``, as ``episode_rows`` writes it) into fresh backends."""
        if "bfcl_entry" not in row:
            raise ValueError(f"{type(self).__name__}.reset needs the row's 'bfcl_entry' column (got "
                             f"{sorted(row)}); build the rows with episode_rows(entries)")
        entry = MultiTurnEntry.from_json(row["bfcl_entry"])
        self._episode = BfclEpisode(entry, self._all_tools)
        return None

    def get_reward(self) -> float:
        """1.0 when the turns played pass BFCL's multi-turn check, else 0.0."""
        return 1.0 if self.episode.verdict().passed else 0.0

    @property
    def episode(self) -> BfclEpisode:
        if self._episode is None:
            raise RuntimeError(f"{type(self).__name__} has no episode yet; call reset(**row) first")
        return self._episode


def _docstring(doc: Mapping[str, Any]) -> str:
    """BFCL's function doc as a Google-style docstring (what get_json_schema reads back)."""
    def one_line(text: Any) -> str:
        return " ".join(str(text or "").split())

    lines = [one_line(doc.get("description")) or doc["name"], "", "Args:"]
    for name, spec in (doc.get("parameters") or {}).get("properties", {}).items():
        text = one_line(spec.get("description")) or name
        if spec.get("type") == "float":  # BFCL's function-calling handlers say so (convert_to_tool)
            text += " This is a float type value."
        if "default" in spec:
            text += f" Default is: {spec['default']}."
        lines.append(f"    {name}: {text}")
    return "\n".join(lines) + "\n"


def _annotation(spec: Mapping[str, Any]) -> Any:
    kind = _TYPES.get(str(spec.get("type")), str)
    if kind is list and isinstance(spec.get("items"), Mapping):
        return list[_TYPES.get(str(spec["items"].get("type")), str)]  # type: ignore[misc]
    return kind


def _tool(doc: Mapping[str, Any], backend: type) -> Callable[..., Any]:
    """A method that runs BFCL function ``doc`` on the episode, with its signature and docstring."""
    name = str(doc["name"])
    params = doc.get("parameters") or {}
    required = set(params.get("required") or [])
    real = inspect.signature(getattr(backend, name)).parameters if hasattr(backend, name) else {}

    def tool(self: BfclEnvironment, **arguments: Any) -> str:
        return self.episode.call(name, arguments)

    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for param, spec in (params.get("properties") or {}).items():
        annotations[param] = _annotation(spec)
        default: Any = inspect.Parameter.empty
        if param not in required:
            found = real.get(param)
            default = found.default if found is not None and found.default is not found.empty else None
        signature.append(inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, default=default,
                                           annotation=annotations[param]))
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = _docstring(doc)
    tool.__annotations__ = {**annotations, "return": str}
    tool.__signature__ = inspect.Signature(signature, return_annotation=str)  # type: ignore[attr-defined]
    return tool


@functools.cache
def _environment_class(classes: tuple[str, ...], withheld: frozenset[str], folder: str) -> type[BfclEnvironment]:
    backends, _ = backend_classes()
    docs = read_func_docs(folder, classes)
    tools = {str(doc["name"]): _tool(doc, backends[name]) for name in classes for doc in docs[name]}
    offered = {name: tool for name, tool in tools.items() if name not in withheld}
    label = "Bfcl" + "".join(classes) + ("Without" + "".join(sorted(withheld)) if withheld else "") + "Environment"
    return type(label, (BfclEnvironment,), {**offered, "_all_tools": tools, "__module__": __name__,
                                             "__doc__": f"BFCL's {' + '.join(classes)} backends as tools."})


def environment_class(entry: MultiTurnEntry, folder: str | os.PathLike[str]) -> type[BfclEnvironment]:
    """The environment class ``entry`` plays in: its backends' functions (less those withheld at its first turn)
    as tools, documented from ``folder/multi_turn_func_doc`` (bfcl-eval's data folder)."""
    return _environment_class(entry.involved_classes, frozenset(entry.withheld(0)), os.fspath(folder))


def environment_named(name: str, folder: str | os.PathLike[str]) -> type[BfclEnvironment]:
    """The environment class an :func:`~whileai.domain.rows.bfcl_multi_turn.environment_name` names (its backends, less
    the functions withheld at the first turn), without its entry: what a row's ``environment`` column routes to."""
    classes, withheld = parse_environment_name(name)
    return _environment_class(classes, frozenset(withheld), os.fspath(folder))


def bfcl_environments(entries: Sequence[MultiTurnEntry],
                      folder: str | os.PathLike[str]) -> dict[str, type[BfclEnvironment]]:
    """TRL's ``environment_factory`` for ``entries``: ``{environment name: class}``, one per name the entries use
    (each row's ``environment`` column picks its class)."""
    return {environment_name(e): environment_class(e, folder) for e in entries}


def _data_folder(folder: str | os.PathLike[str] | None) -> str | os.PathLike[str]:
    base = folder if folder is not None else bfcl_data_folder()
    if base is None:
        raise FileNotFoundError(f"BFCL's multi-turn data was not found: {INSTALL_HINT}, or pass the folder of "
                                "BFCL_v4_<category>.json, possible_answer/ and multi_turn_func_doc/")
    return base


def environment_factory(category: str = BFCL_MULTI_TURN_CATEGORIES[0], folder: str | os.PathLike[str] | None = None,
                        names: Sequence[str] | None = None) -> dict[str, type[BfclEnvironment]]:
    """TRL's ``environment_factory`` for every entry of BFCL's ``category`` (both splits), read from ``folder``
    (default: the installed bfcl-eval's data): what ``environment=bfcl`` names (episodes/registry.py).

    With ``names`` (the environment names a job's rows route to, their ``environment`` column) the dict holds exactly
    those, each class built from its name (:func:`environment_named`), whatever category or data folder the rows were
    read from; the function docs still come from ``folder``."""
    if category not in BFCL_MULTI_TURN_CATEGORIES:
        raise ValueError(f"BFCL category {category!r} is not a multi-turn one; pass one of "
                         f"{', '.join(BFCL_MULTI_TURN_CATEGORIES)}")
    base = _data_folder(folder)
    if names is not None:
        return {name: environment_named(name, base) for name in names}
    return bfcl_environments(read_multi_turn(base, [category]), base)


def gold_calls(entry: MultiTurnEntry) -> list[list[GoldCall]]:
    """The entry's ground truth as a model sends it: each turn's calls as ``{"name", "arguments"}``, every argument
    named (BFCL's answers sometimes pass one by position: it is named from the backend method's signature)."""
    classes, _ = backend_classes()
    out: list[list[GoldCall]] = []
    for turn in entry.ground_truth:
        calls: list[GoldCall] = []
        for text in turn:
            call = ToolCall.parse(text)
            owner = next((classes[n] for n in reversed(entry.involved_classes) if hasattr(classes[n], call.name)), None)
            if owner is None:
                raise ValueError(f"{entry.id}: the ground truth calls {call.name!r}, which none of its backends "
                                 f"({', '.join(entry.involved_classes)}) has")
            bound = inspect.signature(getattr(owner, call.name)).bind(None, *call.positional, **call.arguments)
            calls.append({"name": call.name, "arguments": {k: v for k, v in bound.arguments.items() if k != "self"}})
        out.append(calls)
    return out
