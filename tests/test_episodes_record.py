"""A held-out episode as the run's summary keeps it: played on the kit's bank by a scripted policy, judged, recorded.

The record's messages are checked as OpenAI's wire writes them (every call with an id, every tool message with
the id and name of the call it answers), the verdict and the turns as the loop and the judge gave them, and
``episodes_summary`` for its pairing, its order and its size cap.
"""

from __future__ import annotations

import json

import pytest

from _episodes import MOVE_ALL
from whileai.domain import defaults
from whileai.domain.episodes import KitEnvironment, judge_episode, kit_rows, play_episode, replay
from whileai.domain.episodes.record import (CUT_MARKER, EPISODES_KEY, episode_record, episodes_summary, tool_error,
                                            wire_messages)
from whileai.domain.rows.rollouts import row_problems

TASK = MOVE_ALL


def _call(name, arguments, call_id=None):
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return {**call, "id": call_id} if call_id else call


#: three rounds of calls (the first a typo the bank refuses, the second with its own id, the third with its arguments
#: as JSON text), then the answer
SCRIPT = [
    {"role": "assistant", "content": "Reading alice first.", "tool_calls": [_call("get_balance", {"account": "alic"})]},
    {"role": "assistant", "content": "", "tool_calls": [_call("get_balance", {"account": "alice"}, "given-1")]},
    {"role": "assistant", "content": None, "tool_calls": [
        _call("transfer", json.dumps({"source": "alice", "target": "bob", "amount": 30}))]},
    "Done: bob now holds 50.",
]


def _play(script=SCRIPT, task=TASK, max_turns=None):
    row = kit_rows([task])[0]
    replies = iter(script)
    episode = play_episode(lambda conversation: next(replies), KitEnvironment(), row, max_turns=max_turns)
    return episode, judge_episode(episode, replay(KitEnvironment, row, task.gold), task.responses)


def test_a_played_episode_is_recorded_as_openai_wire_messages_with_its_verdict():
    episode, verdict = _play()
    record = episode_record(TASK.task_id, episode, verdict)
    assert verdict.passed and record["passed"] is True and record["reason"] == verdict.reason
    assert (record["task_id"], record["turns"], record["stopped"]) == ("kit-move-all", 4, "answered")
    messages = record["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                             "tool", "assistant"]
    calls = [m["tool_calls"][0] for m in messages if m.get("tool_calls")]
    assert [c["id"] for c in calls] == ["call_0", "given-1", "call_2"]  # a call's own id kept, the others numbered
    assert all(c["type"] == "function" and isinstance(c["function"]["arguments"], str) for c in calls)
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"account": "alic"}, {"account": "alice"}, {"source": "alice", "target": "bob", "amount": 30}]
    tools = [m for m in messages if m["role"] == "tool"]
    assert [(t["tool_call_id"], t["name"]) for t in tools] == [
        ("call_0", "get_balance"), ("given-1", "get_balance"), ("call_2", "transfer")]
    assert set(tools[0]) == {"role", "tool_call_id", "name", "content"}
    # the refused call is the loop's error answer, read back as an error; the others are results
    assert tool_error(tools[0]["content"]).startswith("no account named 'alic'")
    assert [tool_error(t["content"]) for t in tools[1:]] == [None, None]
    assert tools[1]["content"] == "30" and messages[2]["content"] == "Reading alice first."
    assert messages[6]["content"] is None and messages[-1] == {"role": "assistant", "content": "Done: bob now holds 50."}
    # a rollout row's gate takes the messages as they are, and the record is JSON as written
    assert row_problems({"messages": messages}) == []
    assert json.loads(json.dumps(record)) == record


def test_an_episode_at_the_turn_cap_and_a_failed_one_say_so():
    episode, verdict = _play(script=SCRIPT[:2] + [SCRIPT[1]] * 3, max_turns=2)
    record = episode_record(TASK.task_id, episode, verdict)
    assert record["stopped"] == "cap" and record["turns"] == 3 and record["passed"] is False
    assert "differs from the gold replay" in record["reason"]
    last = record["messages"][-1]
    assert last["role"] == "assistant" and last["tool_calls"][0]["id"] == "given-1"  # not run: no tool message after
    assert record["messages"][-2]["role"] == "tool"


def test_long_texts_are_cut_saying_how_much_and_ids_never_collide():
    long = "x" * (defaults.EPISODE_RECORD_TEXT_CHARS + 7)
    messages = [{"role": "user", "content": long},
                {"role": "assistant", "content": "", "tool_calls": [
                    _call("f", {"text": long}), _call("g", "{}", "call_0"), _call("h", None)]},
                {"role": "tool", "name": "f", "content": long},
                {"role": "tool", "name": "g", "content": ["a", 1]},
                {"role": "tool", "name": "h", "content": "ok"}]
    wire = wire_messages(messages)
    assert wire[0]["content"] == "x" * defaults.EPISODE_RECORD_TEXT_CHARS + CUT_MARKER.format(n=7)
    calls = wire[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_0_1", "call_0", "call_2"]  # call_0 is the second call's own id
    assert calls[0]["function"]["arguments"].endswith(" more characters not kept]")
    assert calls[2]["function"]["arguments"] == "{}"
    assert [(m["tool_call_id"], m["name"]) for m in wire[2:]] == [("call_0_1", "f"), ("call_0", "g"), ("call_2", "h")]
    assert wire[3]["content"] == '["a", 1]'  # a tool's list answer, as JSON text
    assert wire_messages([{"role": "user", "content": "abcdef"}], limit=2)[0]["content"] == "ab" + CUT_MARKER.format(n=4)


@pytest.mark.parametrize("task_id", ["", None, 7])
def test_a_record_needs_a_task_id_to_pair_by(task_id):
    episode, verdict = _play()
    with pytest.raises(ValueError, match="pass the held-out row's task_id"):
        episode_record(task_id, episode, verdict)


def _record(task_id, passed, size=0):
    return {"task_id": task_id, "passed": passed, "reason": "r", "turns": 1, "stopped": "answered",
            "messages": [{"role": "user", "content": "x" * size}]}


def test_the_summary_keeps_pairs_whole_changed_verdicts_first_under_the_size_cap():
    before = [_record("same-pass", True, 300), _record("fail-both", False, 300), _record("gained", False, 300),
              _record("lost", True, 300), _record("before-only", False, 10)]
    after = [_record("same-pass", True, 300), _record("fail-both", False, 300), _record("gained", True, 300),
             _record("lost", False, 300), _record("after-only", True, 10)]
    whole = episodes_summary(before, after)
    assert whole == {"before": before, "after": after, "left_out": 0}  # each side in its own order
    one_pair, two_small = (2 * (len(json.dumps(r)) + 2) for r in (before[0], before[-1]))
    cut = episodes_summary(before, after, max_bytes=2 * one_pair + two_small)
    assert [r["task_id"] for r in cut["before"]] == ["gained", "lost", "before-only"]
    assert [r["task_id"] for r in cut["after"]] == ["gained", "lost", "after-only"]
    assert cut["left_out"] == 2  # the changed pairs first; fail-both and same-pass did not fit, the small ones did
    assert episodes_summary([], after[:1]) == {"before": [], "after": after[:1], "left_out": 0}
    assert EPISODES_KEY == "episodes"


def test_two_records_of_one_task_on_a_side_are_refused():
    with pytest.raises(ValueError, match="two after records have task_id 'a'"):
        episodes_summary([_record("a", True)], [_record("a", True), _record("a", False)])


@pytest.mark.parametrize("content,error", [
    (str({"error": "Tool nope not found."}), "Tool nope not found."),  # the loop's answer (as TRL's)
    ('{"error": "No such file"}', "No such file"),                      # a tool that returns its own error as JSON
    ("Error during execution: name 'ls2' is not defined", "name 'ls2' is not defined"),  # BFCL's executor
    ("{'error_count': 0}", None),
    ("{'error': 'x', 'result': 1}", None),
    ("no error here", None),
    ("{'error': [unclosed", None),
    (None, None),
])
def test_tool_error_reads_the_error_answers_and_nothing_else(content, error):
    assert tool_error(content) == error
