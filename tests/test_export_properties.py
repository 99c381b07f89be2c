"""Property-based export tests over generated rows.

Whatever the rows and options: export raises nothing but its documented
exceptions, tool-call arguments come back exactly (as JSON strings for openai,
as dicts for trl), and the source file is never written.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import whileai.simulations as wai
from whileai.domain.export import to_hf_dataset

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_args_dict = st.dictionaries(st.text(max_size=6), _json, max_size=4)

#: (arguments as written in the row, the dict they stand for, or None when they cannot round-trip)
_arguments = st.one_of(
    _args_dict.map(lambda d: (d, d)),
    st.tuples(_args_dict, st.sampled_from([None, 2]), st.booleans()).map(
        lambda t: (json.dumps(t[0], indent=t[1], ensure_ascii=t[2]), t[0])
    ),
    _args_dict.map(lambda d: (json.dumps(json.dumps(d)), None)),  # double-encoded
    st.sampled_from(["city=Paris", "[1, 2]", "3", "null", '"text"', "{"]).map(lambda s: (s, None)),
)
_content = st.one_of(st.none(), st.text(max_size=30), st.text(max_size=10).map(lambda t: f"<think>{t}</think>{t}"))


@st.composite
def _row(draw) -> tuple[dict, list]:
    messages: list[dict] = []
    expected: list = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(st.text(max_size=20))})
    messages.append({"role": "user", "content": draw(st.text(max_size=30))})
    for turn in range(draw(st.integers(0, 3))):
        calls = []
        for k in range(draw(st.integers(0, 2))):
            written, meant = draw(_arguments)
            calls.append({"id": f"c{turn}{k}", "type": "function",
                          "function": {"name": draw(st.sampled_from(["f", "get_weather"])), "arguments": written}})
            expected.append(meant)
        message = {"role": "assistant", "content": draw(_content)}
        if calls:
            message["tool_calls"] = calls
        messages.append(message)
        for c in calls:
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": draw(st.text(max_size=40))})
        if draw(st.booleans()):
            messages.append({"role": "user", "content": draw(st.text(max_size=10))})
    row = {"messages": messages}
    if draw(st.booleans()):
        row["privileged"] = draw(st.one_of(st.text(max_size=30), st.dictionaries(st.text(max_size=4),
                                                                                 st.text(max_size=30), max_size=2)))
    if draw(st.booleans()):
        row.update(task_id=draw(st.text(max_size=5)), rollout_index=draw(st.integers(0, 3)),
                   reward=draw(st.floats(allow_nan=False)), passed=draw(st.booleans()))
    return row, expected


def _canon(value) -> str:
    return json.dumps(value, sort_keys=True)


def _calls(rows: list[dict], encoding: str) -> set[str]:
    """Every tool call's arguments in written rows, decoded to canonical JSON (invalid ones kept as written)."""
    out = set()
    for row in rows:
        for key in ("messages", "prompt", "completion", "chosen", "rejected"):
            if not isinstance(row.get(key), list):
                continue
            for message in row[key]:
                for call in message.get("tool_calls") or []:
                    arguments = call["function"]["arguments"]
                    if encoding == "json_string":
                        assert isinstance(arguments, str)
                        try:
                            arguments = json.loads(arguments)
                        except ValueError:
                            pass
                    out.add(_canon(arguments) if isinstance(arguments, dict) else "invalid")
    return out


def _keys_named(name: str, value) -> bool:
    """Whether any mapping inside value has the key name (generated keys are at most 6 characters)."""
    if isinstance(value, dict):
        return name in value or any(_keys_named(name, v) for v in value.values())
    if isinstance(value, list):
        return any(_keys_named(name, v) for v in value)
    return False


def _expected(expected: list, validate: bool) -> set[str]:
    return {_canon(meant) for meant in expected if meant is not None} | (
        set() if validate or all(m is not None for m in expected) else {"invalid"}
    )


_options = st.fixed_dictionaries(
    {
        "format": st.sampled_from(["openai", "trl"]),
        "mask_mode": st.sampled_from(["assistant", "final"]),
        "unroll": st.booleans(),
        "strip_think": st.booleans(),
        "max_tool_output_chars": st.one_of(st.none(), st.integers(0, 20)),
        "validate": st.booleans(),
    }
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    generated=st.lists(_row(), min_size=1, max_size=4),
    options=_options,
    source_kind=st.sampled_from(["list", "data", "path"]),
    output_kind=st.sampled_from(["new", "same", "relative", "symlink", "default"]),
)
@example(  # a tool's reply that happens to say "privileged" is user text, not the dropped block
    generated=[({"messages": [{"role": "user", "content": ""},
                              {"role": "assistant", "content": None, "tool_calls": [
                                  {"id": "c10", "type": "function", "function": {"name": "f", "arguments": {}}}]},
                              {"role": "tool", "tool_call_id": "c10", "content": "privileged"}]}, [{}])],
    options={"format": "openai", "mask_mode": "assistant", "unroll": False, "strip_think": False,
             "max_tool_output_chars": None, "validate": False},
    source_kind="list", output_kind="new",
)
def test_export_dataset_properties(generated, options, source_kind, output_kind):
    rows = [row for row, _ in generated]
    expected = [meant for _, calls in generated for meant in calls]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "rollouts.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        before = path.read_bytes()
        source = {"list": rows, "data": wai.SimulationData(rows, system_prompt="rules", tools=[]),
                  "path": path}[source_kind]
        output = {"new": tmp / "out.jsonl", "same": path, "relative": Path(os.path.relpath(path)),
                  "symlink": tmp / "link.jsonl", "default": None}[output_kind]
        os.symlink(path, tmp / "link.jsonl")
        # only a path source is a file the export must protect; for the others the file is just a target
        writes_source = source_kind == "path" and output_kind != "new" and output_kind != "default"
        try:
            report = wai.export_dataset(source, output, system_prompt="" if source_kind != "data" else None,
                                        tools=[], **options)
        except wai.ExportValidationError as err:
            assert writes_source or options["validate"], err
            if not writes_source:
                kinds = {p["kind"] for p in err.problems}
                assert kinds <= {"roundtrip", "privileged_leak"}
                assert "roundtrip" in kinds or "privileged_leak" in kinds
                assert ("roundtrip" in kinds) == any(m is None for m in expected)
        except ValueError as err:  # a list with no output: the documented refusal
            assert output is None and source_kind != "path", err
        else:
            assert not writes_source
            text = Path(report["output"]).read_text()
            assert len(text.splitlines()) == report["rows_written"]  # one line per row for every splitter
            written = [json.loads(line) for line in text.split("\n") if line]
            assert len(written) == report["rows_written"]
            encoding = report["argument_encoding"]
            assert encoding == {"openai": "json_string", "trl": "dict"}[options["format"]]
            assert _calls(written, encoding) == _expected(expected, options["validate"])
            assert not _keys_named("privileged", written)  # the block is dropped; its words may still be user text
        if source_kind == "path":
            assert path.read_bytes() == before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    generated=st.lists(st.tuples(_row(), _row(), st.sampled_from([None, "chosen", "tie"])), min_size=1, max_size=3),
    fmt=st.sampled_from(["openai", "trl"]),
    drop_ties=st.booleans(),
    validate=st.booleans(),
)
def test_export_preference_properties(generated, fmt, drop_ties, validate):
    pairs, expected = [], []
    for (chosen, chosen_calls), (rejected, rejected_calls), winner in generated:
        rejected["messages"] = chosen["messages"][:1] + [m for m in rejected["messages"] if m["role"] != "system"]
        rejected["messages"][:1] = chosen["messages"][:1]
        pair = {"chosen": chosen, "rejected": rejected}
        if winner:
            pair["winner"] = winner
        pairs.append(pair)
        expected.append((chosen_calls + rejected_calls, winner))
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "pairs.jsonl"
        try:
            report = wai.export_preference(pairs, target, format=fmt, drop_ties=drop_ties, validate=validate,
                                           system_prompt="", tools=[])
        except wai.ExportValidationError as err:
            assert validate and {p["kind"] for p in err.problems} <= {"roundtrip", "privileged_leak",
                                                                       "prompt_mismatch"}
            assert not target.exists()
        else:
            written = [json.loads(line) for line in target.read_text().split("\n") if line]
            assert report["pairs_in"] == len(pairs)
            assert report["pairs_out"] == len(written) == report["rows_written"]
            assert report["pairs_out"] + report["ties_dropped"] + report["no_completion_dropped"] + report[
                "prompt_mismatch_dropped"] == len(pairs)
            found = _calls(written, report["argument_encoding"])
            assert found - {"invalid"} <= {_canon(m) for calls, _ in expected for m in calls if m is not None}
            for row in written:
                if fmt == "trl":
                    assert row["chosen"][0]["role"] == "assistant" and row["rejected"][0]["role"] == "assistant"
                else:
                    assert isinstance(row["prompt"], str)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(generated=st.lists(_row(), min_size=1, max_size=4))
def test_to_hf_dataset_gives_trl_rows_back_exactly(generated):
    rows = [row for row, calls in generated if all(m is not None for m in calls)]
    trl_rows = wai.to_trl(rows)
    if not trl_rows:
        return
    dataset = to_hf_dataset(trl_rows)
    columns = set().union(*trl_rows)
    # where Arrow cannot hold a column (argument types differ between rows), arguments and tools come back as
    # their JSON text; decoded, every row is exactly what was given
    got = [_decoded(dataset[i]) for i in range(len(dataset))]
    assert got == [{c: r.get(c) for c in columns} for r in trl_rows]


def _decoded(row: dict) -> dict:
    import json

    from whileai.domain.export._hf import _decoded_arguments

    out = {k: _decoded_arguments(v) if k in ("messages", "prompt", "completion") else v for k, v in row.items()}
    if isinstance(out.get("tools"), str):
        out["tools"] = json.loads(out["tools"])
    return out
