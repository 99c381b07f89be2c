"""The BFCL episode judge: BFCL's multi-turn verdict on a model's calls, turn by turn, on fresh backends.

bfcl-eval ships the stateful Python backends its multi-turn questions are played against (a file system,
a math library, messaging, posting, tickets, a trading bot, travel booking, a car). :class:`BfclBackends`
loads an entry's backends with its starting state and runs a call on them exactly as BFCL's
``execute_multi_turn_func_call`` does (same response text, same error text, same refusals); the BFCL
environment (``whileai.domain.episodes.bfcl``) plays episodes on it and :func:`judge_multi_turn` replays
them. bfcl-eval is imported only when backends are first needed; without it the error says how to
install it.

:func:`judge_multi_turn` gives the verdict bfcl-eval's ``multi_turn_checker`` gives (with its eval runner's
rule for a trajectory of the wrong length), by the same rules:

1. A trajectory whose number of turns is not the entry's fails (``multi_turn:force_terminated``).
2. Each turn, the model's calls run on one set of backends and the answer's calls on another, both loaded
   with the entry's starting state and both kept from turn to turn.
3. A turn whose answer makes no call is not checked (the model should have asked); its calls still run.
4. Otherwise the model must have made a call in the turn (``multi_turn:empty_turn_model_response``);
   every public attribute of each answer backend must equal the model's
   (``multi_turn:instance_state_mismatch``); and each response of the answer's calls this turn must be
   among the model's responses so far, in any order, each used once
   (``multi_turn:execution_response_mismatch``).

The first failure is the verdict. Calls run as BFCL runs them, with two differences: a name that is no
backend function is answered as unknown even where Python has a builtin of that name, which BFCL would
evaluate; and each judged episode starts from the backends' own default arguments, where BFCL's process
carries the lists TwitterAPI.post_tweet shares from one entry to the next (:func:`isolated_classes`), so
the verdict is BFCL's on a fresh process. benchmarks/bfcl_multi_turn_agreement.py measures the agreement.

    verdict = judge_multi_turn(entry, [[{"name": "cd", "arguments": {"folder": "docs"}}], [...]])
    verdict.passed, verdict.error_type, verdict.turn
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import json
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from whileai.domain.rows.bfcl_multi_turn import MultiTurnEntry

__all__ = ["MultiTurnVerdict", "judge_multi_turn", "backend_differences", "ToolCall", "BfclBackends",
           "backend_classes", "isolated_classes", "response_text", "BLOCKED_NAMES", "INSTALL_HINT"]

#: Names BFCL refuses to run whatever they are (multi_turn_utils.execute_multi_turn_func_call)
BLOCKED_NAMES = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
#: How to get the backends, said wherever they are missing
INSTALL_HINT = ("BFCL's multi-turn backends come from bfcl-eval: `pip install --no-deps bfcl-eval==2026.3.23` "
            "(its declared dependencies are model SDKs the backends do not use; the math backend needs mpmath, "
            "which torch already installs)")


@functools.cache
def backend_classes() -> tuple[dict[str, type], frozenset[str]]:
    """``({class name: backend class}, stateless class names)`` from the installed bfcl-eval."""
    try:
        config = importlib.import_module("bfcl_eval.constants.executable_backend_config")
        paths: Mapping[str, str] = config.CLASS_FILE_PATH_MAPPING
        classes = {name: getattr(importlib.import_module(paths[name]), name) for name in _NAMES}
    except ImportError as err:
        raise ImportError(f"cannot load BFCL's multi-turn backends ({err}); {INSTALL_HINT}") from err
    return classes, frozenset(config.STATELESS_CLASSES)


_NAMES = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI",
          "VehicleControlAPI")


def _fresh_defaults(function: Any) -> Any:
    """A copy of ``function`` whose default values are copies of its own (same code, name and globals)."""
    copied = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                                copy.deepcopy(function.__defaults__), function.__closure__)
    copied.__kwdefaults__ = copy.deepcopy(function.__kwdefaults__)
    copied.__qualname__, copied.__doc__ = function.__qualname__, function.__doc__
    return copied


def isolated_classes() -> dict[str, type]:
    """The backend classes, each with its own copies of mutable default arguments, for one episode.

    TwitterAPI.post_tweet defaults ``tags`` and ``mentions`` to one shared list each, which ``mention`` then
    extends: in one process, an episode's tweets would carry an earlier episode's mentions. BFCL's checker
    shares those lists between the model's backends and the answer's for one entry and across entries; here
    the two backends of one episode share them (as BFCL does on a fresh process) and no other episode does.
    """
    classes, _ = backend_classes()
    out = {}
    for name, cls in classes.items():
        mutable = {m: f for m, f in inspect.getmembers(cls, predicate=inspect.isfunction)
                   if any(isinstance(v, (list, dict, set)) for v in (f.__defaults__ or ()))}
        out[name] = cls if not mutable else type(cls.__name__, (cls,), {
            "__qualname__": cls.__qualname__, "__module__": cls.__module__,
            **{m: _fresh_defaults(f) for m, f in mutable.items()}})
    return out


@dataclass(frozen=True)
class ToolCall:
    """One call a model (or BFCL's answer) makes: a function name and its arguments."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    positional: tuple[Any, ...] = ()

    @classmethod
    def parse(cls, text: str) -> ToolCall:
        """A call from BFCL's answer text (``"mv(source='a', destination='b')"``, ``"sort('a.txt')"``)."""
        try:
            node = ast.parse(text.strip(), mode="eval").body
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                raise ValueError("not a call of a plain name")
            args = tuple(ast.literal_eval(a) for a in node.args)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
        except (SyntaxError, ValueError) as err:
            raise ValueError(f"BFCL call text {text!r} is not name(literal arguments) ({err}); BFCL's answers are "
                             "calls such as cd(folder='docs')") from None
        return cls(node.func.id, kwargs, args)

    @classmethod
    def of(cls, value: ToolCall | Mapping[str, Any]) -> ToolCall:
        """A call from itself or from ``{"name", "arguments"}`` (arguments as a dict or its JSON text)."""
        if isinstance(value, ToolCall):
            return value
        arguments = value.get("arguments") or {}
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        return cls(str(value["name"]), dict(arguments))

    def text(self) -> str:
        """The call as BFCL's function-calling handlers write it for execution (``name(k=repr(v),...)``)."""
        parts = [repr(v) for v in self.positional] + [f"{k}={v!r}" for k, v in self.arguments.items()]
        return f"{self.name}({','.join(parts)})"


def response_text(result: Any) -> str:
    """A backend's return value as BFCL hands it to the model: text as is, a dict as JSON, else ``str``."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # BFCL's own fallback for a dict JSON cannot write
            return str(result)
    return str(result)


class BfclBackends:
    """Fresh instances of an entry's backends, loaded with its starting state, and BFCL's way of running a call.

    ``instances`` maps each involved class name to its instance, in the entry's order (BFCL compares their
    public attributes). ``classes`` (from :func:`isolated_classes`) is shared by the backends of one episode; by
    default these backends get their own. ``run`` answers every call with text and never raises: an unknown name, a refused
    name, a wrong argument or a backend error come back as BFCL's ``Error during execution: ...``.
    """

    def __init__(self, entry: MultiTurnEntry, classes: Mapping[str, type] | None = None) -> None:
        classes = isolated_classes() if classes is None else classes
        _, stateless = backend_classes()
        self.instances: dict[str, Any] = {}
        self._methods: dict[str, Callable[..., Any]] = {}
        for name in entry.involved_classes:
            instance = classes[name]()
            if name not in stateless:
                instance._load_scenario(copy.deepcopy(entry.initial_config.get(name, {})),
                                        long_context=entry.long_context)
            self.instances[name] = instance
            for method_name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method_name.startswith("_"):
                    self._methods[method_name] = method  # a later class's method of the same name wins, as in BFCL

    def run(self, call: ToolCall) -> str:
        """Run ``call`` and return BFCL's response text for it."""
        if call.name in BLOCKED_NAMES:
            return f"Error during execution: Function call {call.name} is not allowed."
        method = self._methods.get(call.name)
        if method is None:  # BFCL evaluates the text: an unknown name is a NameError (builtins are not run here)
            head = re.match(r"[A-Za-z_]\w*", call.name)
            return f"Error during execution: name '{head.group(0) if head else call.name}' is not defined"
        # copies, as BFCL's evaluation of the call's text makes: a backend keeps the lists it is given
        # (a tweet's mentions), and a later call must not change the recorded call through them
        positional, arguments = copy.deepcopy((call.positional, dict(call.arguments)))
        try:
            return response_text(method(*positional, **arguments))
        except Exception as err:  # the model's call is wrong or the backend refused it: the model reads why
            return f"Error during execution: {err}"


# ---------------------------------------------------------------------------
# The verdict
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiTurnVerdict:
    """Whether a trajectory passes; where not, BFCL's error type, the turn and what differed."""

    passed: bool
    error_type: str | None = None
    turn: int | None = None
    detail: str = ""

    @property
    def reason(self) -> str:
        """Why, in one line: what the episode judge's verdict says (``whileai.domain.episodes.judge.own_verdict``)."""
        if self.passed:
            return "every turn played passes BFCL's multi-turn check"
        return f"{self.error_type}: {self.detail}" if self.detail else str(self.error_type)


def backend_differences(model: BfclBackends, truth: BfclBackends) -> dict[str, dict[str, tuple[Any, Any]]]:
    """``{class: {attribute: (model's value, answer's value)}}`` for every public attribute that differs,
    as BFCL's state check reads them: the answer instance's attributes, compared with ``!=``."""
    out: dict[str, dict[str, tuple[Any, Any]]] = {}
    missing = object()
    for name, expected in truth.instances.items():
        got = model.instances[name]
        for attribute, value in vars(expected).items():
            if attribute.startswith("_"):
                continue
            mine = getattr(got, attribute, missing)
            if mine is missing or mine != value:
                out.setdefault(name, {})[attribute] = (None if mine is missing else mine, value)
    return out


def _missing_responses(expected: list[str], given: list[str]) -> list[str]:
    """The answer's responses not found among ``given``, each given response used at most once."""
    pool = list(given)
    missing = []
    for item in expected:
        try:
            pool.remove(item)
        except ValueError:
            missing.append(item)
    return missing


def _turn_failure(index: int, made: Sequence[ToolCall], truth_calls: Sequence[str], model: BfclBackends,
                  truth: BfclBackends, responses: list[str], truth_responses: list[str]) -> MultiTurnVerdict | None:
    if not truth_calls:
        return None
    if not made:
        return MultiTurnVerdict(False, "multi_turn:empty_turn_model_response", index,
                              f"turn {index}: the answer makes {len(truth_calls)} call(s), the model none")
    differences = backend_differences(model, truth)
    if differences:
        said = "; ".join(f"{name}.{attr}" for name, attrs in differences.items() for attr in attrs)
        return MultiTurnVerdict(False, "multi_turn:instance_state_mismatch", index,
                              f"turn {index}: the state differs from the answer's in {said}")
    missing = _missing_responses(truth_responses, responses)
    if missing:
        return MultiTurnVerdict(False, "multi_turn:execution_response_mismatch", index,
                              f"turn {index}: no model response so far matches {missing[:3]}")
    return None


def judge_multi_turn(entry: MultiTurnEntry, turns: Sequence[Sequence[ToolCall | Mapping[str, Any]]],
                  played: int | None = None) -> MultiTurnVerdict:
    """BFCL's multi-turn verdict on ``turns`` (the model's calls, one list per user turn) for ``entry``.

    ``played`` judges only the first ``played`` turns (an episode still going: its turns so far); None
    judges the whole entry, whose every turn the trajectory must have.
    """
    expected = len(entry.ground_truth) if played is None else played
    if len(turns) != expected or expected > len(entry.ground_truth):
        return MultiTurnVerdict(False, "multi_turn:force_terminated", None,
                              f"the trajectory has {len(turns)} turn(s); the entry has {len(entry.ground_truth)}"
                              + (f" and {played} were played" if played is not None else ""))
    classes = isolated_classes()  # shared by the two sides, as BFCL's checker shares them
    model, truth = BfclBackends(entry, classes), BfclBackends(entry, classes)
    responses: list[str] = []
    for index in range(expected):
        made = [ToolCall.of(c) for c in turns[index]]
        responses += [model.run(call) for call in made]
        truth_calls = entry.ground_truth[index]
        truth_responses = [truth.run(ToolCall.parse(text)) for text in truth_calls]
        failure = _turn_failure(index, made, truth_calls, model, truth, responses, truth_responses)
        if failure is not None:
            return failure
    return MultiTurnVerdict(True)
