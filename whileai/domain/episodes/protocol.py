"""What an environment is: TRL's ``environment_factory`` contract, written down and checked in one place.

An environment is a class; each instance holds one episode's state (TRL makes one per rollout):

- ``reset(self, **kwargs)`` starts an episode. TRL calls it with every column of the dataset row
  (``prompt`` included), so it takes ``**kwargs``. It may return a string, which TRL appends to the last
  user message; None adds nothing.
- Every public method other than ``reset`` and ``get_reward`` is a tool. Its signature (each parameter
  typed) and its Google-style docstring (a summary, then an ``Args:`` line per parameter) become the
  tool's JSON schema (``transformers.utils.get_json_schema``, as TRL renders it into the prompt). A tool
  that raises is answered with the error as the tool's message; the episode goes on.
- ``get_reward(self) -> float`` is optional: it scores the finished episode from the state alone.
- The class is built with no arguments: TRL calls the factory with none.
- Its public attributes are the episode's state, which the judge compares with the gold replay's.

Beyond TRL's contract, an episode may have several user turns (BFCL's multi-turn entries): an environment whose
``episode`` attribute is a :class:`TurnByTurn` (``next_turn``, ``tools``, ``call``, ``force_end``) is played turn
after turn by whileai's own loop (``loop.py``); TRL's loop plays its first user turn only. Where that episode also has
a ``verdict()`` (:class:`JudgesItself`, BFCL's multi-turn check), the episode judge takes it instead of replaying a gold.

TRL's ``environment_factory`` is one factory, or a dict of them (:data:`Factories`) that each dataset row picks from
by its ``environment`` column, which ``reset`` then does not get (:func:`route`).

    problems = protocol_problems(MyEnvironment)   # [] when TRL can use it unchanged; else every problem
    schemas = tool_schemas(MyEnvironment())       # the tools as the model is shown them
"""

from __future__ import annotations

import copy
import inspect
import types
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Environment", "EnvironmentFactory", "Factories", "ROUTE_COLUMN", "TurnByTurn", "JudgesItself", "NOT_TOOLS",
           "tool_methods", "tool_schemas", "end_state", "turn_by_turn", "offered_tools", "shown_signature",
           "protocol_problems", "route"]

#: The public methods TRL does not offer as tools (grpo_trainer.py: the episode's start and its score).
NOT_TOOLS = ("reset", "get_reward")

_FIX_DOC = ("write a one-line summary, then 'Args:' with one line per parameter ('name: what it is'), as "
            "transformers.utils.get_json_schema reads it")


@runtime_checkable
class Environment(Protocol):
    """One episode's world: ``reset`` starts it; the public methods are its tools (see the module)."""

    def reset(self, **kwargs: Any) -> str | None:
        """Start an episode from a dataset row's columns; a returned string is appended to the user's message."""


#: What TRL's ``environment_factory`` is: called with no arguments, once per rollout.
EnvironmentFactory = Callable[[], Environment]
#: TRL's ``environment_factory``: one factory, or a dict of them chosen by each row's ``environment`` column.
Factories = EnvironmentFactory | Mapping[str, EnvironmentFactory]
#: The dataset column a dict of factories routes each row by (TRL 1.16's ``GRPOTrainer``).
ROUTE_COLUMN = "environment"


def route(factories: Factories, row: Mapping[str, Any]) -> tuple[EnvironmentFactory, dict[str, Any]]:
    """``(the factory row plays in, what its reset gets)``, as TRL routes a dataset row: one factory takes every row
    and every column; a dict picks by the row's :data:`ROUTE_COLUMN`, which reset does not get. Raises ValueError
    naming the row's environment and the ones there are."""
    if not isinstance(factories, Mapping):
        return factories, dict(row)
    name = row.get(ROUTE_COLUMN)
    if not isinstance(name, str) or name not in factories:
        known = ", ".join(sorted(map(str, factories)))
        raise ValueError(f"the row's {ROUTE_COLUMN}={name!r} is not among the environments of the factory ({known}); "
                         f"each row names its environment in its {ROUTE_COLUMN!r} column, one of the factory's keys")
    return factories[name], {k: v for k, v in row.items() if k != ROUTE_COLUMN}


@runtime_checkable
class TurnByTurn(Protocol):
    """An episode of several user turns, as an environment's ``episode`` attribute (BFCL's ``BfclEpisode`` is one):
    what the episode loop drives after a reply without calls."""

    def next_turn(self) -> list[dict[str, Any]] | None:
        """Close the current user turn; the next one's user messages, or None when every turn is played."""

    def tools(self) -> list[dict[str, Any]]:
        """The tools offered in the current turn, as JSON schemas (a later turn may offer more)."""

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Run a call of any offered function by name in the current turn; its result."""

    def force_end(self) -> None:
        """End the episode before its last user turn (the judge then fails it, as BFCL fails a forced quit)."""


@runtime_checkable
class JudgesItself(Protocol):
    """An episode that gives its own verdict on what was played (BFCL's ``BfclEpisode``: its multi-turn check), as an
    environment's ``episode`` attribute: the episode judge takes it instead of replaying a gold."""

    def verdict(self) -> Any:
        """The verdict on the turns played so far: an object with ``passed`` (bool) and ``reason`` (text)."""


def _functions(cls: type) -> dict[str, Callable[..., Any]]:
    """The class's methods as TRL lists them: plain functions on the class (properties are not evaluated)."""
    return dict(inspect.getmembers(cls, predicate=inspect.isfunction))


def tool_methods(environment: object) -> list[Callable[..., Any]]:
    """The tools of ``environment`` (an instance), bound, in name order: what TRL calls by name."""
    return [getattr(environment, name) for name in _functions(type(environment))
            if name not in NOT_TOOLS and not name.startswith("_")]


def tool_schemas(environment: object) -> list[dict[str, Any]]:
    """The JSON schema of each tool of ``environment`` (an instance), as TRL shows the tools to the model."""
    from transformers.utils import get_json_schema

    return [get_json_schema(method) for method in tool_methods(environment)]


def end_state(environment: object) -> dict[str, Any]:
    """The episode's state: a copy of every public attribute of ``environment``, by name (what the judge compares)."""
    attributes = getattr(environment, "__dict__", {})
    return {name: copy.deepcopy(value) for name, value in sorted(attributes.items()) if not name.startswith("_")}


def turn_by_turn(environment: object) -> TurnByTurn | None:
    """``environment.episode`` where it is a :class:`TurnByTurn` (read after ``reset``), else None: an environment of
    one user turn, as TRL plays every environment."""
    episode = getattr(environment, "episode", None)
    return episode if isinstance(episode, TurnByTurn) else None


def offered_tools(environment: object) -> list[Any]:
    """The tools ``environment`` offers now, as a chat template takes them: its tool methods (bound, what TRL renders),
    then, in a turn-by-turn episode, the JSON schema of each function offered since (BFCL adds a withheld function at
    its turn, after the others)."""
    methods: list[Any] = tool_methods(environment)
    turns = turn_by_turn(environment)
    if turns is None:
        return methods
    names = {method.__name__ for method in methods}
    return [*methods, *(schema for schema in turns.tools() if schema["function"]["name"] not in names)]


def shown_signature(func: Callable[..., Any]) -> inspect.Signature:
    """``func``'s signature with its annotations evaluated (``str``, not ``'str'``), or as written where they do not
    evaluate here."""
    try:
        return inspect.signature(func, eval_str=True)
    except Exception:  # an annotation naming what this module cannot see is shown as written
        return inspect.signature(func)


def _own_parameters(cls: type, name: str, func: Callable[..., Any]) -> list[inspect.Parameter]:
    """``func``'s parameters as a caller of the instance passes them (``self`` left out unless it is static)."""
    params = list(inspect.signature(func).parameters.values())
    if isinstance(inspect.getattr_static(cls, name), staticmethod):
        return params
    return params[1:]


def _reset_problems(cls: type, functions: dict[str, Callable[..., Any]]) -> list[str]:
    label = cls.__name__
    if "reset" not in functions:
        return [f"{label} has no reset method; TRL calls reset(**row) before each episode: define "
                "def reset(self, **kwargs) -> str | None (return None, or text appended to the user's message)"]
    params = _own_parameters(cls, "reset", functions["reset"])
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        return [f"{label}.reset{shown_signature(functions['reset'])} does not take **kwargs; TRL passes every "
                "column of the dataset row (prompt included): define def reset(self, ..., **kwargs)"]
    return []


def _reward_problems(cls: type, functions: dict[str, Callable[..., Any]]) -> list[str]:
    if "get_reward" not in functions:
        return []
    params = _own_parameters(cls, "get_reward", functions["get_reward"])
    needed = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if needed:
        return [f"{cls.__name__}.get_reward needs {', '.join(needed)}, but TRL calls it with no argument; score "
                "the episode from the environment's own state: def get_reward(self) -> float"]
    return []


def _tool_problems(cls: type, name: str, func: Callable[..., Any]) -> list[str]:
    """What keeps one tool's schema from being built: a missing docstring, an untyped or variadic parameter,
    then whatever transformers' schema reader refuses."""
    label = f"{cls.__name__}.{name}"
    if not inspect.getdoc(func):
        return [f"tool {label} has no docstring; TRL shows it to the model as the tool's description: {_FIX_DOC}"]
    params = _own_parameters(cls, name, func)
    variadic = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if variadic:
        return [f"tool {label} takes *{variadic[0]}/**, which a tool's JSON schema cannot describe; name each "
                "parameter (or make it private: _" + name + ")"]
    untyped = [p.name for p in params if p.annotation is p.empty]
    if untyped:
        return [f"tool {label}: parameter(s) {', '.join(untyped)} have no type hint; annotate each (str, int, "
                "float, bool, list[str], ...): the hint is the argument's type in the tool's schema"]
    from transformers.utils import get_json_schema

    bound = func if isinstance(inspect.getattr_static(cls, name), staticmethod) else types.MethodType(func, object())
    try:
        get_json_schema(bound)
    except Exception as exc:  # transformers words what its reader refused; it is the user's method to fix
        return [f"tool {label}: {exc}; {_FIX_DOC}"]
    return []


def protocol_problems(cls: Any) -> list[str]:
    """Every reason ``cls`` cannot be handed to TRL's ``environment_factory`` unchanged ([] when it can).

    All at once: no ``reset`` (or one without ``**kwargs``), a ``get_reward`` that needs arguments, no
    tool, and each tool without a docstring, with an untyped or variadic parameter, or whose docstring
    does not describe every parameter.
    """
    if not isinstance(cls, type):
        return [f"{cls!r} is a {type(cls).__name__}, not a class; an environment is a class whose instances hold "
                "an episode (TRL builds one per rollout with no arguments)"]
    functions = _functions(cls)
    problems = _reset_problems(cls, functions) + _reward_problems(cls, functions)
    tools = {n: f for n, f in functions.items() if n not in NOT_TOOLS and not n.startswith("_")}
    if not tools:
        problems.append(f"{cls.__name__} has no tool: every public method other than reset and get_reward is one; "
                        "define at least one, e.g. def look(self, name: str) -> str with a docstring")
    for name, func in tools.items():
        problems += _tool_problems(cls, name, func)
    return problems
