"""A user's own environment, named ``python:MODULE:CLASS``: imported, checked against the protocol, built once.

    cls = load_environment("python:my_envs:Inventory")   # the class, ready for environment_factory=cls

Every refusal is a ValueError naming the value, what is accepted and the fix: a name not of the form, a
module that does not import, a class it does not define (with the nearest names it does), a class that
breaks the protocol (every problem at once, :func:`~whileai.domain.episodes.protocol.protocol_problems`),
and a class that cannot be built with no arguments, as TRL builds it.
"""

from __future__ import annotations

import difflib
import importlib
import re
import sys
from types import ModuleType

from whileai.core import defaults as core_defaults

from whileai.domain.episodes.protocol import protocol_problems

__all__ = ["load_environment"]

_REF = re.compile(r"python:(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<cls>[A-Za-z_]\w*)")
_EXAMPLE = "python:my_envs:Inventory (a class Inventory in my_envs.py, importable from where you run)"


def _import(ref: str, module_name: str, search_path: str | None) -> ModuleType:
    added = bool(search_path) and search_path not in sys.path
    if added:
        sys.path.insert(0, str(search_path))
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure is the user's module's, named as such
        raise ValueError(f"environment={ref!r}: module {module_name!r} does not import ({type(exc).__name__}: {exc}); "
                         "make it importable from the directory you run in (or install it), or fix the error in "
                         "it") from exc
    finally:
        if added:
            sys.path.remove(str(search_path))


def _class_of(ref: str, module: ModuleType, name: str) -> type:
    found = getattr(module, name, None)
    if isinstance(found, type):
        return found
    classes = sorted(n for n, v in vars(module).items() if isinstance(v, type) and not n.startswith("_"))
    near = difflib.get_close_matches(name, classes, n=3)
    hint = (f"did you mean {' or '.join(near)}?" if near else
            f"its classes: {', '.join(classes)}" if classes else "it defines no class")
    what = "has no" if found is None else f"has {name} = {type(found).__name__}, not a"
    raise ValueError(f"environment={ref!r}: module {module.__name__} {what} class {name!r} ({hint}); define the "
                     "environment class there (reset(self, **kwargs) and typed, documented tools), or name another")


def load_environment(ref: str, search_path: str | None = None) -> type:
    """The environment class ``python:MODULE:CLASS`` names, imported (``search_path`` first on ``sys.path`` while
    it is), checked against the protocol and built once with no arguments. Raises ValueError naming the fix."""
    match = _REF.fullmatch(ref) if isinstance(ref, str) else None
    if match is None or not re.fullmatch(core_defaults.TRAIN_ENVIRONMENT_PATTERN, ref):
        raise ValueError(f"environment={ref!r} is not python:MODULE:CLASS; name a dotted module and a class in it, "
                         f"e.g. {_EXAMPLE}")
    module = _import(ref, match["module"], search_path)
    cls = _class_of(ref, module, match["cls"])
    problems = protocol_problems(cls)
    if problems:
        raise ValueError(f"environment={ref!r} cannot be handed to TRL's environment_factory "
                         f"({len(problems)} problem(s)): " + "; ".join(problems))
    try:
        cls()
    except Exception as exc:  # the user's constructor failing is the problem to report
        raise ValueError(f"environment={ref!r}: {cls.__name__}() raised {type(exc).__name__}: {exc}; TRL builds one "
                         "environment per rollout with no arguments: give every __init__ parameter a default, and "
                         "start each episode's state in reset") from exc
    return cls
