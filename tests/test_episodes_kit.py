"""The kit environment, its tasks and split, the episode loop and the state judge; and the kit environment in
TRL's own GRPOTrainer (environment_factory), unchanged.

Policies here are scripted: a list of replies, or a function of the conversation (the gold player reads the
balances the tools returned, as a model would have to).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest

from whileai.domain import defaults
from whileai.domain.episodes import (Episode, KitEnvironment, KitTask, end_state, judge_episode, kit_rows, kit_split,
                                     kit_tasks, play_episode, replay, tool_methods)
from whileai.domain.episodes.kit import KIT_KINDS


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant message with OpenAI-wire tool calls (arguments as JSON text, as a server sends them)."""
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(calls)]}


def _scripted(*replies: Any) -> Any:
    """A policy that says ``replies`` in order (and records each conversation it was shown)."""
    queue = list(replies)
    seen: list[list[dict[str, Any]]] = []

    def policy(messages: list[dict[str, Any]]) -> Any:
        seen.append(messages)
        return queue.pop(0)

    policy.seen = seen  # type: ignore[attr-defined]
    return policy


def _row(kind: str) -> tuple[KitTask, dict[str, Any]]:
    task = next(t for t in kit_tasks(60) if t.kind == kind)
    return task, kit_rows([task])[0]


# ---------------------------------------------------------------------------
# Tasks and split
# ---------------------------------------------------------------------------


def test_tasks_are_seeded_distinct_and_need_two_to_four_calls():
    tasks = kit_tasks()
    assert len(tasks) == defaults.EPISODE_KIT_TASKS == len({t.task_id for t in tasks})
    assert [t.to_json() for t in tasks] == [t.to_json() for t in kit_tasks()]
    assert kit_tasks(seed=1)[0].task_id != tasks[0].task_id
    assert [t.task_id for t in kit_tasks(50)] == [t.task_id for t in tasks[:50]], "more tasks: the same first"
    assert set(Counter(t.kind for t in tasks)) == set(KIT_KINDS)
    assert {len(t.gold) for t in tasks} == {2, 3, 4}
    step, steps = defaults.EPISODE_KIT_BALANCE_STEP, defaults.EPISODE_KIT_BALANCE_STEPS
    for task in tasks:
        assert len(task.balances) == defaults.EPISODE_KIT_ACCOUNTS
        assert all(v % step == 0 and step <= v <= step * steps for v in task.balances.values())
        amounts = [c["arguments"]["amount"] for c in task.gold if "amount" in c["arguments"]]
        assert all(0 < a < 100 for a in amounts) and all(0 <= int(r) < 100 for r in task.responses), task
        assert KitTask.read(task.to_json()) == task


def test_the_split_is_by_task_and_a_held_out_task_never_trains():
    tasks = kit_tasks()
    train, held = kit_split(tasks)
    assert {t.task_id for t in train}.isdisjoint({t.task_id for t in held})
    assert len(train) + len(held) == len(tasks)
    assert abs(len(held) / len(tasks) - defaults.CUT_HOLDOUT) < 0.06
    # each task's side depends on it alone: a larger draw keeps every held-out task held out
    _, held_more = kit_split(kit_tasks(2 * len(tasks)))
    assert {t.task_id for t in held} <= {t.task_id for t in held_more}
    assert {t.task_id for t in kit_split(tasks, seed=1)[1]} != {t.task_id for t in held}
    with pytest.raises(ValueError, match=r"holdout=1.0 must be a share of tasks in \(0, 1\)"):
        kit_split(tasks, holdout=1.0)


def test_rows_carry_the_prompt_and_the_task_reset_reads():
    task, row = _row("sweep")
    assert row["prompt"][-1] == {"role": "user", "content": task.instruction}
    assert set(row) == {"prompt", "kit_task", "task_id"} and KitTask.read(row["kit_task"]) == task


# ---------------------------------------------------------------------------
# The world, its tools and the gold replay
# ---------------------------------------------------------------------------


def test_every_task_s_gold_replays_and_is_the_only_state_get_reward_pays():
    for task, row in zip(kit_tasks(60), kit_rows(kit_tasks(60))):
        gold = replay(KitEnvironment, row, task.gold)
        fresh = KitEnvironment()
        fresh.reset(**row)
        assert end_state(fresh) != gold and fresh.get_reward() == 0.0, task
        for call in task.gold:
            getattr(fresh, call["name"])(**call["arguments"])
        assert end_state(fresh) == gold and fresh.get_reward() == 1.0
        assert set(gold) == {"balances", "closed"}, "the state is the public attributes"


def test_a_broken_gold_is_the_task_s_error():
    _, row = _row("sweep")
    with pytest.raises(ValueError, match=r"gold call 0 \(transfer with .*\) raised ValueError: .*fix the task's gold"):
        replay(KitEnvironment, row, [{"name": "transfer", "arguments": {"source": "nobody", "target": "x",
                                                                        "amount": 10}}])


def test_the_tools_refuse_with_words_the_agent_can_act_on():
    env = KitEnvironment()
    env.reset(kit_task={"task_id": "t", "kind": "sweep", "instruction": "", "balances": {"ann": 30, "bo": 10},
                        "gold": [], "responses": []})
    assert env.get_balance("ann") == 30 and env.deposit("bo", 20) == 30
    with pytest.raises(ValueError, match="no account named 'cy'; the accounts are ann, bo"):
        env.get_balance("cy")
    with pytest.raises(ValueError, match="ann holds 30, less than 40"):
        env.transfer("ann", "bo", 40)
    for bad in (0, -10, True, "10", 2.5):
        with pytest.raises(ValueError, match="amount must be a whole number above 0"):
            env.transfer("ann", "bo", bad)
    with pytest.raises(ValueError, match="ann still holds 30; transfer it out first"):
        env.close_account("ann")
    assert env.transfer("ann", "bo", 30) == "moved 30 from ann to bo" and env.close_account("ann") == "closed ann"
    with pytest.raises(ValueError, match="ann is closed"):
        env.deposit("ann", 10)
    assert end_state(env) == {"balances": {"ann": 0, "bo": 60}, "closed": ["ann"]}
    with pytest.raises(ValueError, match="KitEnvironment.reset needs kit_task .* got a row with prompt"):
        KitEnvironment().reset(prompt=[])


# ---------------------------------------------------------------------------
# The episode loop
# ---------------------------------------------------------------------------


def _gold_player(task: KitTask) -> Any:
    """A policy that makes the task's gold calls one a round, each amount read from what the tools returned (a
    balance it read), then answers with the last tool result."""
    calls = list(task.gold)

    def policy(messages: list[dict[str, Any]]) -> dict[str, Any]:
        last = messages[-1]
        if not calls:
            return {"role": "assistant", "content": f"Done; the balance is {last['content']}."}
        call = calls.pop(0)
        args = dict(call["arguments"])
        if call["name"] == "transfer" and last["role"] == "tool" and last["name"] == "get_balance":
            args["amount"] = int(last["content"])  # read off the tool, not the task
        return _calls((call["name"], args))

    return policy


@pytest.mark.parametrize("kind", sorted(KIT_KINDS))
def test_a_policy_that_plays_the_gold_passes(kind):
    task, row = _row(kind)
    episode = play_episode(_gold_player(task), KitEnvironment(), row)
    assert episode.stopped == "answered" and episode.rounds == len(task.gold)
    verdict = judge_episode(episode, replay(KitEnvironment, row, task.gold), task.responses)
    assert verdict.passed, verdict.reason
    roles = [m["role"] for m in episode.messages]
    assert roles == ["system", "user", *["assistant", "tool"] * len(task.gold), "assistant"]
    assert all(m["tool_call_id"] == "call_0" for m in episode.messages if m["role"] == "tool")


def test_a_raising_tool_becomes_a_tool_message_and_the_episode_goes_on():
    task, row = _row("sweep")
    policy = _scripted(_calls(("transfer", {"source": "nobody", "target": "x", "amount": 10}),
                              ("fly", {"to": "moon"})),
                       {"role": "assistant", "content": "", "tool_calls": [
                           {"type": "function", "function": {"name": "get_balance", "arguments": "{not json"}},
                           {"type": "function", "function": {"name": "get_balance", "arguments": "[1]"}}]},
                       "I could not do it.")
    episode = play_episode(policy, KitEnvironment(), row)
    tools = [m for m in episode.messages if m["role"] == "tool"]
    accounts = ", ".join(sorted(task.balances))
    # TRL's own wording: str({"error": str(exception)}), and "Tool X not found." for a name it does not have
    assert [t["content"] for t in tools[:2]] == [str({"error": f"no account named 'nobody'; the accounts are {accounts}"}),
                                                 str({"error": "Tool fly not found."})]
    assert tools[2]["content"].startswith("{'error': 'Expecting property name")
    assert tools[3]["content"] == str({"error": "the arguments '[1]' are not a JSON object of named arguments"})
    assert episode.stopped == "answered" and episode.rounds == 2 and episode.final_reply == "I could not do it."
    assert episode.end_state["balances"] == task.balances, "nothing the failed calls did stuck"


def test_the_cap_stops_a_runaway_policy_and_its_last_calls_do_not_run():
    task, row = _row("sweep")
    account = sorted(task.balances)[0]
    asked = []

    def runaway(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asked.append(len(messages))
        return _calls(("deposit", {"account": account, "amount": 10}))

    episode = play_episode(runaway, KitEnvironment(), row, max_turns=3)
    assert episode.stopped == "cap" and episode.rounds == 3 and len(asked) == 4
    assert episode.end_state["balances"][account] == task.balances[account] + 30, "the fourth deposit never ran"
    assert episode.messages[-1]["tool_calls"] and episode.messages[-1]["role"] == "assistant"
    default = play_episode(runaway, KitEnvironment(), row)
    assert default.rounds == defaults.EPISODE_MAX_TURNS


def test_reset_s_observation_is_appended_to_the_user_message_as_trl_does():
    class Greeting(KitEnvironment):
        def reset(self, **kwargs: Any) -> str | None:
            super().reset(**kwargs)
            return " (the bank opens at nine)"

    _, row = _row("sweep")
    policy = _scripted("ok")
    play_episode(policy, Greeting(), row)
    (shown,) = policy.seen
    assert shown[-1]["content"] == row["prompt"][-1]["content"] + " (the bank opens at nine)"
    assert row["prompt"][-1]["content"] != shown[-1]["content"], "the row itself is left as it was"


# ---------------------------------------------------------------------------
# The judge
# ---------------------------------------------------------------------------


def _episode(state: dict[str, Any], reply: str) -> Episode:
    return Episode(messages=[{"role": "assistant", "content": reply}], end_state=state, rounds=1, stopped="answered")


def test_the_verdict_names_the_differences_and_the_missing_words():
    gold = {"balances": {"ann": 0, "bo": 40}, "closed": ["ann"]}
    verdict = judge_episode(_episode({"balances": {"ann": 10, "bo": 30}, "closed": []}, "done"), gold, ["0"])
    assert not verdict.passed
    assert verdict.reason == ("the end state differs from the gold replay's: balances['ann'] is 10, gold 0; "
                              "balances['bo'] is 30, gold 40; closed is [], gold ['ann']; the final reply does not "
                              "say '0' (it says 'done')")
    many = {"balances": {name: 1 for name in "abcde"}, "closed": []}
    assert judge_episode(_episode(many, ""), {"balances": {}, "closed": []}).reason.endswith("(and 2 more)")
    assert judge_episode(_episode(gold, "ann now holds 0."), gold, ["0"]).passed


@pytest.mark.parametrize("reply, says", [("It is 30.", True), ("30", True), ("balance: 30 dollars", True),
                                         ("It is 130.", False), ("It is 3.0", False), ("300", False)])
def test_a_response_is_said_as_a_whole_number(reply, says):
    state = {"balances": {}}
    assert judge_episode(_episode(state, reply), state, ["30"]).passed is says


def test_pay_and_report_needs_the_balance_in_the_reply():
    task, row = _row("pay_and_report")
    gold = replay(KitEnvironment, row, task.gold)
    silent = play_episode(_scripted(_calls(*[(c["name"], c["arguments"]) for c in task.gold]), "Done."),
                          KitEnvironment(), row)
    verdict = judge_episode(silent, gold, task.responses)
    assert not verdict.passed and re.search(r"does not say '\d+'", verdict.reason)
    env = KitEnvironment()
    env.reset(**row)
    assert play_episode(_gold_player(task), env, row).stopped == "answered" and env.get_reward() == 1.0


# ---------------------------------------------------------------------------
# TRL
# ---------------------------------------------------------------------------


def test_the_kit_template_renders_the_environment_s_tools_as_trl_passes_them():
    """TRL hands the environment's bound methods to apply_chat_template(tools=...), which reads their schemas."""
    from whileai.kit import build_tokenizer

    tokenizer = build_tokenizer(0)
    _, row = _row("merge")
    text = tokenizer.apply_chat_template(row["prompt"], tools=tool_methods(KitEnvironment()), tokenize=False,
                                         add_generation_prompt=True)
    assert "- transfer(source: string, target: string, amount: integer) - Move money from one account to another." \
        in text
    assert "- get_balance(account: string) - Read the balance of an account." in text


@pytest.mark.slow
def test_trl_s_grpo_trainer_takes_the_kit_environment_unchanged(tmp_path, monkeypatch):
    """A real GRPOTrainer on the kit's tiny model: it probes the class, offers its four tools, resets one
    instance per rollout with the row's columns, and scores with get_reward (its only reward)."""
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from whileai.kit import build_tokenizer
    from whileai.kit._model import tiny_model

    resets: list[list[str]] = []

    class Counted(KitEnvironment):
        def reset(self, **kwargs: Any) -> str | None:
            resets.append(sorted(kwargs))
            return super().reset(**kwargs)

    tokenizer = build_tokenizer(0)
    tokenizer.response_template = qwen3_template  # the kit's template writes ChatML and <tool_call>{json}</tool_call>
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=8, max_tool_calling_iterations=2, report_to=[], use_cpu=True,
                      save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=tiny_model(tokenizer, num_hidden_layers=1), args=args, processing_class=tokenizer,
                          train_dataset=Dataset.from_list(kit_rows(kit_tasks(4))), environment_factory=Counted)
    assert [t.__name__ for t in trainer.tools] == ["close_account", "deposit", "get_balance", "transfer"]
    assert trainer.reward_func_names == ["Counted"]
    trainer.train()
    assert resets and all(r == ["kit_task", "prompt", "task_id"] for r in resets)
    logged = trainer.state.log_history[0]
    assert logged["rewards/Counted/mean"] == 0.0 and "tools/failure_frequency" in logged
