"""Held-out episodes (whileai/jobs/_episode_play.py): played whole through the episode loop, many at once with
their replies generated together, judged by the state judge, and summed up in the first-action measurement's shape.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from whileai.core.spec import read_spec
from whileai.domain.episodes import KitEnvironment, kit_episode_rows, kit_tasks
from whileai.domain.episodes.rows import episode_digest, held_out_episodes
from whileai.domain.episodes.kit import KIT_KINDS
from whileai.jobs import _episode_play as play


def _rows(n: int = 60) -> list[dict[str, Any]]:
    tasks = kit_tasks(n)
    return kit_episode_rows([next(t for t in tasks if t.kind == kind) for kind in KIT_KINDS])


def test_plays_run_together_and_each_round_of_requests_is_answered_in_one_call():
    rounds: list[list[Any]] = []

    def respond(requests: list[Any]) -> list[Any]:
        rounds.append(list(requests))
        return [r * 10 for r in requests]

    def counter(turns: int) -> Any:
        return lambda ask: [ask(turns * 100 + i) for i in range(turns)]

    assert play.play_together([counter(1), counter(3), counter(2)], respond) == [
        [1000], [3000, 3010, 3020], [2000, 2010]]
    assert rounds == [[100, 300, 200], [301, 201], [302]], "every live play waits for the same batch"


def test_an_error_in_a_play_or_in_the_generator_is_raised_and_no_thread_is_left():
    def broken(ask: Any) -> Any:
        ask(1)
        raise KeyError("the policy's own bug")

    with pytest.raises(KeyError, match="own bug"):
        play.play_together([broken, lambda ask: [ask(2), ask(3)]], lambda reqs: reqs)

    def failing(requests: list[Any]) -> list[Any]:
        raise RuntimeError("generation failed")

    before = threading.active_count()
    with pytest.raises(RuntimeError, match="generation failed"):
        play.play_together([lambda ask: ask(1)] * 3, failing)
    assert threading.active_count() == before


def test_the_tool_suffix_is_the_one_trl_appends():
    from trl import GRPOTrainer

    from whileai.kit import build_tokenizer

    tokenizer = build_tokenizer(0)
    trainer = SimpleNamespace(processing_class=tokenizer, _tokenizer=tokenizer, chat_template=None, _is_vlm=False,
                              chat_template_kwargs={})
    for messages in ([{"role": "tool", "name": "get_balance", "content": "40"}],
                     [{"role": "tool", "name": "transfer", "content": "{'error': 'no account named x'}"},
                      {"role": "tool", "name": "deposit", "content": "70"}]):
        assert play.tool_suffix_ids(tokenizer, messages) == GRPOTrainer._get_tool_suffix_ids(trainer, messages)


def test_held_out_episodes_are_one_per_task_drawn_with_the_seed():
    rows = _rows()
    assert held_out_episodes(rows + rows, None, 0) == rows, "a task's rows are one episode"
    drawn = held_out_episodes(rows, 3, 0)
    assert len(drawn) == 3 and drawn == held_out_episodes(rows, 3, 0)
    assert episode_digest(drawn) != episode_digest(drawn[::-1])
    assert held_out_episodes([{"messages": [], "gold": {"name": "x"}}], None, 0) == []


def test_a_policy_that_plays_the_gold_passes_every_episode_and_one_that_stops_early_fails():
    rows = _rows()
    factory = play.factory_of("kit")

    def gold_policy(requests: list[Any]) -> list[Any]:
        replies = []
        for row, (_tokens, conversation) in requests:
            said = sum(1 for m in conversation if m["role"] == "assistant")
            replies.append([m for m in row["messages"] if m["role"] == "assistant"][said])
        return replies

    def stops(requests: list[Any]) -> list[Any]:
        return [{"role": "assistant", "content": "Done."} for _ in requests]

    tokenizer = SimpleNamespace()  # the scripted policies read no ids
    for respond, passed in ((gold_policy, True), (stops, False)):
        plays = [_tagged(play._play(factory, play._start_of(row), tokenizer, None), row) for row in rows]
        results = play._judged(factory, rows, play.play_together(plays, respond))
        assert [verdict.passed for _, verdict in results] == [passed] * len(rows)
        assert {episode.stopped for episode, _ in results} == {"answered"}


def _tagged(one: Any, row: dict[str, Any]) -> Any:
    """A play whose requests carry its row, so a scripted policy knows which gold to say (its ``_Tokens`` unread)."""
    return lambda ask: one(lambda request: ask((row, (None, request[1]))))


@pytest.mark.slow
def test_the_measure_has_the_first_action_measures_shape(tmp_path):
    """The kit's tiny untrained model, greedy, on six held-out episodes: each played within the context, outcomes in
    a fixed order, per kind, digest; the same again gives the same outcomes."""
    from whileai.jobs import grpo
    from whileai.kit import tiny_model_dir

    rows = _rows()
    spec = read_spec({"method": "sft", "base_model": str(tiny_model_dir()), "learning_rate": 1e-4, "steps": 1,
                      "environment": "kit", "max_turns": 2, "eval_max_new_tokens": 24, "holdout_rows": 200})
    model, tokenizer = grpo.load(spec)
    first = play.episode_pass_rate(spec, model, tokenizer, rows)
    assert first.metric == play.EPISODE_METRIC and first.prompts == len(rows) == len(first.outcomes)
    assert list(first.groups) == [row["category"] for row in held_out_episodes(rows, 200, spec.seed)]
    assert first.value == sum(first.outcomes) / len(rows) == 0.0, "an untrained model passes nothing"
    assert sum(first.stopped.values()) == len(rows)
    assert [(r["task_id"], r["passed"]) for r in first.records] == [
        (row["task_id"], False) for row in held_out_episodes(rows, 200, spec.seed)]
    assert first == play.episode_pass_rate(spec, model, tokenizer, rows), "greedy: the same outcomes again"
    none = play.episode_pass_rate(read_spec({**spec.model_dump(), "environment": None}), model, tokenizer, rows)
    assert none.value is None and "dataset=episodes" in none.why


def test_the_kit_environment_factory_is_the_kit_class():
    assert play.factory_of("kit") is KitEnvironment


class _Endless:
    """A policy that never ends its turn: every generate call fills all the room it is given with one token."""

    def __init__(self, token: int):
        self.token, self.rooms = token, []

    def parameters(self) -> Any:
        import torch

        yield torch.zeros(1)

    def generate(self, input_ids: Any, max_new_tokens: int, **_: Any) -> Any:
        import torch

        self.rooms.append(max_new_tokens)
        return torch.cat([input_ids, torch.full((input_ids.shape[0], max_new_tokens), self.token)], dim=1)


class _Ids:
    """An episode's ids so far: ``prompt`` of them the first rendering, the rest its completion."""

    def __init__(self, prompt: int, completion: int):
        self.prompt, self.ids, self.tools, self.replies = prompt, [5] * (prompt + completion), [], []

    def before_reply(self, conversation: Any) -> list[int]:
        return self.ids

    def after_reply(self, ids: list[int]) -> None:
        self.replies.append(ids)


def test_with_a_budget_an_episodes_whole_completion_stays_within_it_as_trls_rollout_does():
    """TRL caps a rollout's completion (every reply and tool answer after the prompt) at max_completion_length; the
    start filter plays with that budget: a reply gets what is left of it (at most the per-reply cap), none once it
    is spent, which ends the episode; without a budget only the per-reply cap and the context bound it."""
    from whileai.jobs._trainer_setup import ensure_response_parser
    from whileai.kit import build_tokenizer

    tokenizer = build_tokenizer(0)
    ensure_response_parser(tokenizer)
    token = next(i for i in range(10, 100) if i not in (tokenizer.eos_token_id, tokenizer.pad_token_id))
    model = _Endless(token)
    fresh, half, spent = _Ids(30, 0), _Ids(30, 35), _Ids(30, 40)
    replies = play._replier(model, tokenizer, 16, 512, budget=40)([(fresh, []), (half, []), (spent, [])])
    assert [len(t.replies[0]) for t in (fresh, half)] == [16, 5] and spent.replies == [[]]
    assert replies[2] == {"role": "assistant", "content": ""}, "no room: an empty reply, which ends the episode"
    unbounded = [_Ids(30, 0), _Ids(30, 35), _Ids(30, 40)]
    play._replier(model, tokenizer, 16, 512)([(t, []) for t in unbounded])
    assert [len(t.replies[0]) for t in unbounded] == [16, 16, 16]
    near_context = _Ids(500, 0)
    play._replier(model, tokenizer, 16, 512, budget=40)([(near_context, [])])
    assert len(near_context.replies[0]) == 12, "the model's context still bounds a reply inside the budget"
