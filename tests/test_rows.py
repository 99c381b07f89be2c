"""The rollout-row contract: the schema, the fast check that agrees with it, task keys, SimulationData."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from whileai.domain.rows import rollouts as R
from whileai.core.errors import RowFormatError

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def tool_row(i: int = 0, **extra) -> dict:
    row = {
        "messages": [
            {"role": "user", "content": f"Weather in Paris? #{i}"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_0", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": '{"temp": 18}'},
            {"role": "assistant", "content": "It is 18 °C in Paris."},
        ],
        "reward": 1.0,
        "passed": True,
        "gold": {"name": "get_weather", "arguments": {"city": "Paris"}},
        "task_id": f"weather-{i}",
        "rollout_index": 0,
        "privileged": "the hidden answer is 18",
    }
    row.update(extra)
    return row


# ---------------------------------------------------------------------------
# the schema and the fast check
# ---------------------------------------------------------------------------


def test_documented_example_row_is_valid():
    row = tool_row(tools=TOOLS, markers={"proxy_reward": 0.9}, sampling={"temperature": 0.7}, prompt_hash="3f2a")
    assert R.row_problems(row) == []
    model = R.RolloutRow.model_validate(row)
    assert model.messages[1].tool_calls[0].function.arguments == '{"city": "Paris"}'
    assert model.gold.name == "get_weather"


def test_arguments_may_be_a_dict_and_privileged_a_mapping():
    row = tool_row(privileged={"answer": "18", "note": "the grader knows"})
    row["messages"][1]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris"}
    assert R.row_problems(row) == []
    R.RolloutRow.model_validate(row)


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda r: r.pop("messages"), "messages must be a non-empty list"),
        (lambda r: r.update(messages=[]), "messages is empty"),
        (lambda r: r["messages"][0].update(role="robot"), "messages[0].role is 'robot'"),
        (lambda r: r["messages"][0].update(content=["a"]), "messages[0].content must be a string"),
        (lambda r: r["messages"][2].update(tool_calls=[]), "only assistant turns call tools"),
        (lambda r: r["messages"][1]["tool_calls"][0]["function"].pop("arguments"), "arguments is missing"),
        (lambda r: r["messages"][1]["tool_calls"][0]["function"].update(arguments=3), "JSON string or a dict"),
        (lambda r: r["messages"][1]["tool_calls"][0]["function"].update(name=""), "name must be a non-empty"),
        (lambda r: r.update(reward="high"), "reward must be a number"),
        (lambda r: r.update(passed=1), "passed must be true or false"),
        (lambda r: r.update(gold={"city": "Paris"}), "gold must be"),
        (lambda r: r.update(rollout_index=-1), "rollout_index must be a non-negative integer"),
        (lambda r: r.update(privileged={"a": 1}), "privileged must be a string or a mapping"),
        (lambda r: r.update(tools=[{"name": "x"}]), "tools[0] must be"),
        (lambda r: r["messages"][3].update(weight=2), "weight is 2"),
    ],
)
def test_fast_check_names_the_field(mutate, needle):
    row = tool_row()
    mutate(row)
    problems = R.row_problems(row)
    assert problems and needle in " | ".join(problems)
    with pytest.raises(ValidationError):
        R.RolloutRow.model_validate(row)


_text = st.text(max_size=12)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), _text)
_value = st.one_of(_scalar, st.lists(_scalar, max_size=2), st.dictionaries(_text, _scalar, max_size=2))
_role = st.sampled_from(["system", "user", "assistant", "tool", "robot", None, 3])
_arguments = st.one_of(_text, st.dictionaries(_text, _scalar, max_size=2), st.integers(), st.none())
_call = st.one_of(
    st.fixed_dictionaries(
        {"function": st.fixed_dictionaries({"name": st.one_of(_text, st.none()), "arguments": _arguments})},
        optional={"id": st.one_of(_text, st.integers()), "type": st.sampled_from(["function", "other"])},
    ),
    _scalar,
)
_message = st.one_of(
    st.fixed_dictionaries(
        {"role": _role},
        optional={
            "content": st.one_of(_text, st.none(), st.integers()),
            "tool_calls": st.one_of(st.lists(_call, max_size=2), st.none(), _text),
            "tool_call_id": st.one_of(_text, st.integers()),
            "weight": st.one_of(st.sampled_from([0, 1, 2]), st.booleans()),
        },
    ),
    _scalar,
)
_row = st.fixed_dictionaries(
    {"messages": st.one_of(st.lists(_message, max_size=4), _scalar)},
    optional={
        "reward": st.one_of(st.floats(allow_nan=False), st.integers(), st.booleans(), _text),
        "passed": st.one_of(st.booleans(), st.integers(0, 1)),
        "gold": st.one_of(
            st.fixed_dictionaries({"name": _text}, optional={"arguments": _arguments}),
            st.fixed_dictionaries({"answer": st.one_of(_text, st.integers())}),
            _scalar,
        ),
        "task_id": st.one_of(_text, st.integers(), st.floats()),
        "rollout_index": st.one_of(st.integers(-2, 3), st.booleans()),
        "privileged": st.one_of(_text, st.dictionaries(_text, st.one_of(_text, st.integers()), max_size=2)),
        "markers": st.one_of(st.dictionaries(_text, _value, max_size=2), _text),
        "tools": st.one_of(st.just(TOOLS), st.lists(_value, max_size=1)),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_row)
def test_fast_check_agrees_with_the_pydantic_schema(row):
    try:
        R.RolloutRow.model_validate(row)
        schema_ok = True
    except ValidationError:
        schema_ok = False
    assert (R.row_problems(row) == []) == schema_ok, (R.row_problems(row), row)


# ---------------------------------------------------------------------------
# task keys
# ---------------------------------------------------------------------------


def test_prompt_hash_reads_only_the_prompt_and_is_stable():
    row = tool_row()
    h = R.prompt_hash(row["messages"])
    assert len(h) == 16 and int(h, 16) >= 0
    assert R.prompt_hash(row["messages"][:1]) == h  # the replies do not change it
    assert R.prompt_hash([{"role": "user", "content": "Weather in Paris? #0", "name": None}]) == h
    assert R.prompt_hash([{"role": "user", "content": "Weather in Lima?"}]) != h


def test_task_key_prefers_task_id_then_stored_hash_then_computed():
    row = tool_row()
    assert R.task_key(row) == "weather-0"
    row.pop("task_id")
    assert R.task_key(row) == R.prompt_hash(row["messages"])
    row["prompt_hash"] = "abc"
    assert R.task_key(row) == "abc"
    assert R.task_key({"task_id": 7, "messages": []}) == "7"


# ---------------------------------------------------------------------------
# SimulationData
# ---------------------------------------------------------------------------


def test_rows_are_scrubbed_and_carry_the_profile():
    data = R.SimulationData([tool_row(0), tool_row(1)], system_prompt="You are a weather agent.", tools=TOOLS, name="w")
    out = data.rows()
    assert all("privileged" not in r for r in out)
    assert all(r["messages"][0] == {"role": "system", "content": "You are a weather agent."} for r in out)
    assert all(r["tools"] == TOOLS for r in out)
    # the trajectories keep what the simulation knew, for the leak check
    assert all("privileged" in t for t in data.trajectories)
    assert data.trajectories[0]["messages"][0]["role"] == "user"


def test_a_row_keeps_its_own_system_message_and_tools():
    own = tool_row()
    own["messages"].insert(0, {"role": "system", "content": "per-task rules"})
    own["tools"] = [{"type": "function", "function": {"name": "other"}}]
    row = R.SimulationData([own], system_prompt="profile rules", tools=TOOLS).rows()[0]
    assert row["messages"][0]["content"] == "per-task rules"
    assert row["tools"][0]["function"]["name"] == "other"


def test_trajectories_may_be_message_lists_or_models():
    model = R.RolloutRow.model_validate(tool_row())
    data = R.SimulationData([tool_row()["messages"], model])
    assert data.trajectories[0] == {"messages": tool_row()["messages"]}
    assert data.trajectories[1]["privileged"] == "the hidden answer is 18"


def test_save_and_load_round_trip(tmp_path):
    data = R.SimulationData([tool_row(0), tool_row(1)], system_prompt="Rules.", tools=TOOLS, name="weather")
    path = data.save(tmp_path / "weather.jsonl")
    text = path.read_text()
    assert "privileged" not in text and "hidden answer" not in text
    again = R.SimulationData.load(path)
    assert again.rows() == data.rows()
    assert again.system_prompt == "Rules." and again.tools == TOOLS and again.name == "weather"
    assert again.path == path
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_bad_trajectories_are_named_by_index():
    with pytest.raises(RowFormatError) as err:
        R.SimulationData([tool_row(), {"messages": [{"role": "robot", "content": "x"}]}, "text"])
    message = str(err.value)
    assert "row 1: messages[0].role is 'robot'" in message
    assert "row 2: a row must be a JSON object" in message
    assert {p["row"] for p in err.value.problems} == {1, 2}


def test_a_path_is_not_trajectories(tmp_path):
    with pytest.raises(TypeError, match="SimulationData.load"):
        R.SimulationData(str(tmp_path / "x.jsonl"))


def test_invalid_jsonl_names_file_line_and_problem(tmp_path):
    path = tmp_path / "broken.jsonl"
    good = json.dumps(tool_row())
    path.write_text("\n".join([good, "", '{"messages": [', "[1, 2]", good, json.dumps({"messages": "hi"})]) + "\n")
    with pytest.raises(RowFormatError) as err:
        R.SimulationData.load(path)
    message = str(err.value)
    assert str(path) in message
    assert "line 3: not valid JSON" in message
    assert "line 4: a JSON array, but each line must be one JSON object" in message
    assert [p["line"] for p in err.value.problems] == [3, 4]


def test_rows_breaking_the_contract_in_a_file_name_their_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    bad = tool_row()
    bad["messages"][1]["tool_calls"][0]["function"]["arguments"] = 5
    path.write_text("\n".join(json.dumps(r) for r in [tool_row(), tool_row(), bad]) + "\n")
    with pytest.raises(RowFormatError) as err:
        R.read_rows(path)
    assert "line 3: messages[1].tool_calls[0].function.arguments must be a JSON string or a dict" in str(err.value)
    assert err.value.problems[0]["path"] == str(path)


def test_non_utf8_line_is_named(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(json.dumps(tool_row()).encode() + b"\n" + b'{"messages": "caf\xe9"}\n')
    with pytest.raises(RowFormatError, match="line 2"):
        R.read_rows(path)


def test_missing_file_says_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="JSONL file"):
        R.SimulationData.load(tmp_path / "nope.jsonl")


def test_the_docs_example_runs(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "rows.md").read_text()
    (code,) = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/rows.md", "exec"), {})
    assert capsys.readouterr().out.split() == ["1", "dict", "ran"]
    assert "hidden forecast" not in (tmp_path / "weather.jsonl").read_text()


def test_profile_tools_are_checked():
    with pytest.raises(RowFormatError, match="the profile's tools\\[0\\] must be"):
        R.SimulationData([tool_row()], tools=[{"name": "get_weather"}])
    with pytest.raises(TypeError, match="system_prompt must be a string"):
        R.SimulationData([tool_row()], system_prompt=["rules"])
