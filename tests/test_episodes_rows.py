"""Gold episodes as rollout rows (whileai/domain/episodes/rows.py): each kit task's row replays to a pass, carries
what its environment is reset with and judged against, and goes through the rows' contract, the data gates and the
exporter's gates like any rollout row."""

from __future__ import annotations

import json
from typing import Any

import pytest

from whileai.domain.episodes import (EPISODE_FIELD, KitEnvironment, episode_gold, gold_messages, has_episode,
                                     judge_episode, kit_episode_rows, kit_reply, kit_tasks, play_episode, replay,
                                     tool_schemas)
from whileai.domain.episodes.kit import KIT_KINDS
from whileai.domain.rows.taskkey import prompt_messages


def _one_per_kind() -> list[dict[str, Any]]:
    tasks = kit_tasks(60)
    return kit_episode_rows([next(t for t in tasks if t.kind == kind) for kind in KIT_KINDS])


def _replayer(row: dict[str, Any]) -> Any:
    """A policy that says the row's assistant turns in order."""
    turns = [m for m in row["messages"] if m["role"] == "assistant"]
    return lambda _conversation: turns.pop(0)


def test_each_row_is_its_tasks_gold_episode_played_in_the_bank():
    for row in _one_per_kind():
        gold = episode_gold(row)
        start = {"prompt": prompt_messages(row), **gold.reset}
        episode = play_episode(_replayer(row), KitEnvironment(), start)
        verdict = judge_episode(episode, replay(KitEnvironment, start, gold.calls), gold.responses)
        assert verdict.passed, (row["category"], verdict.reason)
        assert episode.messages == row["messages"], "each tool message is the one the episode loop writes"
        assert row["passed"] is True and row["reward"] == 1.0 and row["task_id"] == json.loads(
            gold.reset["kit_task"])["task_id"]
        assert row["gold"] == gold.calls[0], "the first gold call: what the first-action judge reads"
        assert row["tools"] == tool_schemas(KitEnvironment())
        assert [m["role"] for m in row["messages"]][:1] == ["user"], "no system prompt: the kit model's context"


def test_one_call_a_turn_and_a_reply_that_says_what_the_task_asks():
    for row in _one_per_kind():
        gold = episode_gold(row)
        turns = [m for m in row["messages"] if m["role"] == "assistant"]
        assert [len(m.get("tool_calls") or []) for m in turns] == [1] * len(gold.calls) + [0]
        assert all(isinstance(m["tool_calls"][0]["function"]["arguments"], str) for m in turns[:-1]), "OpenAI wire"
        for word in gold.responses:
            assert word in turns[-1]["content"]
    task = next(t for t in kit_tasks(60) if t.kind == "pay_and_report")
    assert kit_reply(task) == f"Done. The balance is {task.responses[0]}."


def test_the_episode_field_round_trips_and_says_what_is_missing():
    row = _one_per_kind()[0]
    gold = episode_gold(row)
    assert episode_gold(gold.to_json()) == gold and has_episode(row)
    assert gold.environment == "kit" and set(gold.reset) == {"kit_task"}
    with pytest.raises(ValueError, match="no 'episode' field"):
        episode_gold({"messages": []})
    with pytest.raises(ValueError, match="missing: calls"):
        episode_gold({EPISODE_FIELD: {"environment": "kit", "reset": {}}})


def test_a_gold_call_the_world_refuses_is_refused():
    gold = episode_gold(_one_per_kind()[0])
    broken = type(gold)(environment="kit", reset=gold.reset,
                        calls=({"name": "close_account", "arguments": {"account": "nobody"}},))
    with pytest.raises(ValueError, match="gold call 0 \\(close_account"):
        gold_messages(KitEnvironment, broken, [{"role": "user", "content": "x"}], "Done.")


def test_the_rows_keep_to_the_rows_contract_and_pass_every_gate(tmp_path):
    from whileai.domain.export import export_dataset
    from whileai.domain.rows.datagate import gate_rows
    from whileai.domain.rows.rollouts import row_problems

    rows = _one_per_kind()
    assert [row_problems(r) for r in rows] == [[]] * len(rows)
    gated, report = gate_rows(rows)
    assert report["refused_rows"] == 0 and gated == rows
    with pytest.warns(UserWarning, match="no system message"):  # on purpose: the kit model's context (the module)
        written = export_dataset(rows, tmp_path / "train.jsonl", format="trl", validate=True)
    assert written["rows_out"] == len(rows) and written["roundtrip"]["ok"] and not written["roundtrip"]["invalid"]
