"""Which environment a name means: ``kit`` (built in), ``bfcl`` (BFCL's multi-turn APIs, imported by name when
asked for), or ``python:MODULE:CLASS`` (a user's class, :func:`~whileai.domain.episodes.loader.load_environment`).

    factory = environment_factory("kit")              # what GRPOTrainer(environment_factory=...) takes
    problems = environment_problems("bfcl", "multi_turn_base")   # [] or every reason it cannot be used
    info = describe_environment("kit")                 # its tools and turn cap, as validate prints them

A run spec carries one string (GRPOSpec.environment): the name, with BFCL's category after a colon
(:func:`environment_ref`, :func:`parse_environment_ref`).

The ``bfcl`` module (``whileai.domain.episodes.bfcl``) is imported only when named: it defines
``environment_factory(category: str)``, returning that category's factory, or TRL's dict of factories
keyed by the rows' ``environment`` column (BFCL's entries use different backends); given ``names=`` (the
environment names a job's rows route to), it returns the dict of exactly those. Where the module is missing, naming
``bfcl`` is refused with the fix, and ``kit`` and ``python:`` still work.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from whileai.domain import defaults
from whileai.domain.episodes.kit import KitEnvironment
from whileai.core.spec import is_python_ref
from whileai.domain.episodes.loader import load_environment
from whileai.domain.episodes.protocol import (EnvironmentFactory, Factories, protocol_problems, shown_signature,
                                              tool_methods)
from whileai.domain.rows.bfcl_multi_turn import BFCL_MULTI_TURN_CATEGORIES

__all__ = ["ENVIRONMENT_NAMES", "BFCL_CATEGORIES", "BFCL_DEFAULT_CATEGORY", "LAZY_MODULES", "LAZY_FACTORY",
           "Factories", "ToolInfo", "WorldInfo", "EnvironmentInfo", "environment_factory", "environment_problems", "describe_environment",
           "environment_ref", "parse_environment_ref"]

#: The environments named by a word (a user's class is named python:MODULE:CLASS).
ENVIRONMENT_NAMES = ("kit", "bfcl")
#: BFCL's multi-turn categories, each an environment: the ones its rows are read from (one list, kept there).
BFCL_CATEGORIES = BFCL_MULTI_TURN_CATEGORIES
BFCL_DEFAULT_CATEGORY = "multi_turn_base"
#: Environments whose module is imported only when named, and the function each module defines.
LAZY_MODULES: dict[str, str] = {"bfcl": "whileai.domain.episodes.bfcl"}
LAZY_FACTORY = "environment_factory"
_ACCEPTED = "kit, bfcl (with a category) or python:MODULE:CLASS"


@dataclass(frozen=True)
class ToolInfo:
    """One tool as the model is offered it: its name, its signature and the first line of its docstring."""

    name: str
    signature: str
    summary: str


@dataclass(frozen=True)
class WorldInfo:
    """One environment class of a factory: the name TRL routes rows by (None for a single factory), where the
    class lives, and its tools."""

    label: str | None
    source: str
    tools: tuple[ToolInfo, ...]


@dataclass(frozen=True)
class EnvironmentInfo:
    """An environment as ``validate`` shows it: its name, each class its factory makes (one, or one per
    ``environment`` name of a dict factory) with its tools, and the turn cap with where the cap comes from."""

    name: str
    worlds: tuple[WorldInfo, ...]
    max_turns: int
    max_turns_from: str


def environment_ref(name: str, category: str | None = None) -> str | None:
    """The one string a run spec carries for ``name`` and ``category`` (``bfcl:multi_turn_base``); None for none."""
    if name == "none":
        return None
    return f"{name}:{category}" if name == "bfcl" and category else name


def parse_environment_ref(ref: str) -> tuple[str, str | None]:
    """``(name, category)`` of a spec's environment string: the inverse of :func:`environment_ref`."""
    if ref.startswith("bfcl:"):
        return "bfcl", ref[len("bfcl:"):]
    return ref, None


def _lazy_factory(name: str, category: str | None, names: Sequence[str] | None = None) -> Factories:
    module_name = LAZY_MODULES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if not (exc.name and (module_name == exc.name or module_name.startswith(exc.name + "."))):
            raise ValueError(f"environment={name}: {module_name} does not import ({exc}); install what it needs "
                             "(for bfcl: pip install --no-deps bfcl-eval), or pick environment=kit") from exc
        raise ValueError(f"environment={name}: this whileai has no {module_name}, so {name} cannot be played "
                         f"here; update whileai, or pick environment=kit or python:MODULE:CLASS") from exc
    make = getattr(module, LAZY_FACTORY, None)
    if not callable(make):
        raise ValueError(f"environment={name}: {module_name} defines no {LAZY_FACTORY}(category) returning the "
                         f"environment's factory (or TRL's dict of them); define it there, or pick environment=kit")
    try:
        factory: Factories = make(category or BFCL_DEFAULT_CATEGORY, **({"names": list(names)} if names is not None else {}))
    except Exception as exc:  # its data or its dependency missing: the module's own words, with ours around them
        raise ValueError(f"environment={name}: {module_name}.{LAZY_FACTORY}({category or BFCL_DEFAULT_CATEGORY!r}) "
                         f"raised {type(exc).__name__}: {exc}") from exc
    return factory


def _category_problem(name: str, category: str | None) -> str | None:
    if name != "bfcl":
        return (f"environment.category={category!r} is read only by environment=bfcl (environment={name}); "
                "drop it") if category is not None else None
    if category is not None and category not in BFCL_CATEGORIES:
        return (f"environment.category={category!r} is not a BFCL multi-turn category; pass one of "
                f"{', '.join(BFCL_CATEGORIES)} (default {BFCL_DEFAULT_CATEGORY})")
    return None


def environment_factory(name: str, category: str | None = None, search_path: str | None = None,
                        names: Sequence[str] | None = None) -> Factories:
    """What ``name`` means as TRL's ``environment_factory``: a class (kit, python:MODULE:CLASS), or what the
    bfcl module returns for ``category`` (a factory, or a dict of them by the rows' ``environment`` column; with
    ``names``, the rows' environment names, the dict of exactly those). Raises ValueError naming what is accepted
    and the fix."""
    problem = _category_problem(name, category)
    if problem:
        raise ValueError(problem)
    if name == "kit":
        return KitEnvironment
    if name in LAZY_MODULES:
        return _lazy_factory(name, category, names)
    if is_python_ref(name):
        cls: EnvironmentFactory = load_environment(name, search_path)
        return cls
    raise ValueError(f"environment={name!r} is not an environment; pass {_ACCEPTED}, or none")


def _instances(name: str, factories: Factories) -> list[tuple[str | None, Any]]:
    """One instance of each class the factory makes, with its routing label: TRL probes each the same way."""
    routed = factories.items() if isinstance(factories, Mapping) else [(None, factories)]
    out = []
    for label, factory in routed:
        try:
            out.append((label, factory()))
        except Exception as exc:  # a factory that cannot build is the environment's problem, said as such
            where = f" ({label})" if label else ""
            raise ValueError(f"environment={name}{where}: its factory raised {type(exc).__name__}: {exc}; TRL calls "
                             "it with no arguments once per rollout") from exc
    return out


def environment_problems(name: str, category: str | None = None, search_path: str | None = None) -> list[str]:
    """Why ``name`` (with ``category``) cannot be played: every problem, [] when it can. A ``python:`` class is
    imported and checked; each factory is called once and its class checked against the protocol."""
    if name == "none":
        problem = _category_problem(name, category) if category is not None else None
        return [problem] if problem else []
    try:
        instances = _instances(name, environment_factory(name, category, search_path))
    except ValueError as exc:
        return [str(exc)]
    checked = dict.fromkeys(type(instance) for _, instance in instances)
    return [f"environment={name}: {p}" for kind in checked for p in protocol_problems(kind)]


def _tool_info(method: Callable[..., Any]) -> ToolInfo:
    doc = inspect.getdoc(method) or ""
    return ToolInfo(name=method.__name__, signature=f"{method.__name__}{shown_signature(method)}",
                    summary=doc.splitlines()[0] if doc else "")


def describe_environment(name: str, category: str | None = None, max_turns: int | None = None,
                         search_path: str | None = None) -> EnvironmentInfo:
    """``name``'s classes, their tools and the turn cap (``max_turns``, else EPISODE_MAX_TURNS), for ``validate``
    to print. Raises ValueError as :func:`environment_factory` does."""
    worlds = tuple(WorldInfo(label=label, source=f"{type(instance).__module__}.{type(instance).__qualname__}",
                             tools=tuple(_tool_info(m) for m in tool_methods(instance)))
                   for label, instance in _instances(name, environment_factory(name, category, search_path)))
    shown = environment_ref(name, category or (BFCL_DEFAULT_CATEGORY if name == "bfcl" else None)) or name
    return EnvironmentInfo(
        name=shown, worlds=worlds, max_turns=defaults.EPISODE_MAX_TURNS if max_turns is None else max_turns,
        max_turns_from="EPISODE_MAX_TURNS, the default" if max_turns is None else "environment.max_turns")
