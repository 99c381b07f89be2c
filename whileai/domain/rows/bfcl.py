"""BFCL (Berkeley Function Calling Leaderboard) question and possible-answer files as rollout rows.

``from_bfcl(questions, answers)`` reads one category's two JSONL files (the
``bfcl-eval`` package's ``data/BFCL_v4_<category>.json`` and
``data/possible_answer/BFCL_v4_<category>.json``) and returns a row per
question: the functions as OpenAI tools (names and types mapped the way BFCL's
own function-calling handlers map them: ``.`` in a name becomes ``_``, ``dict``
becomes ``object``, ``float`` becomes ``number``, see ``datagate.TYPE_MAP``),
the question as the prompt, the first acceptable call(s) as the assistant turn,
and a gold with every alternative under BFCL's rule (``match: "bfcl"``). An
irrelevance category has no answer file: its rows' gold is ``{"no_call": true}``.
``from_bfcl_folder(folder, categories)`` reads several categories of one data
folder into one list, each row naming its ``category``.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from whileai.core.errors import RowFormatError

from whileai.domain import defaults
from whileai.domain.rows.bfcl_multi_turn import multi_turn_shape
from whileai.domain.rows.datagate import TOOL_NAME, map_schema, wire_name

__all__ = ["from_bfcl", "from_bfcl_folder", "bfcl_data_folder", "bfcl_category", "BfclRows", "BfclReport",
           "LeftOutQuestion", "bfcl_tool", "bfcl_gold", "BFCL_AST_CATEGORIES", "BFCL_REFUSED_CATEGORIES", "bfcl_category_problem",
           "bfcl_categories_problem"]

#: BFCL's single-turn Python categories that its AST checker (or, for irrelevance, its no-call rule) scores
BFCL_AST_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance",
                       "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance")
_FILE = re.compile(r"^BFCL_v\d+_(?P<category>.+)\.json$")

_MULTI_TURN = ("multi-turn: each question is several user turns against BFCL's stateful APIs (file system, "
               "trading bot, ...), which a one-reply row cannot hold; read it as episodes with read_multi_turn "
               "(whileai.domain.rows.bfcl_multi_turn), played in whileai.domain.episodes.bfcl")
_JAVA_JS = ("BFCL scores it by reading each argument string with its {} type converter, which the judge here "
            "(Python values under BFCL's rule) does not do")
#: Every category bfcl-eval ships (its data/BFCL_v4_<category>.json) that whileai does not convert, and why
BFCL_REFUSED_CATEGORIES: dict[str, str] = {
    "multi_turn_base": _MULTI_TURN,
    "multi_turn_miss_func": _MULTI_TURN,
    "multi_turn_miss_param": _MULTI_TURN,
    "multi_turn_long_context": _MULTI_TURN,
    "web_search": ("agentic and multi-turn: its questions are answered by searching the live web through BFCL's "
                   "search tools over several turns, so it is not yet trainable here"),
    "memory": ("agentic and multi-turn: its questions are answered from a memory backend that earlier "
               "conversations filled, over several turns, so it is not yet trainable here"),
    "simple_java": _JAVA_JS.format("Java"),
    "simple_javascript": _JAVA_JS.format("JavaScript"),
    "java": _JAVA_JS.format("Java"),  # the names of bfcl-eval releases before simple_java / simple_javascript
    "javascript": _JAVA_JS.format("JavaScript"),
    "live_relevance": ("BFCL scores it by the relevance rule (any call passes, and it has no possible-answer file), "
                       "which no gold here expresses"),
    "format_sensitivity": ("it asks other categories' questions under varied prompt formats to measure a "
                           "prompting model's format sensitivity, and it has no possible-answer file of its own"),
}


def bfcl_categories_problem(categories: list[str] | tuple[str, ...],
                            folder: str | os.PathLike | None = None) -> str | None:
    """Every category of ``categories`` that cannot be read, in one message ending with the categories converted;
    None when all can (:func:`bfcl_category_problem`)."""
    said = [text for c in categories if (text := bfcl_category_problem(c, folder, listed=False)) is not None]
    return "; ".join(said) + f"; the categories converted: {', '.join(BFCL_AST_CATEGORIES)}" if said else None


def bfcl_category_problem(category: str, folder: str | os.PathLike | None = None, listed: bool = True) -> str | None:
    """Why ``category`` cannot be read as rows, in a user's words, or None when it can.

    A category bfcl-eval ships that is not converted is refused by name with the reason; a name that is not a
    BFCL category, and whose question file ``folder`` (when given) lacks, gets the nearest names. Both list the
    categories converted (BFCL_AST_CATEGORIES).
    """
    import difflib

    supported = f"; the categories converted: {', '.join(BFCL_AST_CATEGORIES)}" if listed else ""
    if category in BFCL_REFUSED_CATEGORIES:
        return f"BFCL category {category!r} is not converted: {BFCL_REFUSED_CATEGORIES[category]}{supported}"
    if category in BFCL_AST_CATEGORIES:
        return None
    if folder is not None and (Path(folder).expanduser() / f"BFCL_v4_{category}.json").is_file():
        return None  # a category of the user's own in BFCL's format
    near = difflib.get_close_matches(category, [*BFCL_AST_CATEGORIES, *BFCL_REFUSED_CATEGORIES], n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"{category!r} is not a BFCL category{hint}{supported}"


class LeftOutQuestion(TypedDict):
    """A question no row was made of: its BFCL id, its line in the questions file, and why."""

    id: str
    line: int
    why: str


class BfclReport(TypedDict, total=False):
    """What a conversion mapped and left out (``BfclRows.report``)."""

    questions: int  #: questions read
    rows: int  #: rows made
    left_out: list[LeftOutQuestion]
    tool_names_mapped: int  #: tool names changed to fit the OpenAI wire
    types_mapped: dict[str, int]  #: schema types mapped to JSON Schema's, by BFCL's type name (one category)
    categories: dict[str, BfclReport]  #: each category's own report (``from_bfcl_folder``)


class BfclRows(list):
    """The converted rows (a plain list of dicts) with ``report``: what was mapped, expanded or left out."""

    report: BfclReport


def _read(path: str | os.PathLike, what: str) -> list[tuple[int, dict[str, Any]]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"BFCL {what} file {str(path)!r} does not exist; pass the path of a category's "
                                f"{what} file (bfcl_eval/data/{'possible_answer/' if what == 'answers' else ''}"
                                "BFCL_v4_<category>.json)")
    out = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as err:
                raise RowFormatError(f"{path}:{line_no}: not JSON ({err}); each line of a BFCL {what} file is one "
                                     "JSON object", [{"row": None, "line": line_no, "path": str(path),
                                                      "detail": str(err)}]) from None
            if not isinstance(entry, dict) or "id" not in entry:
                raise RowFormatError(f"{path}:{line_no}: a BFCL {what} line is an object with an 'id'",
                                     [{"row": None, "line": line_no, "path": str(path), "detail": "no id"}])
            out.append((line_no, entry))
    return out


def bfcl_tool(function: Mapping[str, Any], counts: dict[str, int], problems: list[str]) -> dict[str, Any]:
    """One BFCL function doc as an OpenAI tool, mapped as BFCL's OpenAI handler does (convert_to_tool)."""
    fn = json.loads(json.dumps(function))
    name = fn.get("name", "")
    mapped = wire_name(name) if isinstance(name, str) else None
    if mapped is None:
        problems.append(f"tool name {name!r} is refused by the OpenAI wire ({TOOL_NAME.pattern}) even with '_' "
                        "for the refused characters")
    elif mapped != name:
        counts["tool_names_mapped"] = counts.get("tool_names_mapped", 0) + 1
        fn["name"] = mapped
    params = dict(fn.get("parameters") or {})
    params["type"] = "object"
    props = {}
    for key, spec in (params.get("properties") or {}).items():
        spec = dict(spec) if isinstance(spec, Mapping) else {}
        spec.setdefault("type", "string")  # BFCL's handler: a parameter without a type is a string
        if spec["type"] == "float":
            spec["description"] = str(spec.get("description", "")) + " This is a float type value."
        props[key] = spec
    params["properties"] = props
    types: dict[str, int] = {}
    fn["parameters"] = map_schema(params, types, problems, f"{name}.parameters")
    for kind, n in types.items():
        counts[f"type_{kind}"] = counts.get(f"type_{kind}", 0) + n
    return {"type": "function", "function": fn}


def _expand(template: Any, cap: int) -> list[Any]:
    """BFCL's nested alternatives ({key: [values, "" = may be left out]}) as concrete objects, at most ``cap``."""
    if isinstance(template, dict) and template and all(isinstance(v, list) for v in template.values()):
        keys = list(template)
        choices = [[v for v in template[k]] for k in keys]
        out = []
        for combo in itertools.product(*choices):
            out.append({k: _expand(v, cap)[0] for k, v in zip(keys, combo) if v != ""})
            if len(out) >= cap:
                break
        return out
    if isinstance(template, list) and template and all(isinstance(v, dict) for v in template):
        per_item = [_expand(v, cap) for v in template]
        return [list(combo) for combo in itertools.islice(itertools.product(*per_item), cap)]
    return [template]


def _is_template(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value) and all(isinstance(v, list) for v in value.values())
    return isinstance(value, list) and bool(value) and all(_is_template(v) for v in value)


def bfcl_gold(call: Mapping[str, Any], function: Mapping[str, Any] | None, cap: int) -> dict[str, Any]:
    """One ground-truth call ({name: {param: [acceptable values, "" = optional]}}) as a gold call."""
    (name, params), = call.items()
    required = set(((function or {}).get("parameters") or {}).get("required") or [])
    props = ((function or {}).get("parameters") or {}).get("properties") or {}
    arguments: dict[str, Any] = {}
    values: dict[str, list[Any]] = {}
    optional = []
    for param, acceptable in params.items():
        kind = (props.get(param) or {}).get("type")
        concrete: list[Any] = []
        for value in acceptable:
            if value == "":
                continue
            if kind in ("dict", "object", "array", "list", "tuple") and _is_template(value):
                concrete.extend(v for v in _expand(value, cap) if v not in concrete)
            elif value not in concrete or type(value) is not type(concrete[concrete.index(value)]):
                concrete.append(value)
        values[param] = concrete
        if "" in acceptable and param not in required:
            optional.append(param)
            if acceptable[0] == "" or (function is not None and param not in props):
                continue  # the first acceptable call leaves it out (BFCL refuses a parameter its doc lacks)
        if concrete:
            arguments[param] = concrete[0]
    out = {"name": wire_name(name) or name, "arguments": arguments, "values": values}
    if optional:
        out["optional"] = optional
    return out


def bfcl_category(questions: str | os.PathLike) -> str:
    """The category a BFCL question file holds, from its name: ``BFCL_v4_parallel_multiple.json`` -> ``parallel_multiple``."""
    name = Path(questions).name
    found = _FILE.match(name)
    return found.group("category") if found else Path(name).stem


def bfcl_data_folder() -> Path | None:
    """The installed ``bfcl-eval`` package's data folder (found without importing the package), or None."""
    try:
        spec = importlib.util.find_spec("bfcl_eval")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        if (Path(location) / "data").is_dir():
            return Path(location) / "data"
    return None


def _no_call_rows(questions: str | os.PathLike, category: str, counts: dict[str, int]) -> BfclRows:
    """An irrelevance category's rows: none of the offered functions fits, so the reference reply calls none."""
    rows = BfclRows()
    left_out: list[LeftOutQuestion] = []
    for line_no, entry in _read(questions, "questions"):
        problems: list[str] = []
        tools = [bfcl_tool(fn, counts, problems) for fn in entry.get("function") or []]
        if problems:
            left_out.append({"id": entry["id"], "line": line_no, "why": "; ".join(problems)})
            continue
        prompt = [dict(m) for m in (entry.get("question") or [[]])[0]]
        reply = {"role": "assistant", "content": defaults.BFCL_NO_CALL_REPLY}
        rows.append({"messages": prompt + [reply], "tools": tools, "gold": {"no_call": True, "match": "bfcl"},
                     "task_id": str(entry["id"]), "category": category, "passed": True, "reward": 1.0})
    rows.report = {"questions": len(rows) + len(left_out), "rows": len(rows), "left_out": left_out}
    return rows


def from_bfcl(questions: str | os.PathLike, answers: str | os.PathLike | None = None,
              category: str | None = None) -> BfclRows:
    """Rollout rows from one BFCL category's question file and possible-answer file.

    Each row: ``tools`` (the question's functions as OpenAI tools), the
    question's first turn as the prompt, the first acceptable call(s) as the
    assistant turn, ``gold`` with every acceptable value and optional argument
    under BFCL's rule (``match: "bfcl"``; a parallel question's calls as
    ``{"parallel": [...]}``), ``task_id`` the BFCL id, ``category`` (``category``,
    else read from the file's name), ``passed: True``. An irrelevance category
    (BFCL has no answer file for it; ``answers`` is not read) gives rows whose
    gold is ``{"no_call": true}`` and whose assistant turn is a short reply
    calling nothing (BFCL_NO_CALL_REPLY). ``rows.report`` counts what was mapped
    and what was left out (a question without an answer, a name no mapping can
    fix). Nothing is downloaded.

        rows = wai.datasets.from_bfcl("BFCL_v4_simple_python.json",
                                      "possible_answer/BFCL_v4_simple_python.json")
    """
    cap = defaults.BFCL_EXPANSION_CAP
    category = category or bfcl_category(questions)
    if category in BFCL_REFUSED_CATEGORIES:
        raise ValueError(f"from_bfcl: {bfcl_category_problem(category)}")
    counts: dict[str, int] = {}
    if "irrelevance" in category:  # BFCL's own test: its irrelevance categories are scored by the no-call rule
        rows = _no_call_rows(questions, category, counts)
        return _reported(rows, counts)
    if answers is None:
        raise ValueError(f"from_bfcl: category {category!r} ({questions}) needs its possible-answer file "
                         "(bfcl_eval/data/possible_answer/BFCL_v4_<category>.json); only an irrelevance category "
                         "has none")
    truth = {entry["id"]: entry for _, entry in _read(answers, "answers")}
    rows = BfclRows()
    left_out: list[LeftOutQuestion] = []
    for line_no, entry in _read(questions, "questions"):
        answer = truth.get(entry["id"])
        if multi_turn_shape(entry, answer):  # a multi-turn file under a name that does not say so
            raise ValueError(f"from_bfcl: {questions}:{line_no} ({entry['id']!r}) is a multi-turn question (it names "
                             f"backends and its answer is turns of calls), not category {category!r}; "
                             f"{_MULTI_TURN}")
        if answer is None or not answer.get("ground_truth"):
            left_out.append({"id": entry["id"], "line": line_no, "why": "no possible answer with this id"})
            continue
        problems: list[str] = []
        functions = entry.get("function") or []
        tools = [bfcl_tool(fn, counts, problems) for fn in functions]
        by_name = {fn.get("name"): fn for fn in functions}
        calls = [bfcl_gold(call, by_name.get(next(iter(call))), cap) for call in answer["ground_truth"]]
        for call, truth_call in zip(calls, answer["ground_truth"]):
            required = set(((by_name.get(next(iter(truth_call))) or {}).get("parameters") or {}).get("required") or [])
            empty = sorted(k for k, v in call["values"].items() if not v and k in required)
            if empty:  # BFCL lists no acceptable value for a required argument: no reply can pass
                problems.append(f"the answer lists no acceptable value for the required argument(s) {empty} of "
                                f"{call['name']!r}, so no reply can pass")
            function = by_name.get(next(iter(truth_call))) or {}
            undocumented = sorted(k for k in call["values"] if k not in call.get("optional", [])
                                  and k not in ((function.get("parameters") or {}).get("properties") or {}))
            if function and undocumented:  # BFCL refuses an argument its doc lacks, and this one is not optional
                problems.append(f"the answer needs the argument(s) {undocumented} of {call['name']!r}, which its "
                                "function doc does not list, so no reply can pass")
        if problems:
            left_out.append({"id": entry["id"], "line": line_no, "why": "; ".join(problems)})
            continue
        turns = entry.get("question") or [[]]
        prompt = [dict(m) for m in turns[0]]
        reply = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for i, c in enumerate(calls)]}
        gold: dict[str, Any] = ({"parallel": calls, "match": "bfcl"} if len(calls) > 1
                                else {**calls[0], "match": "bfcl"})
        rows.append({"messages": prompt + [reply], "tools": tools, "gold": gold, "task_id": str(entry["id"]),
                     "category": category, "passed": True, "reward": 1.0})
    rows.report = {"questions": len(rows) + len(left_out), "rows": len(rows), "left_out": left_out}
    return _reported(rows, counts)


def _reported(rows: BfclRows, counts: dict[str, int]) -> BfclRows:
    rows.report["tool_names_mapped"] = counts.pop("tool_names_mapped", 0)
    rows.report["types_mapped"] = {k.removeprefix("type_"): v for k, v in sorted(counts.items())}
    return rows


def from_bfcl_folder(folder: str | os.PathLike, categories: list[str] | tuple[str, ...]) -> BfclRows:
    """Rows of several BFCL categories of one data folder (``bfcl_eval/data``), in the order named.

    Each category is read by :func:`from_bfcl` from ``BFCL_v4_<category>.json`` and
    ``possible_answer/BFCL_v4_<category>.json``; every row names its ``category``, so a held-out
    measurement reports before and after per category. ``rows.report`` holds each category's report
    under ``categories`` and the totals. Every missing file is named at once.

        rows = wai.datasets.from_bfcl_folder(wai.datasets.bfcl_data_folder(), ["simple_python", "irrelevance"])
    """
    base = Path(folder).expanduser()
    if not categories:
        raise ValueError(f"from_bfcl_folder: name at least one category; BFCL's AST categories: "
                         f"{', '.join(BFCL_AST_CATEGORIES)}")
    refused = bfcl_categories_problem(categories, base)
    if refused:
        raise ValueError(f"from_bfcl_folder: {refused}")
    missing = []
    for category in categories:
        needed = [base / f"BFCL_v4_{category}.json"]
        if "irrelevance" not in category:
            needed.append(base / "possible_answer" / f"BFCL_v4_{category}.json")
        missing += [str(p) for p in needed if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"BFCL data folder {str(base)!r} lacks {', '.join(missing)}; pass the folder that "
                                "holds BFCL_v4_<category>.json and possible_answer/ (bfcl_eval/data of "
                                "`pip install --no-deps bfcl-eval`) and categories it has (BFCL's AST categories: "
                                f"{', '.join(BFCL_AST_CATEGORIES)})")
    rows = BfclRows()
    reports: dict[str, BfclReport] = {}
    for category in categories:
        part = from_bfcl(base / f"BFCL_v4_{category}.json", base / "possible_answer" / f"BFCL_v4_{category}.json",
                         category)
        rows.extend(part)
        reports[category] = part.report
    rows.report = {"questions": sum(r["questions"] for r in reports.values()), "rows": len(rows),
                   "left_out": [x for r in reports.values() for x in r["left_out"]], "categories": reports,
                   "tool_names_mapped": sum(r["tool_names_mapped"] for r in reports.values())}
    return rows
