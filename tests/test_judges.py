"""Judges: the contract, the first-action judge on adversarial pairs, scoring, trust and pairs."""

from __future__ import annotations

import copy
import json
import math

import pytest

import whileai.simulations as wai
from whileai.domain import defaults
from whileai.domain.judges.judging import ScoredData, completion_chars, normalise_judgement

GOLD = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 1}}


def call_row(arguments, name="get_weather", gold=GOLD, task="t0", passed=None, content=None):
    row = {
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": content, "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": "{\"temp\": 18}"},
            {"role": "assistant", "content": "It is 18 C."},
        ],
        "gold": gold,
        "task_id": task,
    }
    if passed is not None:
        row["passed"] = passed
    return row


def answer_row(text, gold_answer, task="a0", passed=None):
    row = {"messages": [{"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": text}],
           "gold": {"answer": gold_answer}, "task_id": task}
    if passed is not None:
        row["passed"] = passed
    return row


# ---------------------------------------------------------------------------
# first_action_judge on adversarial pairs
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("arguments", [
    '{"city": "Paris", "unit": "celsius", "days": 1}',
    '{"days": 1, "unit": "celsius", "city": "Paris"}',            # another key order
    '{"days":1.0,"unit":"celsius","city":"Paris"}',               # 1 vs 1.0, compact
    '{"days": 1e0, "unit": "celsius", "city": "Paris"}',          # another number spelling
    {"unit": "celsius", "city": "Paris", "days": 1.0},            # a dict, not a string
])
def test_first_action_judge_matches_equivalent_arguments(arguments):
    result = wai.first_action_judge(call_row(arguments))
    assert result == {"reward": 1.0, "passed": True, "reason": "match"}


@pytest.mark.parametrize("arguments, name, why", [
    (json.dumps(json.dumps(GOLD["arguments"])), "get_weather", "JSON string"),            # double-encoded
    ('{"city": "Paris", "unit": "celsius", "days": 1, "lang": "fr"}', "get_weather", "extra ['lang']"),
    ('{"city": "Paris", "unit": "celsius"}', "get_weather", "missing ['days']"),
    ('{"city": "Paris", "unit": "celsius", "days": 2}', "get_weather", "different ['days']"),
    ('{"city": "Paris", "unit": "celsius", "days": "1"}', "get_weather", "different ['days']"),   # "1" is not 1
    ('{"city": "Paris", "unit": "celsius", "days": true}', "get_weather", "different ['days']"),  # true is not 1
    ('{"city": "paris", "unit": "celsius", "days": 1}', "get_weather", "different ['city']"),    # values exact
    ('{"city": "Paris", "unit": "celsius", "days": 1}', "get_forecast", "wrong tool"),
    ("{city: Paris}", "get_weather", "not valid JSON"),
    ("[1, 2]", "get_weather", "list"),
])
def test_first_action_judge_rejects_adversarial_arguments(arguments, name, why):
    result = wai.first_action_judge(call_row(arguments, name=name))
    assert result["reward"] == 0.0 and result["passed"] is False
    assert why in result["reason"]


def test_gold_arguments_given_as_a_json_string_parse_once():
    gold = {"name": "get_weather", "arguments": json.dumps(GOLD["arguments"])}
    assert wai.first_action_judge(call_row({"city": "Paris", "unit": "celsius", "days": 1}, gold=gold))["passed"]
    twice = {"name": "get_weather", "arguments": json.dumps(json.dumps(GOLD["arguments"]))}
    assert not wai.first_action_judge(call_row({"city": "Paris", "unit": "celsius", "days": 1}, gold=twice))["passed"]


def test_nested_arguments_compare_as_json():
    gold = {"name": "book", "arguments": {"who": {"first": "Ada", "age": 36}, "ids": [1, 2.5]}}
    ok = call_row('{"ids": [1.0, 2.5], "who": {"age": 36.0, "first": "Ada"}}', name="book", gold=gold)
    order = call_row('{"ids": [2.5, 1], "who": {"age": 36, "first": "Ada"}}', name="book", gold=gold)
    assert wai.first_action_judge(ok)["passed"]
    assert not wai.first_action_judge(order)["passed"]  # list order matters


def test_only_the_first_action_counts():
    row = call_row('{"city": "Paris", "unit": "celsius", "days": 1}')
    row["messages"].insert(1, {"role": "assistant", "content": "Let me check."})
    result = wai.first_action_judge(row)
    assert not result["passed"] and "final answer" in result["reason"]


@pytest.mark.parametrize("text, ok", [
    ("Paris", True),
    ("  paris.  ", True),
    ("PARIS!", True),
    ("The capital is\n Paris", False),
    ("<think>France... capital</think>Paris.", True),
    ("Lyon", False),
])
def test_first_action_judge_normalises_answers(text, ok):
    assert wai.first_action_judge(answer_row(text, "Paris"))["passed"] is ok


def test_answer_gold_against_a_tool_call_fails_and_vice_versa():
    tool_first = call_row('{}', gold={"answer": "Paris"})
    assert "expected a final answer" in wai.first_action_judge(tool_first)["reason"]
    answer_first = answer_row("Paris", "Paris")
    answer_first["gold"] = GOLD
    assert "got a final answer" in wai.first_action_judge(answer_first)["reason"]


def test_first_action_judge_without_gold_or_assistant_turn():
    row = call_row("{}")
    del row["gold"]
    with pytest.raises(ValueError, match="gold"):
        wai.first_action_judge(row)
    bare = {"messages": [{"role": "user", "content": "hi"}], "gold": GOLD}
    assert wai.first_action_judge(bare) == {"reward": 0.0, "passed": False, "reason": "no assistant turn"}
    with pytest.raises(ValueError, match="reference action"):
        wai.first_action_judge({"messages": [{"role": "user", "content": "hi"}], "gold": {"tool": "x"}})


# ---------------------------------------------------------------------------
# The judge contract
# ---------------------------------------------------------------------------

def test_normalise_judgement_forms():
    cut = defaults.JUDGE_PASS_THRESHOLD
    assert normalise_judgement(cut) == (cut, True, {})
    assert normalise_judgement(cut - 1e-9)[1] is False
    assert normalise_judgement(True) == (1.0, True, {})
    assert normalise_judgement({"reward": 0.1, "passed": True, "why": "x"}) == (0.1, True, {"why": "x"})
    assert normalise_judgement({"reward": 0.9}, threshold=0.95)[1] is False
    import numpy as np

    assert normalise_judgement(np.float32(0.75)) == (0.75, True, {})
    for bad, err in [(None, TypeError), ("0.5", TypeError), (math.nan, ValueError), ({"score": 1}, ValueError),
                     ({"reward": 1, "passed": "yes"}, TypeError)]:
        with pytest.raises(err):
            normalise_judgement(bad)
    with pytest.raises(ValueError, match="threshold"):
        normalise_judgement(1.0, threshold="high")


def test_evaluate_copies_rows_and_scores():
    rows = [call_row('{"city": "Paris", "unit": "celsius", "days": 1}', task="t0"),
            call_row('{"city": "Rome"}', task="t0"),
            answer_row("Paris", "Paris", task="t1")]
    rows[1]["passed"] = True  # a stale label the judge overrides in the copy
    before = copy.deepcopy(rows)
    scored = wai.evaluate(rows, wai.first_action_judge)
    assert rows == before, "evaluate must not change its input"
    assert isinstance(scored, ScoredData) and len(scored) == 3
    assert [r["passed"] for r in scored] == [True, False, True]
    assert [r["reward"] for r in scored.rows] == [1.0, 0.0, 1.0]
    assert scored.pass_rate == pytest.approx(2 / 3)
    assert scored.passes() == [scored.rows[0], scored.rows[2]] and scored.fails() == [scored.rows[1]]
    assert scored.extras[1]["reason"].startswith("arguments differ")
    assert "reason" not in scored.rows[0]


def test_evaluate_plain_function_judges_and_threshold():
    rows = [answer_row("x", "x", task=f"t{i}") for i in range(4)]
    scored = wai.evaluate(rows, lambda r: 0.6, threshold=0.7)
    assert scored.pass_rate == 0 and scored.threshold == 0.7
    assert wai.evaluate(rows, lambda r: {"reward": 0.0, "passed": True}).pass_rate == 1.0
    with pytest.raises(TypeError, match="not callable"):
        wai.evaluate(rows, "first_action")
    with pytest.raises(TypeError, match="row 0"):
        wai.evaluate(rows, lambda r: None)


def test_evaluate_reads_jsonl_and_empty_sets(tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [answer_row("Paris", "Paris"), answer_row("Rome", "Paris")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert wai.evaluate(path, wai.first_action_judge).pass_rate == 0.5
    empty = wai.evaluate([], wai.first_action_judge)
    assert len(empty) == 0 and math.isnan(empty.pass_rate)
    with pytest.raises(TypeError, match="single rollout row"):
        wai.evaluate(rows[0], wai.first_action_judge)


def test_grade_on_simulation_data():
    data = wai.SimulationData([answer_row("Paris", "Paris"), answer_row("Rome", "Paris")])
    assert data.grade(judge=wai.first_action_judge).pass_rate == 0.5


# ---------------------------------------------------------------------------
# Preference pairs
# ---------------------------------------------------------------------------

def sized(task, passed, chars):
    return {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x" * chars}],
            "task_id": task, "passed": passed}


def test_select_for_preference_is_length_matched_per_task():
    rows = [sized("a", True, 10), sized("a", True, 50), sized("a", False, 48), sized("a", False, 200),
            sized("b", True, 5), sized("b", True, 7),          # no fail: no pair
            sized("c", False, 5),                               # no pass: no pair
            sized("d", True, 30), sized("d", False, 31), {**sized("d", None, 30)}]
    rows[-1].pop("passed")
    pairs = wai.build_preference_pairs(rows)
    assert [(p["task_id"], completion_chars(p["chosen"]), completion_chars(p["rejected"])) for p in pairs] == [
        ("a", 50, 48), ("d", 30, 31)]
    two = wai.build_preference_pairs(rows, per_task=2)
    assert [(p["task_id"], completion_chars(p["chosen"]), completion_chars(p["rejected"])) for p in two] == [
        ("a", 50, 48), ("a", 10, 200), ("d", 30, 31)]
    scored = ScoredData([r for r in rows if "passed" in r])
    assert scored.select_for_preference() == pairs
    with pytest.raises(ValueError, match="per_task"):
        wai.build_preference_pairs(rows, per_task=0)


def test_completion_chars_counts_tool_calls_compactly():
    a = call_row('{"city": "Paris",   "days": 1}')
    b = call_row({"days": 1, "city": "Paris"})
    assert completion_chars(a) == completion_chars(b) == len("get_weather") + len('{"city":"Paris","days":1}') + len("It is 18 C.")


# ---------------------------------------------------------------------------
# judge_trust and judge_pairs
# ---------------------------------------------------------------------------

def test_judge_trust_counts_agreement_and_kappa():
    good = '{"city": "Paris", "unit": "celsius", "days": 1}'
    rows = ([call_row(good, passed=True)] * 4 + [call_row("{}", passed=False)] * 4
            + [call_row(good, passed=False), call_row("{}", passed=True), call_row(good)])
    trust = wai.judge_trust(rows, judge=wai.first_action_judge)
    assert trust["n"] == 10 and trust["unlabelled"] == 1
    assert trust["confusion"] == {"tp": 4, "fp": 1, "fn": 1, "tn": 4}
    assert trust["accuracy"] == pytest.approx(0.8)
    assert trust["kappa"] == pytest.approx((0.8 - 0.5) / 0.5)
    assert trust["disagreements"] == [{"index": 8, "label": False, "judge": True, "reward": 1.0},
                                      {"index": 9, "label": True, "judge": False, "reward": 0.0}]
    one_class = wai.judge_trust([call_row(good, passed=True)] * 3, judge=wai.first_action_judge)
    assert one_class["accuracy"] == 1.0 and one_class["kappa"] is None
    json.dumps(trust)
    with pytest.raises(ValueError, match="passed label"):
        wai.judge_trust([call_row(good)], judge=wai.first_action_judge)


def test_judge_pairs_orients_and_marks_ties():
    good = call_row('{"city": "Paris", "unit": "celsius", "days": 1}')
    bad = call_row("{}")
    pairs = [{"chosen": bad, "rejected": good, "task_id": "t0"}, (good, bad), {"chosen": bad, "rejected": bad}]
    judged = wai.judge_pairs(pairs, wai.first_action_judge)
    assert judged[0]["chosen"] is good and judged[0]["rejected"] is bad and judged[0]["winner"] == "chosen"
    assert judged[0]["task_id"] == "t0" and judged[0]["rewards"] == {"chosen": 1.0, "rejected": 0.0}
    assert judged[1]["chosen"] is good and judged[1]["winner"] == "chosen"
    assert judged[2]["winner"] == "tie"
    assert pairs[0]["chosen"] is bad, "the input pairs are not changed"
    scores = iter([0.5, 0.5 + defaults.JUDGE_TIE_TOLERANCE / 2, 0.5, 0.6])
    close = wai.judge_pairs([(good, bad), (good, bad)], lambda r: next(scores))
    assert [p["winner"] for p in close] == ["tie", "chosen"] and close[1]["chosen"] is bad
    with pytest.raises(ValueError, match="chosen"):
        wai.judge_pairs([{"chosen": good}], wai.first_action_judge)


def test_make_first_action_judge_options():
    from whileai.domain.judges.judging import make_first_action_judge

    plain = make_first_action_judge()
    row = call_row('{"city": "Paris", "unit": "celsius", "days": 1, "request_id": "r1"}')
    assert plain(row) == wai.first_action_judge(row) and not plain(row)["passed"]
    lenient = make_first_action_judge(ignore_arguments=["request_id"])
    assert lenient(row)["passed"]
    assert not lenient(call_row('{"city": "Rome", "unit": "celsius", "days": 1, "request_id": "r1"}'))["passed"]
    partial = make_first_action_judge(partial_credit=True)
    half = partial(call_row('{"city": "Paris", "unit": "kelvin", "days": 2}'))
    assert half["reward"] == pytest.approx(1 / 3) and half["passed"] is False
    assert partial(call_row('{"city": "Paris", "unit": "celsius", "days": 1, "x": 0}'))["reward"] == pytest.approx(2 / 3)
    assert partial(call_row('{"city": "Paris", "unit": "celsius", "days": 1}', name="other"))["reward"] == 0.0
    assert wai.evaluate([row], lenient).judge == "first_action_judge"


def test_a_judge_with_judge_many_scores_every_row_in_one_call():
    class Batched:
        def __init__(self):
            self.batches = []

        def __call__(self, row):
            raise AssertionError("scored one row at a time")

        def judge_many(self, rows):
            self.batches.append(len(rows))
            return [{"reward": float(i), "passed": i % 2 == 0} for i in range(len(rows))]

    rows = [answer_row("Paris", "Paris"), answer_row("Rome", "Paris"), answer_row("Oslo", "Oslo")]
    judge = Batched()
    scored = wai.evaluate(rows, judge)
    assert judge.batches == [3] and [r["reward"] for r in scored.rows] == [0.0, 1.0, 2.0]
    assert [r["passed"] for r in scored.rows] == [True, False, True]

    class Short(Batched):
        def judge_many(self, rows):
            return [1.0]

    with pytest.raises(ValueError, match="returned 1 verdicts for 3 rows"):
        wai.evaluate(rows, Short())


def test_judge_reply_scores_generated_text_like_the_first_action_judge():
    """Generated text is parsed into a reply and judged against the row's gold (the jobs' and benchmarks' figure)."""
    from whileai.domain.judges.judging import judge_reply

    prompt = [{"role": "system", "content": "convert units"}, {"role": "user", "content": "12 km in miles?"}]
    row = {"messages": prompt, "gold": {"name": "convert", "arguments": {"amount": 12, "from_unit": "km", "to_unit": "miles"}}}
    good = '<tool_call>{"name": "convert", "arguments": {"to_unit": "miles", "amount": 12.0, "from_unit": "km"}}</tool_call>'
    assert judge_reply(good, row)["passed"]
    assert not judge_reply(good.replace("12.0", "13"), row)["passed"]
    assert not judge_reply("That is 7 miles.", row)["passed"]
    assert not judge_reply("<tool_call>{broken", row)["passed"]
    answer = {"messages": prompt, "gold": {"answer": "You are welcome!"}}
    assert judge_reply("you are welcome ", answer)["passed"]
    assert not judge_reply(good, answer)["passed"]
    assert judge_reply(good, row, judge=lambda r: 0.25) == {"reward": 0.25, "passed": False}
