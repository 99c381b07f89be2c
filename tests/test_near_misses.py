"""Near-miss pairs for a reward model: a passing row's first action changed in one place, judged to fail."""

from __future__ import annotations

import json

import pytest

import whileai.simulations as wai
from whileai.jobs import rm
from whileai.kit.sample_task import load_sample
from whileai.domain.judges.judging import near_miss_pairs


def call_row(args, task, passed=True, gold=None, name="convert", as_text=True):
    arguments = json.dumps(args) if as_text else dict(args)
    return {
        "messages": [
            {"role": "system", "content": "Use the tools."},
            {"role": "user", "content": f"ask {task}"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c0", "content": "{}"},
            {"role": "assistant", "content": "Done."},
        ],
        "gold": gold if gold is not None else {"name": name, "arguments": dict(args)},
        "passed": passed,
        "task_id": task,
    }


def answer_row(text, task, passed=True):
    return {"messages": [{"role": "user", "content": f"say {task}"}, {"role": "assistant", "content": text}],
            "gold": {"answer": text}, "passed": passed, "task_id": task}


def first_call_args(row):
    turn = next(m for m in row["messages"] if m["role"] == "assistant")
    args = turn["tool_calls"][0]["function"]["arguments"]
    return json.loads(args) if isinstance(args, str) else args


def changed_keys(pair):
    before, after = first_call_args(pair["chosen"]), first_call_args(pair["rejected"])
    assert set(before) == set(after)
    return sorted(k for k in before if before[k] != after[k])


ROWS = [
    call_row({"amount": 120, "from_unit": "km", "to_unit": "miles"}, "t0"),
    call_row({"amount": 7, "from_unit": "kg", "to_unit": "pounds"}, "t1"),
    call_row({"amount": 3, "from_unit": "km", "to_unit": "miles"}, "t2", passed=False,
             gold={"name": "convert", "arguments": {"amount": 30, "from_unit": "km", "to_unit": "miles"}}),
    answer_row("Hello!", "a0"),
    answer_row("You are welcome!", "a1"),
]


def test_each_near_miss_fails_the_judge_and_differs_from_its_pass_in_one_place():
    pairs, summary = near_miss_pairs(ROWS, per_row=6, seed=0)
    assert pairs and summary["pairs"] == len(pairs) == sum(summary["by_rule"].values())
    assert summary["still_passed"] == 0
    for pair in pairs:
        chosen, rejected = pair["chosen"], pair["rejected"]
        assert chosen["passed"] is True and rejected["passed"] is False and rejected["reward"] == 0.0
        assert not wai.first_action_judge(rejected)["passed"] and wai.first_action_judge(chosen)["passed"]
        assert rejected["markers"] == {"near_miss": pair["near_miss"]} and pair["task_id"] == chosen["task_id"]
        # the prompt is the pass's own, and the copy ends at the changed first turn
        assert rejected["messages"][:-1] == chosen["messages"][: len(rejected["messages"]) - 1]
        assert rejected["messages"][-1]["role"] == "assistant"
        if pair["near_miss"] == "answer":
            assert rejected["messages"][-1]["content"] != chosen["messages"][1]["content"]
        elif pair["near_miss"] == "swap":
            assert changed_keys(pair) == ["from_unit", "to_unit"]
        else:
            assert len(changed_keys(pair)) == 1
    # only passing rows with a gold are changed: the failing row t2 gives no pair
    assert {p["task_id"] for p in pairs} == {"t0", "t1", "a0", "a1"}
    # the source rows are left as they were
    assert first_call_args(ROWS[0]) == {"amount": 120, "from_unit": "km", "to_unit": "miles"}


def test_the_rules_draw_from_the_data_nearby_numbers_and_same_typed_swaps():
    pairs, _ = near_miss_pairs(ROWS, per_row=20, seed=0)
    of = {rule: [p for p in pairs if p["near_miss"] == rule] for rule in ("value", "nearby", "swap", "answer")}
    assert all(of.values()), {k: len(v) for k, v in of.items()}
    seen_amounts = {120, 7, 3}
    for pair in of["value"]:
        (key,) = changed_keys(pair)
        value = first_call_args(pair["rejected"])[key]
        # a value another row gives the same argument: the failing row's 3 counts, made-up values never appear
        assert value in {"amount": seen_amounts, "from_unit": {"km", "kg"}, "to_unit": {"miles", "pounds"}}[key]
    nearby = {(first_call_args(p["chosen"])["amount"], first_call_args(p["rejected"])["amount"]) for p in of["nearby"]}
    # one either side, and a tenth of itself either side (120 -> 108, 132; 7 -> 6, 8)
    assert nearby <= {(120, 119), (120, 121), (120, 108), (120, 132), (7, 6), (7, 8)}
    assert {(120, 108), (120, 132)} & nearby
    # the number never swaps with a unit: only the two strings trade places
    assert all(changed_keys(p) == ["from_unit", "to_unit"] for p in of["swap"])
    assert {p["rejected"]["messages"][-1]["content"] for p in of["answer"]} == {"Hello!", "You are welcome!"}


def test_near_misses_are_distinct_deterministic_and_capped_per_row():
    first, _ = near_miss_pairs(ROWS, per_row=2, seed=3)
    again, _ = near_miss_pairs(ROWS, per_row=2, seed=3)
    other, _ = near_miss_pairs(ROWS, per_row=2, seed=4)
    assert first == again and first != other
    per_task: dict[str, list[str]] = {}
    for pair in first:
        per_task.setdefault(pair["task_id"], []).append(json.dumps(pair["rejected"]["messages"][-1], sort_keys=True))
    assert all(len(v) <= 2 and len(set(v)) == len(v) for v in per_task.values())
    assert near_miss_pairs(ROWS, per_row=0)[0] == []
    with pytest.raises(ValueError, match="per_row=-1 must be a whole number"):
        near_miss_pairs(ROWS, per_row=-1)


def test_a_change_the_judge_still_passes_is_left_out():
    """A gold that accepts several values (docs/rows.md): a change to another accepted value is no near miss."""
    gold = {"name": "convert", "arguments": {"amount": 5, "from_unit": "km", "to_unit": "miles"},
            "values": {"amount": [5, 6]}}
    rows = [call_row({"amount": 5, "from_unit": "km", "to_unit": "miles"}, "t0", gold=gold),
            call_row({"amount": 6, "from_unit": "km", "to_unit": "miles"}, "t1", gold=gold)]
    pairs, summary = near_miss_pairs(rows, per_row=10, seed=0)
    assert summary["still_passed"] > 0
    assert all(first_call_args(p["rejected"])["amount"] not in (5, 6) or changed_keys(p) != ["amount"] for p in pairs)
    assert all(not wai.first_action_judge(p["rejected"])["passed"] for p in pairs)


def test_arguments_keep_their_spelling_and_unstructured_turns_are_left_alone():
    as_object = call_row({"amount": 5, "from_unit": "km", "to_unit": "miles"}, "t0", as_text=False)
    pairs, _ = near_miss_pairs([as_object], per_row=3, seed=0)
    assert pairs and all(isinstance(p["rejected"]["messages"][2]["tool_calls"][0]["function"]["arguments"], dict)
                         for p in pairs)
    text_call = {"messages": [{"role": "user", "content": "x"},
                              {"role": "assistant", "content": '<tool_call>{"name": "f"}</tool_call>',
                               "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}],
                 "gold": {"name": "f", "arguments": {}}, "passed": True, "task_id": "x"}
    assert near_miss_pairs([text_call], per_row=3)[0] == []


def test_on_the_sample_task_every_rule_gives_pairs():
    rows = load_sample()
    pairs, summary = near_miss_pairs(rows, per_row=3, seed=0)
    passing = sum(r["passed"] for r in rows)
    assert summary["rows"] == passing and summary["pairs"] == len(pairs) >= 2 * passing
    assert all(summary["by_rule"][rule] > 0 for rule in ("value", "nearby", "swap", "answer"))
    assert all(not wai.first_action_judge(p["rejected"])["passed"] for p in pairs)


def test_the_rm_job_adds_near_misses_to_its_pairs_on_the_first_action_only():
    rows = load_sample()[:200]
    examples, summary = rm.near_miss_examples(rows, 2, seed=0)
    assert len(examples) == summary["pairs"] > 0
    assert all(sum(m["role"] == "assistant" for m in ex[side]) == 1 and ex[side][-1]["role"] == "assistant"
               for ex in examples for side in ("chosen", "rejected"))
    from whileai.core.spec import RMSpec

    assert rm.near_misses_of(RMSpec(near_misses=2, reward_span="first_action")) == 2
    assert rm.near_misses_of(RMSpec(near_misses=None)) == 0  # an older record's None: the declared default
    with pytest.raises(ValueError, match="near_misses=2 needs reward_span='first_action'.*pass reward_span=first_action"):
        rm.near_misses_of(RMSpec(near_misses=2, reward_span="conversation"))


def test_held_out_pairs_are_counted_per_failure_kind():
    pairs = [{"rejected": {"markers": {"failure": "wrong_tool"}}}, {"rejected": {"markers": {"failure": "wrong_tool"}}},
             {"rejected": {"markers": {"failure": "no_tool"}}}, {"rejected": {}}]
    assert rm.by_failure(pairs, [1, 0, 1, 1]) == {"no_tool": {"right": 1, "pairs": 1},
                                                   "wrong_tool": {"right": 1, "pairs": 2}}
    assert rm.by_failure(pairs[3:], [1]) is None


def test_a_float_moves_by_a_tenth_of_itself_and_a_lone_row_still_gives_near_misses():
    row = call_row({"amount": 2.5, "from_unit": "km", "to_unit": "miles"}, "t0")
    pairs, summary = near_miss_pairs([row], per_row=10, seed=0)
    # no other row: no "value" change, but the number moves and the units swap
    assert summary["by_rule"] == {"value": 0, "nearby": 2, "swap": 1, "answer": 0}
    assert {first_call_args(p["rejected"])["amount"] for p in pairs if p["near_miss"] == "nearby"} == {2.25, 2.75}


def test_all_passing_rows_teach_a_reward_model_only_through_near_misses():
    """BFCL's rows are all reference calls: the selection gate refuses rm on them unless near misses give pairs."""
    from whileai.core.errors import TrainingSelectionError
    from whileai.simulations._hosting import selection_gate
    from whileai.domain.rows.selection import near_miss_count

    rows = list(wai.datasets.from_bfcl("tests/data/bfcl/BFCL_v4_simple_python.json",
                                       "tests/data/bfcl/possible_answer/BFCL_v4_simple_python.json"))
    profile = wai.datasets.profile(rows)
    assert profile["mixed_tasks"] == 0
    with pytest.raises(TrainingSelectionError, match="rm needs tasks with both a pass and a fail"):
        selection_gate(profile, "rm", "require", 1)
    near = near_miss_count(rows, "rm", {"near_misses": 3, "reward_span": "first_action"})
    assert near > len(rows)  # several per reference call
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "rm uses 0 of 41 rows" warning: every row is a chosen side
        assert selection_gate(profile, "rm", "require", 1, near_pairs=near)["mixed_tasks"] == 0
    # the selection line leads with the pairs the job trains on, not "uses 0 of 41 rows; left out 41 ... passed"
    said = wai.datasets.selection_report(rows, "rm", config={"near_misses": 3})["summary"]
    assert said.startswith(f"rm: trains on {near} pairs: {near} near-miss pairs (near_misses=3 per passing row)")
    assert "every row passed" not in said and "uses 0 of" not in said
    assert near_miss_count(rows, "dpo", {"near_misses": 3}) == 0
    with pytest.raises(TrainingSelectionError):
        selection_gate(profile, "dpo", "require", 1, near_pairs=0)


def test_a_reward_models_power_line_counts_the_held_out_pairs_it_will_measure():
    """The line a run prints before training counts what the job measures: for rm, pairs (here near misses)."""
    from whileai.core.spec import RMSpec, SFTSpec
    from whileai.runner._power import power_note
    from whileai.domain import defaults
    from whileai.domain.judges.judging import near_miss_pairs

    rows = list(wai.datasets.from_bfcl("tests/data/bfcl/BFCL_v4_simple_python.json",
                                       "tests/data/bfcl/possible_answer/BFCL_v4_simple_python.json"))
    made = near_miss_pairs(rows, defaults.HOLDOUT_NEAR_MISSES, defaults.HOLDOUT_NEAR_MISS_SEED)[1]["pairs"]
    assert 0 < made < len(rows)  # some reference calls have no near miss the judge fails
    spec = RMSpec(near_misses=3, reward_span="first_action")
    text, warning = power_note(rows, spec)
    assert text.startswith(f"{made} held-out pair(s)") and "turning from wrong to right" in text and warning is None
    assert power_note(rows, SFTSpec())[0].startswith(f"{len(rows)} held-out prompt(s)")
    few, warning = power_note(rows[:3], spec, 0.05)
    assert "no change on them can be significant" in few and "more pairs" in warning
