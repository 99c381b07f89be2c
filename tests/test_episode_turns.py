"""Per-turn scores of an episode (whileai/domain/episodes/turns.py): the k-th call the rollout made against gold call
k, by the exact first-action judge or ToolRL's fine-grained score, averaged over max(calls made, gold calls); and
the two GRPO knobs that ask for them (turn_reward, turn_reward_weight), read only with an environment, refused
otherwise in the spec and in the runner's schema with the value and the fix. Pure: no training."""

from __future__ import annotations

from typing import Any

import pytest
from _episodes import MOVE_ALL
from test_runner_validate import compose

from whileai.core import defaults as d
from whileai.core.spec import GRPOSpec, environment_reward_problems, knob_of, spec_problems
from whileai.domain.episodes import TurnScores, turn_calls, turn_scores
from whileai.domain.judges.rewards import fine_grained_score

GOLD = MOVE_ALL.gold  # get_balance(alice), then transfer(alice -> bob, 30)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    """An assistant turn making one call, as TRL's loop writes it (arguments parsed)."""
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def _answer(content: str) -> dict[str, Any]:
    return {"role": "tool", "name": "get_balance", "content": content}


READ = _call("get_balance", account="alice")
MOVE = _call("transfer", source="alice", target="bob", amount=30)
REPLY = {"role": "assistant", "content": "Done. The balance is 50."}


@pytest.mark.parametrize("judge", d.TRAIN_TURN_REWARDS)
def test_the_gold_calls_in_order_score_one_each(judge):
    assert turn_scores([READ, _answer("30"), MOVE, _answer("moved"), REPLY], GOLD, judge) == TurnScores(
        scores=(1.0, 1.0), mean=1.0, made=2, wanted=2)


def test_a_wrong_argument_fails_the_exact_judge_and_costs_fine_grained_its_share():
    wrong = _call("transfer", source="alice", target="bob", amount=20)
    messages = [READ, _answer("30"), wrong, REPLY]
    assert turn_scores(messages, GOLD, "first_action").scores == (1.0, 0.0)
    fine = turn_scores(messages, GOLD, "fine_grained")
    want = fine_grained_score(wrong, GOLD[1])["reward"]
    assert fine.scores == (1.0, want) and fine.mean == pytest.approx((1.0 + want) / 2)
    assert want == pytest.approx((1 + 2 + 2 + 2 * 2 / 3) / 7), "format, tool and argument names right, 2 of 3 values"


def test_a_missing_call_scores_zero_at_its_place():
    for judge in d.TRAIN_TURN_REWARDS:
        scores = turn_scores([READ, _answer("30"), REPLY], GOLD, judge)
        assert scores.scores == (1.0, 0.0) and scores.mean == 0.5 and (scores.made, scores.wanted) == (1, 2)


def test_extra_calls_dilute_the_mean_and_a_call_out_of_place_is_judged_where_it_stands():
    again = [READ, _answer("30"), READ, _answer("30"), MOVE, REPLY]  # a second read pushes the transfer to place 3
    assert turn_scores(again, GOLD, "first_action") == TurnScores(scores=(1.0, 0.0, 0.0), mean=pytest.approx(1 / 3),
                                                                  made=3, wanted=2)
    after = turn_scores([READ, MOVE, READ, REPLY], GOLD, "first_action")
    assert after.scores == (1.0, 1.0, 0.0) and after.mean == pytest.approx(2 / 3)
    parallel = {"role": "assistant", "content": "", "tool_calls": READ["tool_calls"] + MOVE["tool_calls"]}
    assert turn_scores([parallel, REPLY], GOLD, "first_action").scores == (1.0, 1.0), "calls counted across a turn"


def test_no_calls_score_zero_and_nothing_asked_nothing_done_scores_one():
    for judge in d.TRAIN_TURN_REWARDS:
        assert turn_scores([REPLY], GOLD, judge) == TurnScores(scores=(0.0, 0.0), mean=0.0, made=0, wanted=2)
        assert turn_scores([], GOLD, judge).mean == 0.0
        assert turn_scores([REPLY], (), judge) == TurnScores(scores=(), mean=1.0, made=0, wanted=0)
        assert turn_scores([READ, REPLY], (), judge) == TurnScores(scores=(0.0,), mean=0.0, made=1, wanted=0)


def test_the_calls_are_read_from_assistant_turns_only_with_text_arguments_parsed():
    text = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_balance", "arguments": '{"account": "alice"}'}}]}
    prompt_like = {"role": "user", "content": "", "tool_calls": MOVE["tool_calls"]}
    assert turn_calls([prompt_like, text, _answer("30")]) == [{"name": "get_balance",
                                                               "arguments": {"account": "alice"}}]
    assert turn_scores([text], GOLD, "first_action").scores == (1.0, 0.0)


def test_an_unknown_judge_is_refused_naming_the_judges():
    with pytest.raises(ValueError, match="judge='rm' is not a per-turn judge; pass one of first_action, fine_grained"):
        turn_scores([READ], GOLD, "rm")


# ---------------------------------------------------------------------------
# The knobs: declared once, read only with an environment
# ---------------------------------------------------------------------------


def test_the_knobs_are_declared_with_their_defaults_choices_and_range():
    turn, weight = knob_of(GRPOSpec, "turn_reward"), knob_of(GRPOSpec, "turn_reward_weight")
    assert turn.default is None and turn.choices == d.TRAIN_TURN_REWARDS and "2504.13958" in turn.source
    assert weight.default == d.TRAIN_TURN_REWARD_WEIGHT and weight.range == d.TRAIN_TURN_REWARD_WEIGHT_RANGE
    assert weight.open_low and weight.reason.startswith("TRAIN_TURN_REWARD_WEIGHT: the episode verdict stays")
    spec = GRPOSpec(environment="kit", turn_reward="fine_grained", turn_reward_weight=0.25)
    assert (spec.turn_reward, spec.turn_reward_weight) == ("fine_grained", 0.25)
    assert GRPOSpec().turn_reward is None and GRPOSpec().turn_reward_weight == d.TRAIN_TURN_REWARD_WEIGHT
    assert any(p.startswith("turn_reward_weight=0") for p in spec_problems(
        {"method": "grpo", "environment": "kit", "turn_reward": "first_action", "turn_reward_weight": 0.0}))
    assert any(p.startswith("turn_reward_weight=2") for p in spec_problems(
        {"method": "grpo", "environment": "kit", "turn_reward": "first_action", "turn_reward_weight": 2.0}))


def test_a_spec_is_refused_where_a_reward_knob_would_not_be_read_every_problem_at_once():
    assert spec_problems({"method": "grpo", "turn_reward": "first_action"}) == [
        "turn_reward=first_action scores an episode's calls against its gold calls, and this spec plays no "
        "environment (environment=None); pick an environment (environment=kit, bfcl or python:MODULE:CLASS), or "
        "leave turn_reward None (single-turn prompts: reward=fine_grained pays the first action's parts)"]
    assert spec_problems({"method": "grpo", "environment": "kit", "reward": ["fine_grained"],
                          "reward_weights": [2.0]}) == [
        "reward=fine_grained is not read in environment=kit: there the reward is the episode judge (the end state "
        "and the final reply), and per-turn scores come from turn_reward; pass turn_reward=fine_grained (weighted "
        "by turn_reward_weight) and leave reward at its default (first_action), or play without an environment",
        "reward_weights=[2.0] is not read in environment=kit: the episode judge weighs 1.0 and turn_reward's score "
        "turn_reward_weight; pass turn_reward_weight=... and leave reward_weights None"]
    assert "pass turn_reward=first_action or fine_grained" in environment_reward_problems(
        {"environment": "kit", "reward": "rm"})[0], "a comma string is read as its list; rm has no per-turn form"
    assert spec_problems({"method": "grpo", "environment": "kit", "turn_reward": "first_action"}) == []
    assert spec_problems({"method": "grpo", "reward": ["fine_grained"]}) == []
    assert environment_reward_problems({"environment": "kit"}) == [], "an SFT spec names no reward"


def test_the_runner_refuses_the_same_at_validate_naming_the_stage_key():
    _, problems = compose(["recipe=grpo_tooluse", "turn_reward=fine_grained"])
    said = {p.key: p.message for p in problems}
    assert said["turn_reward"].startswith("turn_reward=fine_grained scores an episode's calls against its gold")
    _, problems = compose(["recipe=agent_tooluse", "reward=fine_grained", "turn_reward=bogus"])
    said = {p.key: p.message for p in problems}
    assert said["reward"].startswith("reward=fine_grained is not read in environment=kit")
    assert "bogus" in said["turn_reward"] and "scores an episode" not in said["turn_reward"], "refused once, as a value"
    plain, problems = compose(["recipe=agent_tooluse", "turn_reward=fine_grained", "turn_reward_weight=0.25"])
    assert problems == [], [str(p) for p in problems]
    assert (plain["turn_reward"], plain["turn_reward_weight"]) == ("fine_grained", 0.25)


def test_wai_train_names_a_knobs_range_and_the_environments_reward_rule_in_one_refusal():
    """The resolution wai.train runs reports the rule between the reward knobs beside a knob's own range problem,
    not on the next try."""
    from whileai.simulations._resolve import resolve_spec

    problems = resolve_spec("grpo", {"environment": "kit", "reward": ["fine_grained"], "turn_reward": "first_action",
                                     "turn_reward_weight": 0.0}).problems
    assert [p.split(" ", 1)[0] for p in problems] == ["turn_reward_weight=0", "reward=fine_grained"], problems


def test_the_turn_weight_reaches_trls_config_through_the_one_mapping_validate_is_checked_against():
    """The weights TRL sums the episode judge and the per-turn score with come from trainer_config.trl_settings
    (the mapping tests/test_resolved_spec.py holds equal to what validate prints), not from a second place."""
    import trl

    from whileai.jobs.trainer_config import trl_settings

    spec = GRPOSpec(environment="kit", turn_reward="fine_grained", turn_reward_weight=0.25)
    config = trl.GRPOConfig(output_dir="/tmp/unused", use_cpu=True, report_to=[], per_device_train_batch_size=spec.generations,
                            **trl_settings(spec))
    assert config.reward_weights == [1.0, 0.25]
    assert trl_settings(GRPOSpec(environment="kit"))["reward_weights"] is None
    assert trl_settings(GRPOSpec(reward=["first_action", "fine_grained"], reward_weights=[1.0, 0.5]))[
        "reward_weights"] == [1.0, 0.5]


def test_turn_reward_is_refused_where_grpo_plays_only_the_first_of_several_user_turns():
    """BFCL's GRPO rollouts are the entry's first user turn: a per-turn score against every turn's gold would
    count each later turn's calls as missed, so the spec refuses it and says what to do instead."""
    said = environment_reward_problems({"environment": "bfcl:multi_turn_base", "turn_reward": "fine_grained"})
    assert len(said) == 1 and said[0].startswith("turn_reward=fine_grained scores a rollout's calls")
    assert "only the entry's first user turn" in said[0] and "leave turn_reward None" in said[0]
    assert environment_reward_problems({"environment": "bfcl", "turn_reward": "first_action"})
    assert environment_reward_problems({"environment": "kit", "turn_reward": "fine_grained"}) == []
    assert environment_reward_problems({"environment": "bfcl:multi_turn_base", "turn_reward": None}) == []
