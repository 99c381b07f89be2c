"""Gold that says what real graders say: acceptable values, optional arguments, alternatives, parallel calls.

A row's ``gold`` is one of (docs/rows.md has examples):

- ``{"answer": text}``: a final answer (compared loosely, as always);
- ``{"name", "arguments"}``: one exact call, today's form and verdict;
- the same call with ``values`` (per argument, the list of acceptable values),
  ``optional`` (arguments the reply may leave out) and ``match`` (the rule);
- ``{"parallel": [call, ...]}``: every call is required, in any order;
- ``{"one_of": [call or parallel, ...]}``: several acceptable answers;
- ``{"no_call": true}``: the reply must call no tool (any text passes), as
  for a question none of the offered functions can answer.

``match`` travels with the gold: ``"exact"`` (the default) compares parsed JSON
values (``1`` equals ``1.0``, ``"Paris"`` is not ``"paris"``); ``"bfcl"`` is the
Berkeley Function Calling Leaderboard's rule (strings compared after dropping
spaces and ``,./-_*^`` and folding case, lists and objects element by element
the same way, and the reply must make exactly the gold's number of calls; for
``no_call``, a reply passes unless every call in it decodes to a name and an
arguments object, as BFCL's irrelevance check decodes it).
Where the row offers the tool's JSON schema, each argument's type is read from
it: an ``integer`` is not satisfied by ``5.0``, a ``number`` is by ``5``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypedDict

from whileai.domain.rows.actions import _Unparsed, content_text, json_equal, parse_arguments

__all__ = ["GOLD_RULES", "ReplyCall", "ReplyTurn", "is_plain_gold", "gold_problem", "judge_turn", "first_turn"]


class ReplyCall(TypedDict):
    """One call of a reply turn as the judges read it."""

    name: Any  #: the tool name as the reply gave it (a str, or what a malformed call carries)
    arguments: Any  #: a dict where the arguments are (or parse as) a JSON object, else ``parse_arguments``' answer


class ReplyTurn(TypedDict):
    """An assistant turn as the judges read it (``first_turn``): its calls in order and its text."""

    calls: list[ReplyCall]
    answer: str

#: The comparison rules a gold may name in ``match``.
GOLD_RULES = ("exact", "bfcl")
_CALL_KEYS = {"name", "arguments", "values", "optional", "match"}
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")


def is_plain_gold(gold: Any) -> bool:
    """A plain gold (``{"answer"}`` or one exact ``{"name", "arguments"}``), judged by exact first-action match."""
    return isinstance(gold, Mapping) and ("answer" in gold or (
        "name" in gold and not any(k in gold for k in ("values", "optional", "match"))))


# ---------------------------------------------------------------------------
# Validation (the row contract's check of the extended forms)
# ---------------------------------------------------------------------------


def _call_problem(call: Any, where: str) -> str | None:
    if type(call) is not dict:
        return f"{where} must be a call {{'name', 'arguments'}}, got {type(call).__name__}"
    name = call.get("name")
    if type(name) is not str or not name:
        return f"{where}.name must be a non-empty string, got {name!r}"
    arguments = call.get("arguments", {})
    if type(arguments) is not dict and type(arguments) is not str:
        return f"{where}.arguments must be a dict or a JSON string, got {type(arguments).__name__}"
    values = call.get("values")
    if values is not None:
        if type(values) is not dict or any(type(v) is not list for v in values.values()):
            return f"{where}.values must map each argument to the list of its acceptable values"
    optional = call.get("optional")
    if optional is not None and (type(optional) is not list or any(type(k) is not str for k in optional)):
        return f"{where}.optional must be a list of argument names"
    if "match" in call and call["match"] not in GOLD_RULES:
        return f"{where}.match is {call['match']!r}; accepted: {', '.join(GOLD_RULES)}"
    return None


def gold_problem(gold: Any) -> str | None:
    """What is wrong with an extended gold (values/optional/match, parallel, one_of); None when nothing is."""
    if type(gold) is not dict:
        return None
    if "match" in gold and gold["match"] not in GOLD_RULES:
        return f"gold.match is {gold['match']!r}; accepted: {', '.join(GOLD_RULES)}"
    if "no_call" in gold:
        if gold["no_call"] is not True or gold.keys() - {"no_call", "match"}:
            return ("gold.no_call is the whole gold {'no_call': true} (optionally with 'match'): the reply must "
                    f"call no tool; got {gold!r}")
        return None
    if "parallel" in gold:
        calls = gold["parallel"]
        if type(calls) is not list or not calls:
            return "gold.parallel must be a non-empty list of calls (every one required, in any order)"
        for i, call in enumerate(calls):
            problem = _call_problem(call, f"gold.parallel[{i}]")
            if problem:
                return problem
        return None
    if "one_of" in gold:
        options = gold["one_of"]
        if type(options) is not list or not options:
            return "gold.one_of must be a non-empty list of acceptable answers (calls or {'parallel': [...]})"
        for i, option in enumerate(options):
            if type(option) is dict and "parallel" in option:
                problem = gold_problem(option)
                problem = problem and problem.replace("gold.", f"gold.one_of[{i}].", 1)
            else:
                problem = _call_problem(option, f"gold.one_of[{i}]")
            if problem:
                return problem
        return None
    if "name" in gold:
        return _call_problem(gold, "gold")
    return None


# ---------------------------------------------------------------------------
# Judging
# ---------------------------------------------------------------------------


def first_turn(messages: list[Any]) -> ReplyTurn | None:
    """The first assistant turn as ``{"calls": [{"name", "arguments"}...], "answer": text}``; None without one."""
    for m in messages:
        if not (type(m) is dict or isinstance(m, Mapping)) or m.get("role") != "assistant":
            continue
        calls: list[ReplyCall] = []
        for call in m.get("tool_calls") or []:
            call = call if type(call) is dict or isinstance(call, Mapping) else {}
            fn = call.get("function", call)
            fn = fn if type(fn) is dict or isinstance(fn, Mapping) else {}
            arguments = fn.get("arguments")
            calls.append({"name": fn.get("name"),
                          "arguments": arguments if type(arguments) is dict else parse_arguments(arguments)})
        return {"calls": calls, "answer": content_text(m.get("content"))}
    return None


def _schemas(tools: Any, names: set[str]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for tool in tools or ():
        fn = tool.get("function", tool) if type(tool) is dict or isinstance(tool, Mapping) else None
        if fn is not None and fn.get("name") in names and fn["name"] not in out:
            params = fn.get("parameters")
            props = params.get("properties") if isinstance(params, Mapping) else None
            out[fn["name"]] = props if isinstance(props, Mapping) else {}
    return out


def _is_type(value: Any, kind: Any) -> bool:
    if isinstance(kind, list):
        return any(_is_type(value, k) for k in kind)
    if kind == "integer":
        return type(value) is int
    if kind == "number":
        return type(value) in (int, float)
    if kind == "string":
        return isinstance(value, str) and not isinstance(value, _Unparsed)
    if kind == "boolean":
        return type(value) is bool
    if kind == "array":
        return type(value) is list
    if kind == "object":
        return type(value) is dict
    if kind == "null":
        return value is None
    return True  # a type this check does not know: the value comparison decides


def _type_ok(value: Any, spec: Any, acceptable: list[Any]) -> bool:
    if not isinstance(spec, Mapping) or "type" not in spec:
        return True
    if _is_type(value, spec["type"]):
        items = spec.get("items")
        if not (spec["type"] == "array" and isinstance(items, Mapping) and "type" in items):
            return True
        if all(_is_type(v, items["type"]) for v in value):
            return True
        return any(_same(value, a) for a in acceptable)  # the gold itself lists this very value
    # a value of the gold's own type is accepted (BFCL's "variable" case: a name where the schema says string)
    return any(type(a) is type(value) for a in acceptable)


def _same(a: Any, b: Any) -> bool:
    """Equal with the same JSON types all the way down (5 is not 5.0 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def standardize(text: str) -> str:
    """BFCL's string rule: spaces and ``,./-_*^`` dropped, case folded, single quotes as double quotes."""
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def _bfcl_form(value: Any) -> Any:
    if isinstance(value, str):
        return standardize(value)
    if isinstance(value, list):
        return [standardize(v) if isinstance(v, str) else v for v in value]
    if isinstance(value, dict):
        return {k: standardize(v) if isinstance(v, str) else v for k, v in value.items()}
    return value


#: acceptable-value lists already put in BFCL's form, by id (the list is kept, so its id is not reused)
_FORMS: dict[int, tuple[list[Any], list[tuple[type, Any]]]] = {}
_FORMS_KEPT = 4096


def _forms(acceptable: list[Any]) -> list[tuple[type, Any]]:
    hit = _FORMS.get(id(acceptable))
    if hit is not None and hit[0] is acceptable:
        return hit[1]
    forms = [(type(a), _bfcl_form(a)) for a in acceptable]
    if len(_FORMS) >= _FORMS_KEPT:
        _FORMS.clear()
    _FORMS[id(acceptable)] = (acceptable, forms)
    return forms


def value_ok(value: Any, acceptable: list[Any], rule: str) -> bool:
    if rule == "bfcl":
        kind = type(value)
        if kind is str or kind is list or kind is dict:
            form = _bfcl_form(value)
            return any(k is kind and f == form for k, f in _forms(acceptable))
        return any(not isinstance(a, (str, list, dict)) and value == a for a in acceptable)
    return any(json_equal(value, a) for a in acceptable)


def _call_matches(call: Mapping[str, Any], gold: Mapping[str, Any], schemas: Mapping[str, Any], rule: str,
                  ignored: frozenset[str]) -> tuple[bool, str]:
    if call.get("name") != gold["name"]:
        return False, f"wrong tool: {call.get('name')!r}, expected {gold['name']!r}"
    got = call.get("arguments")
    if type(got) is not dict:
        return False, ("arguments are not valid JSON" if isinstance(got, _Unparsed)
                       else f"arguments are a JSON {type(got).__name__}, expected an object")
    reference = gold.get("arguments")
    if type(reference) is not dict:
        reference = parse_arguments(reference)
        reference = reference if isinstance(reference, dict) else {}
    values = gold.get("values") or {}
    optional = gold.get("optional") or ()
    accepted = reference.keys() | values.keys() | set(optional)
    if ignored:
        accepted -= ignored
        got = {k: v for k, v in got.items() if k not in ignored}
    extra = got.keys() - accepted
    if extra:
        return False, f"arguments differ: extra {sorted(extra)}"
    missing = accepted - got.keys()
    if missing and not missing <= set(optional):
        return False, f"arguments differ: missing {sorted(k for k in missing if k not in optional)}"
    props = schemas.get(gold["name"], {})
    if rule == "bfcl" and gold["name"] in schemas and got.keys() - props.keys():  # BFCL: not in the function's doc
        return False, f"arguments differ: {sorted(got.keys() - props.keys())} not in the tool's schema"
    for key, value in got.items():
        if key in values:
            acceptable = values[key]
        elif key in reference:
            acceptable = [reference[key]]
        else:
            acceptable = None  # optional with no listed value: any value of the right type
        spec = props.get(key)
        if spec is not None and not _type_ok(value, spec, acceptable or []):
            kind = props[key].get("type")
            return False, f"arguments differ: {key!r} is not of type {kind!r}"
        # BFCL's "variable": a string where the schema wants another type is compared exactly, not as a string
        variable = type(value) is str and isinstance(spec, Mapping) and spec.get("type") not in (None, "string")
        if acceptable is not None and not value_ok(value, acceptable, "exact" if variable else rule):
            return False, f"arguments differ: different [{key!r}]"
    return True, "match"


def gold_options(gold: Mapping[str, Any], rule: str) -> list[tuple[list[Mapping[str, Any]], str, bool]]:
    """Each acceptable answer as (calls, rule, whether the reply must make exactly that many calls)."""
    rule = gold.get("match", rule)
    if "one_of" in gold:
        return [opt for option in gold["one_of"] for opt in gold_options(option, rule)]
    if "parallel" in gold:
        return [(list(gold["parallel"]), rule, True)]
    return [([gold], gold.get("match", rule), gold.get("match", rule) == "bfcl")]


def no_call_verdict(calls: list[ReplyCall], rule: str) -> tuple[bool, str]:
    """A ``no_call`` verdict: no call at all, or (BFCL's rule) a call its decoder refuses, which voids them all."""
    if not calls:
        return True, "no call, as expected"
    if rule == "bfcl" and any(type(c.get("arguments")) is not dict or type(c.get("name")) is not str for c in calls):
        return True, "no call BFCL can decode (a call without an arguments object voids the reply's calls)"
    return False, f"made {len(calls)} call(s); expected no call"


def judge_turn(messages: list[Any], gold: Mapping[str, Any], tools: Any = None,
               ignored: frozenset[str] = frozenset()) -> tuple[bool, str]:
    """Whether the first assistant turn of ``messages`` satisfies ``gold`` (any form), and a short reason."""
    from whileai.domain.rows.actions import action_matches, first_action

    if "answer" in gold:
        return action_matches(first_action(messages), gold)
    turn = first_turn(messages)
    if turn is None:
        return False, "no assistant turn"
    if "no_call" in gold:
        return no_call_verdict(turn["calls"], gold.get("match", "exact"))
    if not turn["calls"]:
        return False, "expected a tool call, got a final answer"
    options = gold_options(gold, "exact")
    schemas = _schemas(tools, {str(c.get("name")) for calls, _, _ in options for c in calls}) if tools else {}
    reasons = []
    for calls, rule, counted in options:
        if counted and len(turn["calls"]) != len(calls):
            reasons.append(f"made {len(turn['calls'])} call(s), expected {len(calls)}")
            continue
        replies = turn["calls"] if counted else turn["calls"][:1]
        used: set[int] = set()
        ok, reason = True, "match"
        for want in calls:  # BFCL's order: each gold call takes the first unused reply call that matches it
            for index, call in enumerate(replies):
                if index in used:
                    continue
                ok, reason = _call_matches(call, want, schemas, rule, ignored)
                if ok:
                    used.add(index)
                    break
            else:
                ok = False
            if not ok:
                break
        if ok:
            return True, "match"
        reasons.append(reason)
    return False, reasons[0] if len(reasons) == 1 else "no acceptable answer matched: " + "; ".join(reasons[:3])
