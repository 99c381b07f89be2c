"""The rollout row: the data contract between a simulation and everything that trains on it.

A rollout row is one JSON object: an OpenAI-wire conversation plus what the
simulation knew about it. The pydantic models below document every field
(``RolloutRow`` is the whole row); docs/rows.md shows an example.

Rows are checked with plain dict and type tests (``row_problems``), which agree
with the models and are an order of magnitude faster, because an export reads
hundreds of thousands of them. ``RolloutRow.model_validate(row)`` gives the same
verdict with pydantic's own messages when you want them.

    data = SimulationData(trajectories, system_prompt="You are a weather agent.", tools=tools)
    data.save("weather.jsonl")            # scrubbed rows, profile on each
    again = SimulationData.load("weather.jsonl")
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from whileai.domain.rows import jsonl
from whileai.domain.rows.taskkey import prompt_hash, prompt_messages, task_key
from whileai.core.errors import RowFormatError

__all__ = [
    "FunctionCall",
    "ToolCall",
    "Message",
    "ToolFunction",
    "ToolSchema",
    "GoldToolCall",
    "GoldAnswer",
    "GoldParallel",
    "GoldOneOf",
    "GoldNoCall",
    "RolloutRow",
    "SimulationData",
    "prompt_hash",
    "prompt_messages",
    "task_key",
    "row_problems",
    "tools_problems",
    "check_rows",
    "read_rows",
]

ROLES = ("system", "user", "assistant", "tool")

# ---------------------------------------------------------------------------
# The schema (documentation, and pydantic's verdict on demand)
# ---------------------------------------------------------------------------

_STRICT_OPEN = ConfigDict(strict=True, extra="allow")


class FunctionCall(BaseModel):
    """The function an assistant turn calls."""

    model_config = _STRICT_OPEN
    name: str = Field(min_length=1, description="the tool's name, as in the row's tools")
    arguments: str | dict[str, Any] = Field(
        description="a JSON object as a string (OpenAI wire) or as a dict (TRL, chat templates)"
    )


class ToolCall(BaseModel):
    """One tool call on an assistant turn."""

    model_config = _STRICT_OPEN
    id: str | None = Field(None, description="matched by the tool message's tool_call_id")
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    """One turn of the conversation."""

    model_config = _STRICT_OPEN
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = Field(None, description="text; null on an assistant turn that only calls tools")
    tool_calls: list[ToolCall] | None = Field(None, description="assistant turns only")
    tool_call_id: str | None = Field(None, description="tool turns: the call this output answers")
    name: str | None = None
    weight: int | None = Field(
        None, ge=0, le=1, description="assistant turns: 0 keeps the turn out of the loss (OpenAI fine-tuning's field)"
    )

    @model_validator(mode="after")
    def _only_assistant_calls_tools(self) -> Message:
        if self.tool_calls is not None and self.role != "assistant":
            raise ValueError(f"a {self.role} turn has tool_calls; only assistant turns call tools")
        return self


class ToolFunction(BaseModel):
    """A function the policy may call: name, description and JSON-schema parameters."""

    model_config = _STRICT_OPEN
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolSchema(BaseModel):
    """One entry of ``tools`` (the OpenAI chat-completions tool format)."""

    model_config = _STRICT_OPEN
    type: Literal["function"] = "function"
    function: ToolFunction


class GoldToolCall(BaseModel):
    """The reference first action when it is a tool call, with what else a grader accepts.

    Without ``values``, ``optional`` and ``match`` it is today's exact gold.
    ``values`` lists the acceptable values of an argument (the reference's own
    value is acceptable only when listed); ``optional`` names arguments the
    reply may leave out; ``match`` is the comparison rule that travels with it.
    """

    model_config = _STRICT_OPEN
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    values: dict[str, list[Any]] | None = Field(None, description="per argument, every acceptable value")
    optional: list[str] | None = Field(None, description="arguments the reply may leave out")
    match: Literal["exact", "bfcl"] | None = Field(None, description="the rule: exact (default) or bfcl")


class GoldParallel(BaseModel):
    """Several calls in one turn: every one required, in any order (the reply makes exactly these many)."""

    model_config = _STRICT_OPEN
    parallel: list[GoldToolCall] = Field(min_length=1)
    match: Literal["exact", "bfcl"] | None = None


class GoldOneOf(BaseModel):
    """Several acceptable answers: the reply passes when it satisfies any one of them."""

    model_config = _STRICT_OPEN
    one_of: list[GoldToolCall | GoldParallel] = Field(min_length=1)
    match: Literal["exact", "bfcl"] | None = None


class GoldNoCall(BaseModel):
    """No tool call is the right first action (a question none of the offered functions answers); any text passes."""

    model_config = ConfigDict(strict=True, extra="forbid")
    no_call: Literal[True]
    match: Literal["exact", "bfcl"] | None = None


class GoldAnswer(BaseModel):
    """The reference first action when it is a final answer."""

    model_config = _STRICT_OPEN
    answer: str


class RolloutRow(BaseModel):
    """One rollout: the conversation and what the simulation knew about it.

    Only ``messages`` is required. ``privileged`` (what the simulator knew and
    the policy must never see) is removed by ``SimulationData.rows()``/``save()``
    and by every exporter. Fields not listed here are kept as they are.
    """

    model_config = _STRICT_OPEN
    messages: list[Message] = Field(min_length=1)
    tools: list[ToolSchema] | None = Field(None, description="the function schemas the policy was offered")
    reward: float | None = None
    passed: bool | None = None
    gold: GoldToolCall | GoldAnswer | GoldParallel | GoldOneOf | GoldNoCall | None = Field(
        None, description="the reference first action (docs/rows.md: values, optional, parallel, one_of, no_call, "
                          "match)")
    markers: dict[str, Any] | None = Field(None, description="named values the simulation recorded")
    task_id: str | int | None = Field(None, description="rows sharing a task key form a group (GRPO's k)")
    prompt_hash: str | None = Field(None, description="prompt_hash(messages) when the simulator stored it")
    rollout_index: int | None = Field(None, ge=0, description="which rollout of its group")
    sampling: dict[str, Any] | None = Field(None, description="sampling settings, e.g. temperature")
    privileged: str | dict[str, str] | None = Field(None, description="never reaches a training file")


# ---------------------------------------------------------------------------
# The fast check (same verdict as the models, plain dict tests)
# ---------------------------------------------------------------------------

_NUMBER = (int, float)


def row_problems(row: Any, _known_tools: list | None = None) -> list[str]:
    """What is wrong with one row, as short sentences naming the field; empty when it follows the contract."""
    if type(row) is not dict:
        if not isinstance(row, dict):
            return [f"a row must be a JSON object (dict), got {type(row).__name__}"]
    messages = row.get("messages")
    if type(messages) is not list or not messages:
        if not isinstance(messages, list):
            got = "missing" if "messages" not in row else f"a {type(messages).__name__}"
            return [f"messages must be a non-empty list of messages; it is {got}"]
        if not messages:
            return ["messages is empty; a row needs at least one message"]
    problems: list[str] = []
    for i, message in enumerate(messages):
        if type(message) is not dict:
            problems.append(f"messages[{i}] must be an object with role and content, got {type(message).__name__}")
            continue
        role = message.get("role")
        content = message.get("content")
        if (content is None or type(content) is str) and role in ROLES:
            size = len(message)  # fast paths: a plain turn, a tool turn answering a call, a turn that calls tools
            if size == 2 and "content" in message:
                continue
            if size == 3 and "content" in message:
                if role == "tool" and type(message.get("tool_call_id")) is str:
                    continue
                if role == "assistant" and type(calls := message.get("tool_calls")) is list:
                    for call in calls:
                        if _call_problem(call):
                            break  # the full check below words it
                    else:
                        continue
        if role not in ROLES:
            problems.append(f"messages[{i}].role is {role!r}; accepted: {', '.join(ROLES)}")
        if content is not None and type(content) is not str:
            problems.append(f"messages[{i}].content must be a string or null, got {type(content).__name__}")
        calls = message.get("tool_calls")
        if calls is not None:
            if role != "assistant":
                problems.append(f"messages[{i}] is a {role} turn with tool_calls; only assistant turns call tools")
            if type(calls) is not list:
                problems.append(f"messages[{i}].tool_calls must be a list, got {type(calls).__name__}")
            else:
                for j, call in enumerate(calls):
                    problem = _call_problem(call)
                    if problem:
                        problems.append(f"messages[{i}].tool_calls[{j}]{problem}")
        for key in ("tool_call_id", "name"):
            value = message.get(key)
            if value is not None and type(value) is not str:
                problems.append(f"messages[{i}].{key} must be a string, got {type(value).__name__}")
        weight = message.get("weight")
        if weight is not None and (type(weight) is not int or weight not in (0, 1)):
            problems.append(f"messages[{i}].weight is {weight!r}; accepted: 0 or 1")
    if len(row) > 1:
        _optional_problems(row, problems, _known_tools)
    return problems


def _call_problem(call: Any) -> str | None:
    if type(call) is not dict:
        return f" must be an object, got {type(call).__name__}"
    function = call.get("function")
    if type(function) is not dict:
        return ".function must be an object with name and arguments"
    name = function.get("name")
    if type(name) is not str or not name:
        return f".function.name must be a non-empty string, got {name!r}"
    if "arguments" not in function:
        return ".function.arguments is missing; give a JSON object as a string or a dict ({} when there are none)"
    arguments = function["arguments"]
    if type(arguments) is not str and type(arguments) is not dict:
        return f".function.arguments must be a JSON string or a dict, got {type(arguments).__name__}"
    kind = call.get("type", "function")
    if kind != "function":
        return f".type is {kind!r}; accepted: 'function'"
    call_id = call.get("id")
    if call_id is not None and type(call_id) is not str:
        return f".id must be a string, got {type(call_id).__name__}"
    return None


def _optional_problems(row: dict, problems: list[str], known_tools: list | None) -> None:
    tools = row.get("tools")
    if tools is not None:
        # rows of one simulation share their tools: an equal list already checked needs no second look
        if not (known_tools and tools == known_tools[0]):
            found = tools_problems(tools)
            if found:
                problems.extend(found)
            elif known_tools is not None:
                known_tools[:] = [tools]
    reward = row.get("reward")
    if reward is not None and (type(reward) not in _NUMBER):
        problems.append(f"reward must be a number, got {type(reward).__name__}")
    passed = row.get("passed")
    if passed is not None and type(passed) is not bool:
        problems.append(f"passed must be true or false, got {passed!r}")
    gold = row.get("gold")
    if gold is not None:
        problem = _gold_problem(gold)
        if problem:
            problems.append(problem)
    for key in ("markers", "sampling"):
        value = row.get(key)
        if value is not None and type(value) is not dict:
            problems.append(f"{key} must be an object of named values, got {type(value).__name__}")
    task_id = row.get("task_id")
    if task_id is not None and type(task_id) is not str and type(task_id) is not int:
        problems.append(f"task_id must be a string (or an integer), got {type(task_id).__name__}")
    hashed = row.get("prompt_hash")
    if hashed is not None and type(hashed) is not str:
        problems.append(f"prompt_hash must be a string, got {type(hashed).__name__}")
    index = row.get("rollout_index")
    if index is not None and (type(index) is not int or index < 0):
        problems.append(f"rollout_index must be a non-negative integer, got {index!r}")
    privileged = row.get("privileged")
    if privileged is not None and type(privileged) is not str:
        if type(privileged) is not dict or any(type(v) is not str or type(k) is not str for k, v in privileged.items()):
            problems.append("privileged must be a string or a mapping of strings to strings")


def tools_problems(tools: Any) -> list[str]:
    """What is wrong with a ``tools`` list (OpenAI function schemas); empty when nothing is."""
    if type(tools) is not list:
        return [f"tools must be a list of function schemas, got {type(tools).__name__}"]
    problems = []
    for k, tool in enumerate(tools):
        function = tool.get("function") if type(tool) is dict else None
        if type(function) is not dict or type(function.get("name")) is not str or not function["name"]:
            problems.append(f"tools[{k}] must be {{'type': 'function', 'function': {{'name': ..., ...}}}}")
        elif tool.get("type", "function") != "function":
            problems.append(f"tools[{k}].type is {tool.get('type')!r}; accepted: 'function'")
        elif function.get("description") is not None and type(function["description"]) is not str:
            problems.append(f"tools[{k}].function.description must be a string")
        elif function.get("parameters") is not None and type(function["parameters"]) is not dict:
            problems.append(f"tools[{k}].function.parameters must be a JSON-schema object")
    return problems


def _gold_problem(gold: Any) -> str | None:
    if type(gold) is not dict:
        return f"gold must be {{'name', 'arguments'}} or {{'answer'}}, got {type(gold).__name__}"
    if type(gold.get("answer")) is str:
        return None
    if ("parallel" in gold or "one_of" in gold or "values" in gold or "optional" in gold or "match" in gold
            or "no_call" in gold):
        from whileai.domain.rows.gold import gold_problem

        return gold_problem(gold)
    name = gold.get("name")
    if type(name) is str and name:
        arguments = gold.get("arguments", {})
        if type(arguments) is dict or type(arguments) is str:
            return None
        return f"gold.arguments must be a dict or a JSON string, got {type(arguments).__name__}"
    if "name" in gold:
        return f"gold.name must be a non-empty string, got {name!r}"
    return ("gold must be {'name': str, 'arguments': {...}} for a tool call, {'answer': str} for a final answer, "
            "{'parallel': [calls]}, {'one_of': [answers]} or {'no_call': true} (docs/rows.md)")


def check_rows(
    rows: Iterable[Any], *, path: str | os.PathLike | None = None, lines: list[int] | None = None
) -> None:
    """Raise ``RowFormatError`` listing every row that breaks the contract (row index, file line when known)."""
    problems: list[jsonl.RowProblem] = []
    known_tools: list = []
    for index, row in enumerate(rows):
        found = row_problems(row, known_tools)
        if found:
            line = lines[index] if lines is not None else None
            for detail in found:
                problems.append({"row": index, "line": line, "path": str(path) if path else None, "detail": detail})
    if not problems:
        return
    fix = "each row needs messages (role + content, tool_calls on assistant turns); see docs/rows.md"
    if path is not None:
        raise jsonl.file_error(path, problems, fix)
    from whileai.domain.defaults import EXPORT_PROBLEMS_IN_MESSAGE

    shown = [f"  row {p['row']}: {p['detail']}" for p in problems[:EXPORT_PROBLEMS_IN_MESSAGE]]
    if len(problems) > len(shown):
        shown.append(f"  ... and {len(problems) - len(shown)} more (see .problems)")
    rows_bad = len({p["row"] for p in problems})
    raise RowFormatError(f"{rows_bad} row(s) do not follow the rollout-row contract; {fix}:\n" + "\n".join(shown), problems)


def read_rows(path: str | os.PathLike) -> tuple[list[dict], list[int]]:
    """Rows of a JSONL file and their line numbers; any bad line raises ``RowFormatError`` naming it."""
    rows, lines = jsonl.read_jsonl(path, what="rollout row")
    check_rows(rows, path=path, lines=lines)
    return rows, lines


# ---------------------------------------------------------------------------
# Rows in, scrubbed rows out
# ---------------------------------------------------------------------------


def as_row(item: Any) -> Any:
    """A trajectory as a row dict: dicts pass, a RolloutRow is dumped, a bare message list is wrapped."""
    if isinstance(item, dict):
        return item
    if isinstance(item, BaseModel):
        return item.model_dump(exclude_unset=True)
    if isinstance(item, list):
        return {"messages": item}
    return item  # row_problems names it


def with_profile(row: dict, system_prompt: str | None, tools: list | None) -> dict:
    """A shallow copy of the row with the profile filled in where the row lacks it, and no privileged block.

    The row's own system message and tools win: they record what the policy was
    actually shown. An empty ``system_prompt`` or ``tools=[]`` adds nothing.
    """
    out = dict(row)
    out.pop("privileged", None)
    messages = out["messages"]
    if system_prompt and messages[0].get("role") != "system":
        out["messages"] = [{"role": "system", "content": system_prompt}, *messages]
    if tools and not out.get("tools"):
        out["tools"] = list(tools)
    return out


class SimulationData:
    """A profile (system prompt, tools, name) and the trajectories simulated under it.

    ``trajectories`` keep everything the simulation recorded, ``privileged``
    included, so the export's leak check can read it; ``rows()`` and ``save()``
    give the scrubbed rows with the profile on each.

        data = SimulationData(rows, system_prompt="You are a weather agent.", tools=tools, name="weather")
        data.save("weather.jsonl")
        data = SimulationData.load("weather.jsonl")
    """

    def __init__(
        self,
        trajectories: Iterable[Any],
        system_prompt: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        name: str | None = None,
    ):
        if isinstance(trajectories, (str, bytes, os.PathLike)):
            raise TypeError(
                f"trajectories must be rows (a list of dicts), got the path {str(trajectories)!r}; "
                "use SimulationData.load(path) to read a JSONL file"
            )
        self.trajectories: list[dict[str, Any]] = [as_row(item) for item in trajectories]
        check_rows(self.trajectories)
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(f"system_prompt must be a string, got {type(system_prompt).__name__}")
        if tools is not None:
            problems = tools_problems(tools)
            if problems:
                raise RowFormatError(
                    f"the profile's {problems[0]}; pass OpenAI function schemas "
                    "([{'type': 'function', 'function': {'name', 'description', 'parameters'}}])",
                    [{"row": None, "line": None, "path": None, "detail": p} for p in problems],
                )
        self.system_prompt = system_prompt
        self.tools = list(tools) if tools is not None else None
        self.name = name
        #: the file this data was loaded from (exports never write over it)
        self.path: Path | None = None

    def __len__(self) -> int:
        return len(self.trajectories)

    def __repr__(self) -> str:
        name = f"{self.name!r}, " if self.name else ""
        return f"SimulationData({name}{len(self)} trajectories, tools={len(self.tools or [])})"

    def rows(self) -> list[dict[str, Any]]:
        """The trajectories as rows: no privileged block, the profile's system prompt and tools on each."""
        return [with_profile(row, self.system_prompt, self.tools) for row in self.trajectories]

    def grade(self, judge: Any, threshold: float | None = None) -> Any:
        """Score every row with ``judge``: a ``ScoredData`` (see ``wai.evaluate``).

            scored = data.grade(judge=wai.first_action_judge)
            scored.pass_rate, scored.passes()
        """
        from whileai.domain.judges.scoring import score_rows

        return score_rows(self.rows(), judge, threshold)

    def save(self, path: str | os.PathLike) -> Path:
        """Write ``rows()`` as JSONL (atomically); returns the path."""
        path = Path(path)
        with jsonl.gc_paused():
            jsonl.write_jsonl(path, self.rows())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, name: str | None = None) -> SimulationData:
        """Read rows from a JSONL file; a bad line raises ``RowFormatError`` naming the file and line.

        When every row opens with the same system message, or carries the same
        tools, that becomes the profile; ``name`` defaults to the file's stem.
        """
        with jsonl.gc_paused():
            rows, _ = read_rows(path)
        systems = {r["messages"][0].get("content") if r["messages"][0].get("role") == "system" else None for r in rows}
        system_prompt = systems.pop() if len(systems) == 1 else None
        tools = rows[0].get("tools") if rows and all(r.get("tools") == rows[0].get("tools") for r in rows) else None
        data = cls(rows, system_prompt=system_prompt, tools=tools, name=name or Path(path).name.removesuffix(".jsonl"))
        data.path = Path(path)
        return data
