"""The HackMonitor of GRPO in an environment (whileai/jobs/_episode_watch.py): a python: reward paid in the episode
judge's place is accepted by the spec and validate, trained on, and watched on sampled held-out episodes with the
episode judge as gold; with the judge itself as the reward, only the gold-free alarms are armed. Real GRPO steps on
the kit's tiny model."""

from __future__ import annotations

from typing import Any

import pytest
from test_episodes_jobs import _capture, _rows, _spec
from test_runner_validate import compose

from whileai.core.spec import environment_reward_problems, spec_problems
from whileai.domain.episodes import KitEnvironment
from whileai.domain.monitor import GOLD_CHECKS
from whileai.jobs import _episode_watch, _episodes

CALLS = "python:whileai.simulations.proxy_rewards:calls_made"


def test_a_python_reward_is_accepted_in_an_environment_and_the_built_in_ones_stay_refused():
    assert spec_problems({"method": "grpo", "environment": "kit", "reward": [CALLS]}) == []
    assert environment_reward_problems({"environment": "kit", "reward": [CALLS, CALLS],
                                        "reward_weights": [1.0, 0.5]}) == [], "the user's rewards, weighed"
    assert environment_reward_problems({"environment": "kit", "reward": [CALLS], "turn_reward": "first_action"}) == [
        f"turn_reward=first_action scores calls beside the episode judge, and reward={CALLS} is paid in the judge's "
        "place (environment=kit), so there is no judge for it to sit beside; score the calls inside your reward "
        "function, or leave turn_reward None"]
    for refused in (["fine_grained"], ["rm"], ["first_action", CALLS]):
        problem, = environment_reward_problems({"environment": "kit", "reward": refused})
        assert problem.startswith(f"reward={','.join(refused)} is not read in environment=kit: there the reward is "
                                  "the episode judge")
    _, problems = compose(["recipe=agent_tooluse", f"reward={CALLS}"])
    assert problems == [], [str(p) for p in problems]


def _held() -> list[dict[str, Any]]:
    """Held-out episode rows: the kit's tasks of every kind from another draw than _rows()'s."""
    from whileai.domain.episodes import kit_episode_rows, kit_tasks

    return kit_episode_rows(kit_tasks(8, seed=5))


@pytest.mark.slow
def test_an_episode_run_paid_a_python_reward_is_watched_against_the_episode_judge(tmp_path, home, monkeypatch):
    """Two GRPO steps paid calls_made: the monitor looks at steps 0, 1 and 2 on the held-out episodes (sampled with
    the live policy), logs its points to the run with calls and turns beside length, arms every alarm with the
    episode judge as gold, and that gold agrees with the episode judge TRL pays in a judged run (episode_reward) on
    the very episodes the monitor sampled."""
    import whileai.simulations as wai
    from whileai.jobs import grpo

    spec = _spec("grpo", generations=2, prompts_per_step=2, max_completion_length=96, prompt_source="gold",
                 max_turns=2, truncated="zero", steps=2, reward=[CALLS], holdout_rows=8, temperature=1.0,
                 monitor={"every": 1, "k": 2, "max_new_tokens": 48, "n_boot": 50, "n_perm": 20})
    model, tokenizer = grpo.load(spec)
    watched: list[Any] = []
    _capture(monkeypatch, _episode_watch, "episode_monitor", watched)
    run = wai.training_run(name="episode-monitor")
    _, extra = grpo.fit(spec, model, tokenizer, _rows(), tmp_path, [wai.TrainerCallback(run)], holdout=_held(),
                        run=run)
    monitor, note = watched[0]
    assert extra["reward"] == [CALLS] and extra["monitor"] == note
    assert note.startswith("on episodes: 8 held-out episodes, 2 played at temperature 1.0 every 1 steps; gold judge: "
                           "the episode judge (the reward, python:"), note
    assert "sampled_pass_rate" in extra and "sampled_reward" in extra, "the judge's verdicts tallied beside the pay"
    assert [e["step"] for e in monitor.history] == [0, 1, 2] and not monitor.summary()["errors"]["evaluate"]
    assert all(state == "armed" for kind, state in monitor.armed.items() if kind not in ("kl", "format"))
    assert monitor.summary()["kl"].startswith("skipped: an episode's turns")

    # the gold, on the episodes a look samples, is the verdict TRL's episode judge gives the same rollouts
    judge, verdicts, golds = _episodes.episode_reward(KitEnvironment), [], []
    proxy, gold = monitor.proxy, monitor.gold

    def paid(**kwargs: Any) -> Any:
        verdicts.extend(judge(**kwargs))
        return proxy(**kwargs)

    def judged(row: dict[str, Any]) -> float:
        golds.append(gold(row))
        return golds[-1]

    monitor.proxy, monitor.gold = paid, judged
    entry = monitor.evaluate(step=3, model=model, tokenizer=tokenizer)
    assert golds == verdicts and len(golds) == 16 and entry["gold"] == pytest.approx(sum(golds) / 16)
    assert entry["length_unit"] == "tokens" and entry["calls"] >= 0 and entry["turns"] >= 1

    run.flush()
    record = wai.get_run(run.id)
    logged = {key for point in record["series"] for key in point["metrics"]}
    assert {"monitor/proxy", "monitor/gold", "monitor/gap", "monitor/length", "monitor/calls",
            "monitor/turns"} <= logged
    assert len(record["summary"]["monitor"]["curve"]) == 4, "the three looks of training and the one above"


@pytest.mark.slow
def test_an_episode_run_paid_the_judge_itself_is_watched_by_the_gold_free_alarms(tmp_path, monkeypatch):
    from whileai.jobs import grpo

    spec = _spec("grpo", generations=2, prompts_per_step=2, max_completion_length=64, prompt_source="gold",
                 max_turns=1, truncated="zero", holdout_rows=8, monitor={"every": 1, "k": 2, "max_new_tokens": 32})
    model, tokenizer = grpo.load(spec)
    watched: list[Any] = []
    _capture(monkeypatch, _episode_watch, "episode_monitor", watched)
    _, extra = grpo.fit(spec, model, tokenizer, _rows(), tmp_path, [], holdout=_held())
    monitor, note = watched[0]
    assert monitor.gold is None and [e["step"] for e in monitor.history] == [0, 1]
    assert note.endswith("the alarms that need no gold judge: the reward is the episode judge, the strictest judge "
                         "this run has; to watch another reward against it, train with reward=python:MODULE:FUNCTION "
                         "or turn_reward")
    armed = monitor.summary()["armed"]
    assert armed["length"] == armed["format"] == "armed"
    assert all(armed[kind].startswith("off: the reward is the episode judge") for kind in GOLD_CHECKS)
    off = spec.model_copy(update={"monitor": False})
    assert _episode_watch.episode_monitor(off, None, _held(), None, KitEnvironment) == (
        None, "off (config['monitor'] is False)")
    assert _episode_watch.episode_monitor(spec, None, [], None, KitEnvironment)[1].startswith("off: no held-out")


def test_held_out_episodes_reach_a_paid_reward_as_trl_hands_it_a_rollout():
    """``_episode_play._proxy_scores``: each episode's messages after its prompt, the environment it left, and its
    row's columns as GRPO's dataset holds them (the gold, the task, ``reset``'s arguments)."""
    from whileai.domain.episodes import episode_gold, kit_episode_rows, play_episode
    from whileai.jobs._episode_play import _proxy_scores
    from whileai.jobs._episode_prompts import EPISODE_GOLD_COLUMN
    from whileai.simulations.proxy_rewards import brief_success

    from tests._episodes import MOVE_ALL

    row = kit_episode_rows([MOVE_ALL])[0]
    gold = episode_gold(row)
    prompt = row["messages"][:1]
    replies = [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_balance", "arguments": {"account": "alice"}}}]},
        {"role": "assistant", "content": "Done."}]
    played = []
    for script in (list(replies), replies[1:]):
        environment = KitEnvironment()
        played.append((play_episode(lambda _conversation, s=script: s.pop(0), environment,
                                    {"prompt": prompt, **gold.reset}, max_turns=4), environment))
    seen: list[dict[str, Any]] = []

    def recorded(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
        seen.append({"prompts": prompts, "completions": completions, **kwargs})
        return brief_success(prompts, completions)

    assert _proxy_scores(recorded, [row, row], False, played) == (0.9, 1.0)
    (call,) = seen
    assert call["prompts"] == [prompt] * 2
    assert [[m["role"] for m in c] for c in call["completions"]] == [["assistant", "tool", "assistant"], ["assistant"]]
    assert call["environments"] == [environment for _, environment in played]
    assert call[EPISODE_GOLD_COLUMN] == [gold.to_json()] * 2 and call["task"] == [row["task_id"]] * 2
    assert "environment" not in call, "no route column for one factory"


@pytest.mark.slow
def test_an_episode_run_paid_a_python_reward_measures_it_beside_the_judge_on_the_held_out_episodes():
    """The held-out measure of a run paid the user's reward scores the same greedy episodes by that reward, so the run
    says whether it rose more than the judge's verdicts (``proxy_vs_gold``); a start kept beside an adapter has no such
    scores, so that measure is taken again rather than read back. A run paid the judge keeps the plain measure."""
    from whileai.jobs import grpo
    from whileai.jobs._rewards import proxy_vs_gold

    paid = _spec("grpo", reward=[CALLS], holdout_rows=4, max_turns=2, eval_max_new_tokens=32)
    model, tokenizer = grpo.load(paid)
    measure = grpo.evaluate(paid, model, tokenizer, _held())
    assert measure.prompts == 4 and measure.proxy_scores is not None and len(measure.proxy_scores) == 4
    versus = proxy_vs_gold(measure, measure)
    assert versus is not None and versus["prompts"] == 4 and versus["gap_change"] == 0.0
    judged = _spec("grpo", holdout_rows=4, max_turns=2, eval_max_new_tokens=32)
    assert grpo.evaluate(judged, model, tokenizer, _held()).proxy_scores is None
    assert (grpo.keeps_measure(paid), grpo.keeps_measure(judged)) == (False, True)
