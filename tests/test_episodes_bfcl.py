"""BFCL's multi-turn entries as episodes for training and measuring: each entry a gold episode row (its answer played
in its environment over every user turn, refused by id where BFCL's check fails it), each row routed to the environment
class its name names (TRL's dict of factories, as the episode jobs build it from the rows), and the episode judge
taking BFCL's own verdict where the environment's episode judges itself.

The entries are the committed sample (tests/data/bfcl/multi_turn); bfcl-eval's backends come from the wheel when
installed, else from the copies beside the sample, by benchmarks/_bfcl_checker.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import _bfcl_checker as bfcl  # noqa: E402
from _bfcl_episode_fixtures import checker_fixture, entries_fixture, rows_fixture  # noqa: E402,F401  (checker, entries, rows)

from whileai.domain.rows.bfcl_multi_turn import environment_name, parse_environment_name  # noqa: E402


# ---------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------


def test_each_entry_is_a_passing_gold_episode_row_that_the_data_gates_take(entries, rows):
    from whileai.domain import defaults
    from whileai.domain.episodes import episode_gold
    from whileai.domain.episodes.bfcl import ADDED_FUNCTIONS_PROMPT, gold_calls
    from whileai.domain.rows.datagate import gate_rows
    from whileai.domain.rows.rollouts import row_problems

    assert [r["task_id"] for r in rows] == [e.id for e in entries]
    assert all(row_problems(r) == [] for r in rows) and gate_rows(rows)[1]["refused"] == []
    for entry, row in zip(entries, rows):
        calls = gold_calls(entry)
        gold = episode_gold(row)
        assert (gold.environment, json.loads(gold.reset["bfcl_entry"])["id"]) == (environment_name(entry), entry.id)
        assert list(gold.calls) == [c for turn in calls for c in turn]
        assert row["gold"] == (calls[0][0] if calls[0] else {"no_call": True}) and row["category"] == entry.category
        made = [c["function"]["name"] for m in row["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        assert made == [c["name"] for c in gold.calls], "one assistant turn a call, in the answer's order"
        users = [m["content"] for m in row["messages"] if m["role"] == "user"]
        assert len(users) == sum(max(len(t), 1) for t in entry.turns) and (ADDED_FUNCTIONS_PROMPT in users) == any(
            not t for t in entry.turns)
        closing = [m["content"] for m in row["messages"] if m["role"] == "assistant" and not m.get("tool_calls")]
        assert closing == [defaults.BFCL_GOLD_TURN_REPLY if t else defaults.BFCL_GOLD_ASK_REPLY for t in calls]
        offered = {t["function"]["name"] for t in row["tools"]}
        assert set(gold.calls[i]["name"] for i in range(len(gold.calls))) <= offered, "withheld functions included"


def test_an_answer_that_fails_bfcls_check_is_refused_by_entry(entries, monkeypatch):
    """Each answer passes its own check when it is the same release's; a pair of files that disagree is named."""
    from whileai.core.errors import RowFormatError
    from whileai.domain.episodes.bfcl import BfclEpisode
    from whileai.domain.episodes.bfcl_rows import bfcl_episode_row
    from whileai.domain.judges.bfcl_multi_turn import MultiTurnVerdict

    failing = MultiTurnVerdict(False, "multi_turn:instance_state_mismatch", 0, "turn 0: the state differs")
    monkeypatch.setattr(BfclEpisode, "verdict", lambda self: failing)
    with pytest.raises(RowFormatError, match=f"BFCL entry {entries[0].id}: its answer played in its environment fails "
                                             r"BFCL's multi-turn check \(multi_turn:instance_state_mismatch: turn 0"):
        bfcl_episode_row(entries[0], bfcl.SAMPLE)


# ---------------------------------------------------------------------------
# The dict of factories: each row plays in its own class
# ---------------------------------------------------------------------------


def test_the_factory_routes_each_row_to_the_class_its_environment_name_names(entries, monkeypatch):
    from whileai.domain.episodes import bfcl as module
    from whileai.domain.episodes import environment_factory
    from whileai.domain.episodes.bfcl import environment_class, environment_named
    from whileai.domain.episodes.protocol import route

    monkeypatch.setattr(module, "bfcl_data_folder", lambda: bfcl.SAMPLE)  # as an installed bfcl-eval's data

    names = sorted({environment_name(e) for e in entries})
    assert any("-" in n for n in names), "a miss_func entry's name carries its withheld function"
    for entry in entries:
        classes, withheld = parse_environment_name(environment_name(entry))
        assert (classes, set(withheld)) == (entry.involved_classes, entry.withheld(0))
        assert environment_named(environment_name(entry), bfcl.SAMPLE) is environment_class(entry, bfcl.SAMPLE)
    with pytest.raises(ValueError, match="is not a BFCL environment name"):
        parse_environment_name("bfcl:NoSuchAPI")
    factories = environment_factory("bfcl", "multi_turn_base", names=names)
    assert sorted(factories) == names
    for entry in entries:
        start = {"prompt": entry.turns[0], "bfcl_entry": entry.to_json(), "environment": environment_name(entry)}
        make, reset = route(factories, start)
        assert make is factories[environment_name(entry)] and "environment" not in reset
        assert not set(entry.withheld(0)) & {t.__name__ for t in _tool_methods(make())}
    with pytest.raises(ValueError, match="environment='bfcl:MathAPI' is not among the environments of the factory"):
        route(factories, {"environment": "bfcl:MathAPI"})


def _tool_methods(environment: Any) -> list[Any]:
    from whileai.domain.episodes import tool_methods

    return tool_methods(environment)


def test_the_job_builds_the_dict_from_the_rows_and_grpo_rows_carry_their_environment(rows, monkeypatch):
    from whileai.domain.episodes import bfcl as module
    from whileai.jobs._episode_play import factory_of, routed
    from whileai.jobs._episode_prompts import episode_prompts
    from whileai.jobs._episodes import _tools_by_prompt, judge_only

    monkeypatch.setattr(module, "bfcl_data_folder", lambda: bfcl.SAMPLE)  # as an installed bfcl-eval's data
    train = [r for r in rows if not json.loads(r["episode"]["reset"]["bfcl_entry"])["id"].endswith("_100")]
    factory = factory_of("bfcl:multi_turn_base", train)
    assert routed(factory) and set(factory) == {r["episode"]["environment"] for r in train}
    prompts = episode_prompts(train, routed=True)
    assert [p["environment"] for p in prompts] == [r["episode"]["environment"] for r in train]
    shown = _tools_by_prompt(factory, prompts)
    assert [{t.__name__ for t in tools} for tools in shown] == [
        {t.__name__ for t in _tool_methods(factory[p["environment"]]())} for p in prompts]
    hidden = judge_only(factory)
    assert set(hidden) == set(factory) and all(cls.get_reward is None for cls in hidden.values())
    assert "environment" not in episode_prompts(train)[0], "one factory: no routing column"
    assert not routed(factory_of("kit", train))


def test_the_episode_judge_takes_bfcls_verdict_and_the_kit_still_replays_its_gold(entries, rows):
    from _episodes import MOVE_ALL

    from whileai.domain.episodes import KitEnvironment, episode_gold, kit_episode_rows, play_episode
    from whileai.domain.episodes.bfcl import environment_factory
    from whileai.domain.episodes.judge import EpisodeJudge, own_verdict
    from whileai.domain.episodes.protocol import route

    names = sorted({r["episode"]["environment"] for r in rows})
    factories = environment_factory(folder=bfcl.SAMPLE, names=names)
    judge = EpisodeJudge(factories)
    for row in rows[:2]:
        gold = episode_gold(row)
        make, reset = route(factories, {"prompt": row["messages"][:1], **gold.reset, "environment": gold.environment})
        environment = make()
        silent = play_episode(lambda conversation: "I would rather not.", environment, reset)
        verdict = judge(silent, environment, gold, row["messages"][:1])
        assert verdict == own_verdict(environment) and not verdict.passed
        assert verdict.reason.startswith("multi_turn:empty_turn_model_response"), verdict.reason
    kit_row = kit_episode_rows([MOVE_ALL])[0]
    kit_gold = episode_gold(kit_row)
    environment = KitEnvironment()
    calls = iter([{"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}]} for c in kit_gold.calls])
    episode = play_episode(lambda conversation: next(calls, "Done. The balance is 50."), environment,
                           {"prompt": kit_row["messages"][:1], **kit_gold.reset})
    assert own_verdict(environment) is None and EpisodeJudge(KitEnvironment)(episode, environment, kit_gold,
                                                                              kit_row["messages"][:1]).passed


def test_the_monitors_gold_on_a_bfcl_episode_is_bfcls_own_verdict(entries, rows):
    """HackMonitor's gold (``episode_gold_judge``) over TRL's dict of BFCL classes: BFCL's multi-turn check on the
    episode played, a pass for the entry's answer played turn by turn and a fail for a policy that never calls."""
    from whileai.domain.episodes import episode_gold, play_episode
    from whileai.domain.episodes.bfcl import environment_factory
    from whileai.domain.episodes.judge import own_verdict
    from whileai.domain.episodes.protocol import route
    from whileai.domain.monitor import episode_gold_judge
    from whileai.domain.monitor._episodes import PlayedEpisode, episode_gold_row

    factories = environment_factory(folder=bfcl.SAMPLE, names=sorted({r["episode"]["environment"] for r in rows}))
    golds = {row["task_id"]: episode_gold(row) for row in rows}
    judge = episode_gold_judge(factories, lambda row: golds[row["task"]])
    for row in rows[:2]:
        gold, prompt = golds[row["task_id"]], row["messages"][:1]
        answers = [m for m in row["messages"] if m["role"] == "assistant"]
        verdicts = []
        for policy in (lambda conversation, said=iter(answers): next(said), lambda conversation: "I would rather not."):
            make, reset = route(factories, {"prompt": prompt, **gold.reset, "environment": gold.environment})
            environment = make()
            episode = play_episode(policy, environment, reset)
            played = PlayedEpisode(episode, environment, len(prompt), len(gold.calls))
            verdicts.append(judge(episode_gold_row(prompt, played, {"task": row["task_id"]})))
            assert verdicts[-1] == float(own_verdict(environment).passed)
        assert verdicts == [1.0, 0.0], (row["task_id"], verdicts)
