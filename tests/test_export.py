"""Export: training rows, masks, unrolling, caps, files that never overwrite their source, the gate, both formats."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.domain.rows import jsonl
from whileai.domain.rows import rollouts as rows_module
from whileai.domain.export import MissingPolicyWarning, to_hf_dataset

SYSTEM = "You are a weather agent. Use the tools."
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "convert", "parameters": {
        "type": "object", "properties": {"value": {"type": "number"}}}}},
]


def call(name: str, arguments, call_id: str = "call_0") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def multi_turn(i: int = 0, **extra) -> dict:
    """system-less 3-turn tool-use rollout: two tool calls, then the answer."""
    row = {
        "messages": [
            {"role": "user", "content": f"Weather in Paris, in fahrenheit? #{i}"},
            {"role": "assistant", "content": "<think>need the weather</think>I will look it up.",
             "tool_calls": [call("get_weather", '{"city": "Paris", "unit": "celsius"}')]},
            {"role": "tool", "tool_call_id": "call_0", "content": '{"temp": 18, "note": "' + "x" * 60 + '"}'},
            {"role": "assistant", "content": None, "tool_calls": [call("convert", {"value": 18}, "call_1")]},
            {"role": "tool", "tool_call_id": "call_1", "content": "64.4"},
            {"role": "assistant", "content": "It is 64.4 °F in Paris.", "reasoning_content": "easy"},
        ],
        "reward": 1.0,
        "passed": True,
        "task_id": f"weather-{i // 2}",
        "rollout_index": i % 2,
        "sampling": {"temperature": 0.7},
        "privileged": "the forecast service says 18 degrees celsius",
    }
    row.update(extra)
    return row


@pytest.fixture
def data() -> wai.SimulationData:
    return wai.SimulationData([multi_turn(i) for i in range(4)], system_prompt=SYSTEM, tools=TOOLS, name="weather")


def read(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def arguments_of(row: dict, key: str = "messages") -> list:
    return [c["function"]["arguments"] for m in row[key] for c in m.get("tool_calls") or []]


# ---------------------------------------------------------------------------
# training_rows and loss_mask
# ---------------------------------------------------------------------------


def test_training_rows_carry_the_profile_and_drop_the_privileged_block(data):
    rows = wai.training_rows(data)
    assert len(rows) == 4
    row = rows[0]
    assert row["messages"][0] == {"role": "system", "content": SYSTEM}
    assert row["tools"] == TOOLS
    assert row["prompt"] == "Weather in Paris, in fahrenheit? #0"
    assert "privileged" not in row
    assert row["task_id"] == "weather-0" and row["reward"] == 1.0 and row["sampling"] == {"temperature": 0.7}
    assert arguments_of(row) == ['{"city": "Paris", "unit": "celsius"}', '{"value":18}']  # wire: JSON strings
    assert [m.get("weight") for m in row["messages"]] == [None, None, 1, None, 1, None, 1]
    # the caller's trajectories are untouched
    assert data.trajectories[0]["messages"][1]["content"].startswith("<think>")
    assert data.trajectories[0]["messages"][3]["tool_calls"][0]["function"]["arguments"] == {"value": 18}


def test_loss_mask_modes():
    row = multi_turn()
    row["messages"].insert(0, {"role": "system", "content": SYSTEM})
    assert wai.loss_mask(row) == [0, 0, 1, 0, 1, 0, 1]
    assert wai.loss_mask(row, mask_mode="final") == [0, 0, 0, 0, 0, 0, 1]
    assert wai.loss_mask(row["messages"], mask_mode=None) == [0, 0, 1, 0, 1, 0, 1]
    row["messages"][2]["weight"] = 0  # OpenAI's weight: this turn is not trained
    assert wai.loss_mask(row) == [0, 0, 0, 0, 1, 0, 1]
    with pytest.raises(ValueError, match="mask_mode='last'.*accepted: 'assistant'.*'final'"):
        wai.loss_mask(row, mask_mode="last")


def test_final_mask_weights_only_the_last_turn(data):
    row = wai.training_rows(data, mask_mode="final")[0]
    assert [m.get("weight") for m in row["messages"] if m["role"] == "assistant"] == [0, 0, 1]


def test_strip_think(data):
    row = wai.training_rows(data)[0]
    assert row["messages"][2]["content"] == "I will look it up."
    assert "reasoning_content" not in row["messages"][6]
    kept = wai.training_rows(data, strip_think=False)[0]
    assert kept["messages"][2]["content"].startswith("<think>need the weather</think>")
    assert kept["messages"][6]["reasoning_content"] == "easy"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>a\nb</think>\n\nAnswer.", "Answer."),
        ("still thinking</think> Answer.", "Answer."),  # the template opened <think> in the prompt
        ("Answer.<think>cut off mid-thou", "Answer."),
        ("<think>one</think>A<think>two</think>B", "AB"),
        ("no tags", "no tags"),
    ],
)
def test_strip_think_text(text, expected):
    from whileai.domain.export._shape import strip_think_text

    assert strip_think_text(text) == expected


def test_unroll_makes_one_sample_per_assistant_turn(data):
    source = data.trajectories[1]
    rows = wai.training_rows(data, unroll=True, mask_mode="final")  # mask_mode is ignored when unrolling
    assert len(rows) == 12
    samples = rows[3:6]
    for k, sample in enumerate(samples, 1):
        assistant = [m for m in sample["messages"] if m["role"] == "assistant"]
        assert len(assistant) == k and sample["messages"][-1]["role"] == "assistant"
        assert [m["weight"] for m in assistant] == [0] * (k - 1) + [1]
        assert sample["unroll"] == {"turn": k, "turns": 3}
        assert sample["lineage"] == {"unrolled_from": {"prompt_hash": rows_module.prompt_hash(source["messages"]),
                                                       "rollout_index": 1}}
        for group_field in ("task_id", "prompt_hash", "rollout_index"):
            assert group_field not in sample
    # samples are independent objects
    samples[0]["messages"][1]["content"] = "changed"
    assert samples[1]["messages"][1]["content"] != "changed"


def test_unroll_without_rollout_index_uses_the_row_position():
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}] * 2
    out = wai.training_rows(rows, system_prompt="", tools=[], unroll=True)
    assert [r["lineage"]["unrolled_from"]["rollout_index"] for r in out] == [0, 1]


def test_tool_output_cap_is_explicit_and_counted(data):
    rows = wai.training_rows(data, max_tool_output_chars=20)
    tool = rows[0]["messages"][3]["content"]
    original = data.trajectories[0]["messages"][2]["content"]
    cut = len(original) - 20
    assert tool == original[:20] + f"\n[... {cut} chars of tool output truncated]"
    assert rows[0]["messages"][5]["content"] == "64.4"  # short outputs are left alone
    assert rows[0]["tool_output_truncated"] == 1 and rows[0]["tool_output_chars_cut"] == cut
    assert "tool_output_truncated" not in wai.training_rows(data)[0]
    with pytest.raises(ValueError, match="max_tool_output_chars=-1"):
        wai.training_rows(data, max_tool_output_chars=-1)


def test_rows_without_an_assistant_turn_are_left_out_with_a_warning():
    rows = [multi_turn(), {"messages": [{"role": "user", "content": "hi"}]}]
    with pytest.warns(UserWarning, match="1 row\\(s\\) have no assistant turn"):
        out = wai.training_rows(rows, system_prompt=SYSTEM, tools=TOOLS)
    assert len(out) == 1


def test_missing_policy_warns_for_lists_and_paths(tmp_path):
    rows = [multi_turn(0), multi_turn(1)]
    with pytest.warns(MissingPolicyWarning, match="2 of 2 rows have no system message.*2 of 2 rows have no tools"):
        wai.training_rows(rows)
    path = tmp_path / "rows.jsonl"
    jsonl.write_jsonl(path, rows)
    with pytest.warns(MissingPolicyWarning, match="system_prompt="):
        wai.export_dataset(path, tools=TOOLS, validate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wai.training_rows(rows, system_prompt=SYSTEM, tools=TOOLS)
        wai.training_rows(wai.SimulationData(rows, system_prompt=SYSTEM, tools=TOOLS))
        wai.training_rows(rows, system_prompt="", tools=[])  # explicitly none
        saved = wai.SimulationData(rows, system_prompt=SYSTEM, tools=TOOLS).save(tmp_path / "saved.jsonl")
        wai.export_dataset(saved)  # rows that carry their own profile say nothing


def test_unknown_source_type():
    with pytest.raises(TypeError, match="SimulationData, a list of rows"):
        wai.training_rows(42)


# ---------------------------------------------------------------------------
# export_dataset: files
# ---------------------------------------------------------------------------


def test_export_dataset_is_export_training():
    assert wai.export_dataset is wai.export_training


def test_path_source_writes_name_train_jsonl_beside_it(tmp_path, data):
    source = data.save(tmp_path / "weather.jsonl")
    before = source.read_bytes()
    report = wai.export_dataset(source)
    assert report["output"] == str(tmp_path / "weather.train.jsonl")
    assert len(read(tmp_path / "weather.train.jsonl")) == 4
    assert source.read_bytes() == before
    loaded = wai.SimulationData.load(source)
    assert wai.export_dataset(loaded, validate=False)["output"] == str(tmp_path / "weather.train.jsonl")


def test_a_list_source_needs_an_output(data):
    with pytest.raises(ValueError, match="pass output="):
        wai.export_dataset(data.rows(), system_prompt=SYSTEM, tools=TOOLS)


@pytest.mark.parametrize("spelling", ["same", "relative", "dotted", "symlink", "hardlink"])
def test_never_overwrites_the_source(tmp_path, monkeypatch, data, spelling):
    source = data.save(tmp_path / "weather.jsonl")
    before = source.read_bytes()
    monkeypatch.chdir(tmp_path)
    output = {
        "same": source,
        "relative": Path("weather.jsonl"),
        "dotted": Path("sub/../weather.jsonl"),
        "symlink": tmp_path / "link.jsonl",
        "hardlink": tmp_path / "hard.jsonl",
    }[spelling]
    (tmp_path / "sub").mkdir()
    os.symlink(source, tmp_path / "link.jsonl")
    os.link(source, tmp_path / "hard.jsonl")
    for src in (source, wai.SimulationData.load(source)):
        with pytest.raises(wai.ExportValidationError, match="never overwrites its source") as err:
            wai.export_dataset(src, output)
        assert err.value.problems[0]["kind"] == "output_is_source"
    assert source.read_bytes() == before
    assert (tmp_path / "link.jsonl").is_symlink()


def test_write_is_atomic(tmp_path, monkeypatch, data):
    target = tmp_path / "train.jsonl"
    target.write_text("previous export\n")

    def crash(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(jsonl.os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        wai.export_dataset(data, target)
    assert target.read_text() == "previous export\n"
    assert sorted(os.listdir(tmp_path)) == ["train.jsonl"]  # no half file, no temp file left


def test_output_folder_must_exist(tmp_path, data):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        wai.export_dataset(data, tmp_path / "missing" / "train.jsonl")


def test_written_file_has_a_normal_mode(tmp_path, data):
    wai.export_dataset(data, tmp_path / "train.jsonl")
    assert (tmp_path / "train.jsonl").stat().st_mode & 0o777 == 0o666 & ~_current_umask()


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------------------
# export_dataset: the gate and the report
# ---------------------------------------------------------------------------


def broken_arguments_rows() -> list[dict]:
    rows = [multi_turn(i, privileged=None) for i in range(3)]
    rows[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] = '"{\\"city\\": \\"Paris\\"}"'
    rows[2]["messages"][3]["tool_calls"][0]["function"]["arguments"] = "city=Paris"
    return rows


def test_validate_refuses_and_lists_every_offending_row(tmp_path):
    target = tmp_path / "train.jsonl"
    with pytest.raises(wai.ExportValidationError) as err:
        wai.export_dataset(broken_arguments_rows(), target, system_prompt=SYSTEM, tools=TOOLS)
    assert not target.exists()
    problems = err.value.problems
    assert [(p["row"], p["kind"]) for p in problems] == [(1, "roundtrip"), (2, "roundtrip")]
    message = str(err.value)
    assert "double-encoded" in message and "not JSON" in message and "validate=False" in message
    assert "format='openai'" in message and "json_string" in message
    assert err.value.report["roundtrip"]["invalid"][0]["name"] == "get_weather"


def test_validate_false_writes_and_reports(tmp_path):
    target = tmp_path / "train.jsonl"
    report = wai.export_dataset(broken_arguments_rows(), target, system_prompt=SYSTEM, tools=TOOLS, validate=False)
    assert len(read(target)) == 3
    assert report["validated"] is False
    assert report["format"] == "openai" and report["argument_encoding"] == "json_string"
    assert report["roundtrip"]["encoding"] == "json_string" and report["roundtrip"]["calls"] == 6
    assert len(report["problems"]) == 2


def test_problems_name_file_lines(tmp_path):
    source = tmp_path / "rows.jsonl"
    jsonl.write_jsonl(source, broken_arguments_rows())
    with pytest.raises(wai.ExportValidationError) as err:
        wai.export_dataset(source, system_prompt=SYSTEM, tools=TOOLS)
    assert [p["line"] for p in err.value.problems] == [2, 3]
    assert "(line 2)" in str(err.value)


def test_leak_check_could_not_run_on_scrubbed_rows(tmp_path, data):
    report = wai.export_dataset(data.rows(), tmp_path / "a.jsonl")
    leaks = report["privileged_leaks"]
    assert leaks["status"] == "could not run" and leaks["checked"] == 0 and leaks["could_not_run"] == 4
    assert "pass the SimulationData" in leaks["note"]
    ran = wai.export_dataset(data, tmp_path / "b.jsonl")["privileged_leaks"]
    assert ran["status"] == "ran" and ran["checked"] == 4 and ran["leaks"] == []


def test_report_counts(tmp_path, data):
    report = wai.export_dataset(data, tmp_path / "t.jsonl", max_tool_output_chars=10)
    assert report["rows_in"] == 4 and report["rows_out"] == 4 and report["rows_written"] == 4
    assert report["tool_output_truncated"] == 4 and report["think_stripped"] == 8
    assert report["mask_mode"] == "assistant" and report["kind"] == "training"


# ---------------------------------------------------------------------------
# formats
# ---------------------------------------------------------------------------


def test_trl_rows_are_messages_only_with_dict_arguments(tmp_path, data):
    report = wai.export_dataset(data, tmp_path / "trl.jsonl", format="trl")
    assert report["format"] == "trl" and report["argument_encoding"] == "dict"
    assert report["roundtrip"]["encoding"] == "dict" and report["trl_shape"] == "messages"
    row = read(tmp_path / "trl.jsonl")[0]
    assert set(row) == {"messages", "tools", "prompt_text"}  # no "prompt": TRL would skip the template
    assert row["prompt_text"] == "Weather in Paris, in fahrenheit? #0"
    assert arguments_of(row) == [{"city": "Paris", "unit": "celsius"}, {"value": 18}]
    assert all("weight" not in m for m in row["messages"])


@pytest.mark.parametrize("options", [{"mask_mode": "final"}, {"unroll": True}])
def test_trl_rows_train_single_turns_as_prompt_completion(tmp_path, data, options):
    report = wai.export_dataset(data, tmp_path / "trl.jsonl", format="trl", **options)
    rows = read(tmp_path / "trl.jsonl")
    assert report["trl_shape"] == "prompt_completion"
    assert len(rows) == (12 if options.get("unroll") else 4)
    for row in rows:
        assert "messages" not in row and len(row["completion"]) == 1
        assert row["completion"][0]["role"] == "assistant" and row["prompt"][-1]["role"] != "assistant"
    if options.get("unroll"):
        assert rows[2]["unroll"] == {"turn": 3, "turns": 3} and "unrolled_from" in rows[2]["lineage"]
        assert len(rows[0]["prompt"]) == 2 and len(rows[2]["prompt"]) == 6


def test_trl_keeps_one_shape_per_file_when_some_turns_have_weight_zero(tmp_path, data):
    rows = data.rows()
    rows[0]["messages"][4]["weight"] = 0  # the second assistant turn of row 0 (after system, user, call, output)
    wai.export_dataset(rows, tmp_path / "trl.jsonl", format="trl")
    out = read(tmp_path / "trl.jsonl")
    assert all("completion" in r for r in out)
    assert len(out) == 2 + 3 * 3  # row 0 trains two turns, the others three


def test_bad_format():
    with pytest.raises(ValueError, match="format='hf'.*'openai'.*'trl'"):
        wai.export_dataset([multi_turn()], "x.jsonl", format="hf")


# ---------------------------------------------------------------------------
# tool_call_roundtrip
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments, problem",
    [
        ('"{\\"city\\": \\"Paris\\"}"', "double-encoded"),
        ("city=Paris", "not JSON"),
        ('["Paris"]', "JSON array"),
        ("42", "JSON number"),
        ("null", "JSON null"),
        ('"Paris"', "JSON string literal"),
        ({"city": "Paris"}, "a dict where the OpenAI wire format needs a JSON string"),
    ],
)
def test_roundtrip_names_each_invalid_openai_call(arguments, problem):
    row = {"messages": [{"role": "user", "content": "?"},
                        {"role": "assistant", "tool_calls": [call("get_weather", arguments, "call_7")]}]}
    report = wai.tool_call_roundtrip([multi_turn(), row])
    assert report["format"] == "openai" and report["encoding"] == "json_string"
    assert not report["ok"] and report["calls"] == 3
    (bad,) = [b for b in report["invalid"] if b["row"] == 1]
    assert bad["id"] == "call_7" and bad["name"] == "get_weather" and problem in bad["problem"]
    assert (bad["message"], bad["call"], bad["field"]) == (1, 0, "messages")


def test_roundtrip_trl_wants_dicts():
    row = {"messages": [{"role": "assistant", "tool_calls": [call("f", '{"a": 1}'), call("g", {"a": 1})]}]}
    report = wai.tool_call_roundtrip([row], format="trl")
    assert report["encoding"] == "dict" and report["valid"] == 1
    assert "a JSON string where a dict belongs" in report["invalid"][0]["problem"]
    assert wai.tool_call_roundtrip(wai.to_trl([multi_turn()]), format="trl")["ok"]


def test_roundtrip_checks_every_conversation_key():
    pair = {"prompt": [{"role": "user", "content": "?"}],
            "chosen": [{"role": "assistant", "tool_calls": [call("f", {"a": 1})]}],
            "rejected": [{"role": "assistant", "tool_calls": [call("f", "[1]")]}]}
    report = wai.tool_call_roundtrip([pair], format="trl")
    assert report["calls"] == 2 and report["invalid"][0]["field"] == "rejected"


# ---------------------------------------------------------------------------
# export_preference and to_trl
# ---------------------------------------------------------------------------


def pairs() -> list[dict]:
    chosen = multi_turn(0)
    rejected = multi_turn(1)
    rejected["messages"] = rejected["messages"][:2]
    rejected["messages"][0] = chosen["messages"][0]
    tie = {"chosen": multi_turn(0), "rejected": multi_turn(0), "winner": "tie"}
    no_completion = {"chosen": multi_turn(0), "rejected": {"messages": multi_turn(0)["messages"][:1]}}
    bare = {"chosen": multi_turn(0)["messages"], "rejected": rejected["messages"]}
    return [{"chosen": chosen, "rejected": rejected, "winner": "chosen"}, tie, no_completion, bare]


def test_preference_openai_shape(tmp_path):
    report = wai.export_preference(pairs(), tmp_path / "p.jsonl", system_prompt=SYSTEM, tools=TOOLS)
    rows = read(tmp_path / "p.jsonl")
    assert len(rows) == 2 and report["pairs_out"] == 2
    assert report["ties_dropped"] == 1 and report["no_completion_dropped"] == 1
    assert report["format"] == "openai" and report["roundtrip"]["encoding"] == "json_string"
    row = rows[0]
    assert row["prompt"] == "Weather in Paris, in fahrenheit? #0"
    assert row["chosen"][0] == {"role": "system", "content": SYSTEM} and row["chosen"][1]["role"] == "user"
    assert arguments_of(row, "chosen") == ['{"city": "Paris", "unit": "celsius"}', '{"value":18}']
    assert row["tools"] == TOOLS and "privileged" not in json.dumps(rows)


def test_preference_trl_shape_and_ties_kept_on_request(tmp_path):
    report = wai.export_preference(pairs(), tmp_path / "p.jsonl", format="trl", drop_ties=False,
                                   system_prompt=SYSTEM, tools=TOOLS)
    rows = read(tmp_path / "p.jsonl")
    assert report["ties_dropped"] == 0 and len(rows) == 3 and report["argument_encoding"] == "dict"
    row = rows[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["chosen"][0]["role"] == "assistant" and row["rejected"][0]["role"] == "assistant"
    assert arguments_of(row, "chosen") == [{"city": "Paris", "unit": "celsius"}, {"value": 18}]
    assert set(row) == {"prompt", "chosen", "rejected", "tools"}


def test_preference_gate_checks_both_sides(tmp_path):
    bad = pairs()[0]
    bad["rejected"]["messages"][1]["tool_calls"][0]["function"]["arguments"] = "[1, 2]"
    with pytest.raises(wai.ExportValidationError, match="rejected\\[2\\].tool_calls\\[0\\]") as err:
        wai.export_preference([bad], tmp_path / "p.jsonl", system_prompt=SYSTEM, tools=TOOLS)
    assert err.value.problems[0]["kind"] == "roundtrip"
    assert not (tmp_path / "p.jsonl").exists()


def test_preference_sides_must_share_a_prompt(tmp_path):
    mismatch = {"chosen": multi_turn(0), "rejected": multi_turn(5)}
    with pytest.raises(wai.ExportValidationError, match="prompt_mismatch"):
        wai.export_preference([mismatch], tmp_path / "p.jsonl", system_prompt=SYSTEM, tools=TOOLS)
    report = wai.export_preference([mismatch, pairs()[0]], tmp_path / "p.jsonl", system_prompt=SYSTEM, tools=TOOLS,
                                   validate=False)
    assert report["prompt_mismatch_dropped"] == 1 and report["rows_written"] == 1


def test_preference_from_a_file_writes_beside_it(tmp_path):
    source = tmp_path / "pairs.jsonl"
    jsonl.write_jsonl(source, pairs())
    report = wai.export_preference(source, system_prompt=SYSTEM, tools=TOOLS)
    assert report["output"] == str(tmp_path / "pairs.preference.jsonl")
    with pytest.raises(wai.ExportValidationError, match="never overwrites"):
        wai.export_preference(source, source, system_prompt=SYSTEM, tools=TOOLS)


def test_preference_rejects_malformed_pairs():
    with pytest.raises(wai.WhileaiError, match="pair 0: a pair must be"):
        wai.export_preference([{"chosen": multi_turn()}], "p.jsonl")
    with pytest.raises(wai.WhileaiError, match="pair 0: rejected: messages\\[0\\].role"):
        wai.export_preference([{"chosen": multi_turn(), "rejected": [{"role": "bot"}]}], "p.jsonl")


@pytest.mark.filterwarnings("ignore::whileai.domain.export.MissingPolicyWarning")
def test_to_trl_matches_the_trl_exports(tmp_path, data):
    wai.export_dataset(data, tmp_path / "t.jsonl", format="trl")
    assert wai.to_trl(wai.training_rows(data)) == read(tmp_path / "t.jsonl")
    wai.export_dataset(data, tmp_path / "f.jsonl", format="trl", mask_mode="final")
    assert wai.to_trl(wai.training_rows(data, mask_mode="final")) == read(tmp_path / "f.jsonl")
    wai.export_preference(pairs(), tmp_path / "p.jsonl", format="trl", strip_think=False)
    from_pairs = wai.to_trl(pairs(), kind="preference")
    assert from_pairs == read(tmp_path / "p.jsonl")
    wai.export_preference(pairs(), tmp_path / "o.jsonl", strip_think=False)
    assert wai.to_trl(read(tmp_path / "o.jsonl"), kind="preference") == from_pairs
    assert "privileged" not in json.dumps(wai.to_trl([multi_turn()]))
    with pytest.raises(ValueError, match="kind='sft'"):
        wai.to_trl([], kind="sft")


# ---------------------------------------------------------------------------
# loaders
# ---------------------------------------------------------------------------


def mixed_argument_rows() -> list[dict]:
    first = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": None,
             "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"})]}]}
    second = {"messages": [{"role": "user", "content": "b"}, {"role": "assistant", "content": None,
              "tool_calls": [call("convert", {"value": 99})]}], "tools": TOOLS}
    return wai.to_trl([first, second])


def test_from_list_null_fills_arguments_and_to_hf_dataset_does_not():
    import datasets

    rows = mixed_argument_rows()
    naive = datasets.Dataset.from_list(rows)
    assert naive[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == {
        "city": None, "unit": None, "value": 99}  # the documented hazard
    assert "tools" not in naive.column_names  # columns come from the first row only
    ds = to_hf_dataset(rows)
    assert [ds[i] for i in range(len(ds))] == [{**r, "tools": r.get("tools")} for r in rows]
    assert ds[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"value": 99}


def test_load_dataset_json_loads_every_exported_file(tmp_path, data):
    import datasets

    files = {
        "openai": wai.export_dataset(data, tmp_path / "openai.jsonl"),
        "trl": wai.export_dataset(data, tmp_path / "trl.jsonl", format="trl"),
        "trl_final": wai.export_dataset(data, tmp_path / "final.jsonl", format="trl", mask_mode="final"),
        "unrolled": wai.export_dataset(data, tmp_path / "unroll.jsonl", unroll=True, max_tool_output_chars=30),
        "pref_openai": wai.export_preference(pairs(), tmp_path / "po.jsonl", system_prompt=SYSTEM, tools=TOOLS),
        "pref_trl": wai.export_preference(pairs(), tmp_path / "pt.jsonl", format="trl", system_prompt=SYSTEM,
                                          tools=TOOLS),
    }
    jsonl.write_jsonl(tmp_path / "mixed.jsonl", mixed_argument_rows())
    paths = [report["output"] for report in files.values()] + [str(tmp_path / "mixed.jsonl")]
    for path in paths:
        ds = datasets.load_dataset("json", data_files=path, split="train", cache_dir=str(tmp_path / "cache"))
        assert len(ds) == len(read(path)), path
        if path.endswith(("trl.jsonl", "pt.jsonl", "mixed.jsonl")):
            key = "chosen" if path.endswith("pt.jsonl") else "messages"
            assert [arguments_of(ds[i], key) for i in range(len(ds))] == [arguments_of(r, key) for r in read(path)]


def test_the_missing_policy_warning_points_at_the_caller(tmp_path):
    rows = [multi_turn(0)]
    jsonl.write_jsonl(tmp_path / "rows.jsonl", rows)
    calls = [
        lambda: wai.training_rows(rows),
        lambda: wai.export_dataset(rows, tmp_path / "t.jsonl", validate=False),
        lambda: wai.export_dataset(tmp_path / "rows.jsonl", tmp_path / "f.jsonl", validate=False),
        lambda: wai.export_preference([{"chosen": multi_turn(0), "rejected": multi_turn(0)}], tmp_path / "p.jsonl"),
    ]
    for call in calls:
        with pytest.warns(MissingPolicyWarning) as caught:
            call()
        assert [w.filename for w in caught if w.category is MissingPolicyWarning] == [__file__]


# ---------------------------------------------------------------------------
# A file source goes a chunk at a time
# ---------------------------------------------------------------------------


def chunked_rows() -> list[dict]:
    """Rows that exercise every per-row path: think blocks, dict and broken arguments, weight-0 turns, a recital."""
    rows = [multi_turn(i) for i in range(12)]
    rows[2]["messages"][3]["weight"] = 0  # a TRL file of both shapes: every row becomes prompt/completion
    rows[4]["messages"][1]["tool_calls"][0]["function"]["arguments"] = "city=Paris"
    rows[6]["messages"] = rows[6]["messages"][:1]  # no assistant turn: left out
    rows[8]["messages"][5]["content"] = "The forecast service says 18 degrees Celsius, so 64.4 °F."
    rows[9].pop("rollout_index")
    rows[11]["messages"][3]["weight"] = 0
    return rows


@pytest.mark.parametrize(
    "options",
    [
        {"format": "openai"},
        {"format": "trl"},
        {"format": "openai", "unroll": True, "max_tool_output_chars": 10},
        {"format": "trl", "mask_mode": "final", "strip_think": False},
        {"format": "openai", "system_prompt": SYSTEM, "tools": TOOLS},
    ],
)
def test_a_file_exports_the_same_in_chunks_of_any_size(tmp_path, monkeypatch, options):
    from whileai.domain import defaults

    source = tmp_path / "rows.jsonl"
    jsonl.write_jsonl(source, chunked_rows())
    target = tmp_path / "out.jsonl"
    results = []
    for chunk in (defaults.EXPORT_CHUNK_BYTES, 1, 1500):  # the whole file; one row per chunk; two rows
        monkeypatch.setattr(defaults, "EXPORT_CHUNK_BYTES", chunk)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = wai.export_dataset(source, target, validate=False, **options)
        results.append((target.read_bytes(), report, [str(w.message) for w in caught]))
        target.unlink()
    assert results[0][1]["problems"] and results[0][1]["rows_written"] > 0
    assert results[1] == results[0] and results[2] == results[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingPolicyWarning)
        listed = wai.export_dataset(chunked_rows(), target, validate=False, **options)  # the whole-file path
    assert target.read_bytes() == results[0][0]
    assert listed["rows_written"] == results[0][1]["rows_written"]
    assert sorted(os.listdir(tmp_path)) == ["out.jsonl", "rows.jsonl"]


def test_problems_in_a_later_chunk_count_rows_over_the_whole_file(tmp_path, monkeypatch):
    from whileai.domain import defaults

    monkeypatch.setattr(defaults, "EXPORT_CHUNK_BYTES", 1)  # one row per chunk
    source = tmp_path / "rows.jsonl"
    source.write_text("\n".join(json.dumps(row) for row in chunked_rows()) + "\n\n")
    report = wai.export_dataset(source, tmp_path / "out.jsonl", validate=False, system_prompt=SYSTEM, tools=TOOLS)
    assert [(p["row"], p["line"], p["kind"]) for p in report["problems"]] == [
        (4, 5, "roundtrip"), (8, 9, "privileged_leak")
    ]
    assert report["roundtrip"]["invalid"][0]["output_row"] == 4
    assert report["rows_in"] == 12 and report["rows_out"] == 11 and report["no_assistant_dropped"] == 1

    lines = source.read_text().splitlines()
    lines[3], lines[10] = "{not json", '{"messages": []}'
    source.write_text("\n".join(lines) + "\n")
    with pytest.raises(wai.RowFormatError) as err:  # every bad line of the file, not of a chunk
        wai.export_dataset(source, tmp_path / "out.jsonl")
    assert [p["line"] for p in err.value.problems] == [4]
    lines[3] = json.dumps(multi_turn(3))
    source.write_text("\n".join(lines) + "\n")
    with pytest.raises(wai.RowFormatError) as err:
        wai.export_dataset(source, tmp_path / "out.jsonl")
    assert [(p["row"], p["line"]) for p in err.value.problems] == [(10, 11)]
    with pytest.raises(wai.RowFormatError) as whole:
        rows_module.read_rows(source)
    assert str(err.value) == str(whole.value) and err.value.problems == whole.value.problems


def test_validate_failing_in_a_later_chunk_writes_nothing(tmp_path, monkeypatch):
    from whileai.domain import defaults

    monkeypatch.setattr(defaults, "EXPORT_CHUNK_BYTES", 1)
    rows = [multi_turn(i) for i in range(6)]
    rows[5]["messages"][3]["tool_calls"][0]["function"]["arguments"] = '"{\\"value\\": 18}"'
    source = tmp_path / "rows.jsonl"
    jsonl.write_jsonl(source, rows)
    target = tmp_path / "out.jsonl"
    target.write_text("the previous export\n")
    written = []
    real_write = jsonl.JsonlWriter.write

    def write(self, chunk):
        written.append([name for name in os.listdir(tmp_path) if name.endswith(".tmp")])
        real_write(self, chunk)

    monkeypatch.setattr(jsonl.JsonlWriter, "write", write)
    with pytest.raises(wai.ExportValidationError) as err:
        wai.export_dataset(source, target, system_prompt=SYSTEM, tools=TOOLS)
    assert len(written) == 6 and all(len(temps) == 1 for temps in written[:5])  # rows 0-4 went to a temp file
    assert [(p["row"], p["line"]) for p in err.value.problems] == [(5, 6)]
    assert "nothing written" in str(err.value)
    assert target.read_text() == "the previous export\n"
    assert sorted(os.listdir(tmp_path)) == ["out.jsonl", "rows.jsonl"]
