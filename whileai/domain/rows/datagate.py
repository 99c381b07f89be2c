"""Gates for real tool-use data, run before any compute: tool names, schema types, and the gold against the tools.

``gate_rows(rows)`` answers ``(rows, report)``. What has one unambiguous
mapping is mapped (and counted): a tool name the OpenAI wire refuses
(``^[a-zA-Z0-9_-]{1,64}$``) whose refused characters become ``_`` (BFCL's own
handlers turn ``.`` into ``_``) when that name is free in the row; a schema
type that is not JSON Schema (``dict``, ``float``, ``tuple``, ``any``, ...)
mapped the way BFCL's function-calling handlers map them (GORILLA_TO_OPENAPI).
What has none is refused with the row and the fix: a name that cannot be
mapped, an unknown type, a gold call naming a tool the row does not offer,
missing a required argument, or giving a value of the wrong type.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

__all__ = ["TOOL_NAME", "SCHEMA_TYPES", "TYPE_MAP", "RefusedRow", "GateReport", "gate_rows", "map_schema", "wire_name",
           "gold_calls"]


class RefusedRow(TypedDict):
    """A row the data gates refused: its index, its task and each problem no mapping fixes."""

    row: int
    task_id: Any  #: the row's ``task_id`` as it gave it (None without one)
    problems: list[str]


class GateReport(TypedDict):
    """``gate_rows``' report: the rows read, the tool names and schema types mapped, and the rows refused."""

    rows: int
    tool_names_mapped: int
    types_mapped: dict[str, int]  #: JSON-Schema type -> how many were mapped to the wire's
    refused_rows: int
    refused: list[RefusedRow]

#: The tool names the OpenAI chat-completions wire accepts.
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: JSON Schema's own type names.
SCHEMA_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})
#: Other type names real data carries, and their JSON Schema type: BFCL's GORILLA_TO_OPENAPI
#: (bfcl_eval/constants/type_mappings.py), the table its function-calling handlers use.
TYPE_MAP = {
    "float": "number", "bool": "boolean", "list": "array", "dict": "object", "tuple": "array", "any": "string",
    "byte": "integer", "short": "integer", "long": "integer", "double": "number", "char": "string",
    "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object", "Queue": "array",
    "Stack": "array", "Any": "string", "String": "string", "Bigint": "integer",
}
_REFUSED_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def wire_name(name: str) -> str | None:
    """``name`` as the OpenAI wire accepts it (refused characters as ``_``), or None when no such name exists."""
    if TOOL_NAME.match(name):
        return name
    mapped = _REFUSED_CHARS.sub("_", name)
    return mapped if TOOL_NAME.match(mapped) else None


def map_schema(schema: Any, counts: dict[str, int], problems: list[str], where: str) -> Any:
    """A JSON-schema fragment with every non-JSON-Schema ``type`` mapped (BFCL's way); unknown ones noted."""
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    kind = out.get("type")
    if isinstance(kind, str) and kind not in SCHEMA_TYPES:
        if kind in TYPE_MAP:
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "float":  # BFCL's handler keeps the float hint
                out["format"] = "float"
            out["type"] = TYPE_MAP[kind]
        else:
            problems.append(f"{where}: type {kind!r} is not JSON Schema and has no mapping; use one of "
                            f"{', '.join(sorted(SCHEMA_TYPES))}")
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {k: map_schema(v, counts, problems, f"{where}.{k}") for k, v in out["properties"].items()}
    if isinstance(out.get("items"), Mapping):
        out["items"] = map_schema(out["items"], counts, problems, f"{where}[]")
    return out


def gold_calls(gold: Any) -> list[Mapping[str, Any]]:
    """Every call a gold names (each alternative's, each parallel one)."""
    if not isinstance(gold, Mapping):
        return []
    if "one_of" in gold:
        return [c for option in gold["one_of"] or [] for c in gold_calls(option)]
    if "parallel" in gold:
        return [c for c in gold["parallel"] or [] if isinstance(c, Mapping)]
    return [gold] if "name" in gold else []


def _rename_gold(gold: Any, names: Mapping[str, str]) -> Any:
    if not isinstance(gold, Mapping):
        return gold
    if "one_of" in gold:
        return {**gold, "one_of": [_rename_gold(o, names) for o in gold["one_of"]]}
    if "parallel" in gold:
        return {**gold, "parallel": [_rename_gold(c, names) for c in gold["parallel"]]}
    if "name" in gold and gold["name"] in names:
        return {**gold, "name": names[gold["name"]]}
    return gold


def _gold_problems(gold: Any, tools: list[Any], where: str) -> list[str]:
    from whileai.domain.rows.actions import parse_arguments
    from whileai.domain.rows.gold import _is_type

    offered: dict[str, Any] = {}
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, Mapping) else {}
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            offered[fn["name"]] = fn.get("parameters") if isinstance(fn.get("parameters"), Mapping) else {}
    problems = []
    for call in gold_calls(gold):
        name = call.get("name")
        if offered and name not in offered:
            problems.append(f"{where}: gold calls {name!r}, which the row's tools do not offer "
                            f"({', '.join(sorted(offered))}); fix the gold's name or add the tool")
            continue
        params: Mapping[str, Any] = offered.get(str(name)) or {}
        found = params.get("properties")
        props: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        args = parse_arguments(call.get("arguments"))
        args = args if isinstance(args, dict) else {}
        given = set(args) | {k for k, v in (call.get("values") or {}).items() if v}
        missing = [r for r in params.get("required") or [] if r not in given]
        if missing:
            problems.append(f"{where}: gold call {name!r} lacks the required argument(s) {missing}; add them to the "
                            "gold or drop them from the schema's required")
        bfcl = (call.get("match") or (gold.get("match") if isinstance(gold, Mapping) else None)) == "bfcl"
        for key, value in args.items():
            spec = props.get(key)
            if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), (str, list)):
                continue
            if bfcl and isinstance(value, str):
                continue  # BFCL's "variable": a name where the schema wants a value, compared exactly
            if not _is_type(value, spec["type"]):
                problems.append(f"{where}: gold argument {name}.{key}={value!r} is not of the schema's type "
                                f"{spec['type']!r}; fix the value or the schema")
    return problems


def gate_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], GateReport]:
    """The rows with unambiguous mappings applied, and the report: counts mapped, problems refused (by row)."""
    out: list[dict[str, Any]] = []
    names_mapped = 0
    types: dict[str, int] = {}
    refused: list[RefusedRow] = []
    last: tuple[Any, list[Any], dict[str, str], list[str]] | None = None  # rows of one simulation share tools
    for index, row in enumerate(rows):
        problems: list[str] = []
        row = dict(row)
        tools = row.get("tools") or []
        renames: dict[str, str] = {}
        if tools and last is not None and (tools is last[0] or tools == last[0]):
            row["tools"], renames, problems = last[1], last[2], list(last[3])
        elif tools:
            taken = {t.get("function", {}).get("name") for t in tools if isinstance(t, Mapping)}
            fixed_tools = []
            for k, tool in enumerate(tools):
                fn = dict(tool.get("function") or {}) if isinstance(tool, Mapping) else {}
                name = fn.get("name")
                if isinstance(name, str) and not TOOL_NAME.match(name):
                    mapped = wire_name(name)
                    if mapped is None or mapped in taken:
                        problems.append(f"tools[{k}] name {name!r} is refused by the OpenAI wire "
                                        f"({TOOL_NAME.pattern}) and has no free mapping; rename the tool")
                    else:
                        renames[name] = fn["name"] = mapped
                        taken.add(mapped)
                        names_mapped += 1
                if isinstance(fn.get("parameters"), Mapping):
                    fn["parameters"] = map_schema(fn["parameters"], types, problems, f"tools[{k}].parameters")
                fixed_tools.append({**tool, "function": fn})
            row["tools"] = fixed_tools
            last = (tools, fixed_tools, renames, list(problems))
        if renames:
            row["gold"] = _rename_gold(row.get("gold"), renames)
            row["messages"] = copy.deepcopy(row["messages"])
            for message in row["messages"]:
                for call in message.get("tool_calls") or []:
                    function = call.get("function") if isinstance(call, Mapping) else None
                    if isinstance(function, dict) and function.get("name") in renames:
                        function["name"] = renames[function["name"]]
        if row.get("gold") is not None and tools:
            problems.extend(_gold_problems(row["gold"], row["tools"], "gold"))
        if problems:
            refused.append({"row": index, "task_id": row.get("task_id"), "problems": problems})
        out.append(row)
    report: GateReport = {"rows": len(rows), "tool_names_mapped": names_mapped,
                          "types_mapped": dict(sorted(types.items())), "refused_rows": len(refused), "refused": refused}
    return out, report
