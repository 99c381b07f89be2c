"""GRPO's reward knob: the values it takes, what each pays, the refusals of a bad ``python:`` reward, a shared
server's rule for user code, and a real GRPO job on the kit for every reward value, recorded on the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from whileai.simulations._resolve import resolve_spec
from whileai.domain.judges.rewards import fine_grained_score, python_reward_problems, reward_strength
from whileai.kit._base import tiny_model_dir

ROOT = Path(__file__).resolve().parents[1]
GOLD = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}


def _turn(*calls: tuple[str, dict]) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"function": {"name": n, "arguments": a}} for n, a in calls]}


# ---------------------------------------------------------------------------
# fine_grained: ToolRL's terms, scaled to [0, 1]
# ---------------------------------------------------------------------------


def test_fine_grained_pays_each_term_and_full_marks_only_for_the_gold_call():
    assert fine_grained_score(_turn(("get_weather", {"city": "Paris", "unit": "celsius"})), GOLD)["reward"] == 1.0
    wrong_value = fine_grained_score(_turn(("get_weather", {"city": "Rome", "unit": "celsius"})), GOLD)
    assert wrong_value["terms"] == {"format": 1.0, "tool_name": 1.0, "argument_names": 1.0, "argument_values": 0.5}
    assert wrong_value["reward"] == pytest.approx((1 + 2 + 2 + 1) / 7)
    missing = fine_grained_score(_turn(("get_weather", {"city": "Paris"})), GOLD)["terms"]
    assert missing["argument_names"] == 0.5 and missing["argument_values"] == 0.5
    wrong_tool = fine_grained_score(_turn(("get_time", {"city": "Paris"})), GOLD)
    assert wrong_tool["terms"]["tool_name"] == 0.0 and wrong_tool["terms"]["argument_values"] == 0.0
    assert wrong_tool["reward"] == pytest.approx(1 / 7)  # the format alone
    assert fine_grained_score({"role": "assistant", "content": "It is sunny."}, GOLD)["reward"] == 0.0
    unparsed = fine_grained_score(_turn(("get_weather", {"city": "Paris", "unit": "celsius"})), GOLD, formatted=False)
    assert unparsed["reward"] == pytest.approx(6 / 7)


def test_fine_grained_reads_every_gold_form():
    parallel = {"parallel": [{"name": "get_time", "arguments": {"city": "Oslo"}},
                             {"name": "get_time", "arguments": {"city": "Lima"}}]}
    half = fine_grained_score(_turn(("get_time", {"city": "Oslo"})), parallel)["terms"]
    assert half["argument_values"] == 0.5 and half["tool_name"] == 1.0
    values = {"name": "set_timer", "arguments": {"minutes": 5}, "values": {"minutes": [5, 300]}, "match": "bfcl"}
    assert fine_grained_score(_turn(("set_timer", {"minutes": 300})), values)["reward"] == 1.0
    answer = {"answer": "I cannot book flights."}
    assert fine_grained_score({"role": "assistant", "content": "I cannot book flights."}, answer)["reward"] == 1.0
    assert fine_grained_score(_turn(("book", {})), answer)["reward"] == 0.0
    no_call = {"no_call": True, "match": "bfcl"}  # BFCL's irrelevance: full marks only without a call
    assert fine_grained_score({"role": "assistant", "content": "None of these fit."}, no_call)["reward"] == 1.0
    assert fine_grained_score(_turn(("book", {})), no_call)["reward"] == 0.0


# ---------------------------------------------------------------------------
# The knob and its cross-checks
# ---------------------------------------------------------------------------


def test_reward_knob_values_and_cross_checks():
    ok = resolve_spec("grpo", {"reward": ["first_action", "fine_grained"], "reward_weights": "1, 0.5"})
    assert ok.problems == [] and ok.spec.reward == ["first_action", "fine_grained"]
    assert ok.spec.reward_weights == [1.0, 0.5]
    assert resolve_spec("grpo", {}).spec.reward == ["first_action"]  # the default: recipes unchanged
    problems = resolve_spec("grpo", {"reward": "exact", "reward_weights": [1, "x"], "reward_model": "../x"}).problems
    assert any("'exact' not accepted" in p and "python:MODULE:FUNCTION" in p for p in problems), problems
    assert any("reward_weights" in p and "'x'" in p for p in problems), problems
    assert any("reward_model='../x' is not a run id or stages.NAME" in p for p in problems), problems
    assert resolve_spec("grpo", {"reward": "rm"}).problems == [
        "reward=rm needs reward_model: the id of a finished rm run of this account, or stages.NAME for an rm stage "
        "of the recipe; pass reward_model=..."]
    assert "has 1 weight(s) for 2 reward(s)" in resolve_spec(
        "grpo", {"reward": "first_action,fine_grained", "reward_weights": [1.0]}).problems[0]
    assert "read only when reward includes rm" in resolve_spec("grpo", {"reward_model": "stages.proxy"}).problems[0]
    assert "does not apply to sft" in resolve_spec("sft", {"reward": "rm"}).problems[0]
    assert reward_strength(["first_action"]) == "exact"
    assert reward_strength(["first_action", "fine_grained"]) == reward_strength(["rm"]) == "weaker"


BAD_REWARDS = textwrap.dedent('''
    import math

    def good(prompts, completions, **kwargs):
        return [0.5 for _ in completions]

    def no_kwargs(prompts, completions):
        return [0.0 for _ in completions]

    def one_value(prompts, completions, **kwargs):
        return [1.0]

    def not_finite(prompts, completions, **kwargs):
        return [math.nan for _ in completions]
''')


def test_a_good_python_reward_passes_the_check(tmp_path):
    (tmp_path / "my_rewards.py").write_text(BAD_REWARDS)
    assert python_reward_problems("python:my_rewards:good", search_path=str(tmp_path)) == []


def test_every_bad_python_reward_exits_2_with_its_fix(tmp_path):
    (tmp_path / "my_rewards.py").write_text(BAD_REWARDS)
    rewards = ["python:no_such_module:f", "python:my_rewards:no_kwargs", "python:my_rewards:one_value",
               "python:my_rewards:not_finite", "python:my_rewards:missing"]
    env = {**os.environ, "WHILEAI_HOME": str(tmp_path / "home"), "PYTHONPATH": str(tmp_path)}
    env.pop("WHILEAI_RUNNER_TOKEN", None)
    done = subprocess.run([sys.executable, "-m", "whileai", "validate", "recipe=grpo_tooluse",
                           f"reward=[{','.join(rewards)}]"], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "module 'no_such_module' does not import" in said and "make it importable" in said
    assert "does not take **kwargs" in said and "def no_kwargs(prompts, completions, **kwargs)" in said
    assert "returned 1 value(s) for 2 completions" in said and "exactly one number per completion" in said
    assert "not_finite" in said and "which is not a finite number" in said
    assert "has no function 'missing'" in said
    assert not (tmp_path / "home" / "whileai.db").exists()  # refused before any store or run exists


# ---------------------------------------------------------------------------
# A shared server runs only the modules its operator allows
# ---------------------------------------------------------------------------


def test_a_shared_server_refuses_a_reward_module_it_does_not_allow(monkeypatch):
    from whileai.core.spec import GRPOSpec
    from whileai.platform._rewards import reward_code_problems, reward_path
    from whileai.core import defaults as core_defaults

    spec = GRPOSpec(reward=["first_action", "python:team.rewards.tool_use:score"])
    monkeypatch.delenv(core_defaults.REWARD_MODULES_ENV, raising=False)
    refused = reward_code_problems(spec, embedded=False)
    assert len(refused) == 1 and "now: none" in refused[0] and core_defaults.REWARD_MODULES_ENV in refused[0]
    monkeypatch.setenv(core_defaults.REWARD_MODULES_ENV, "team.rewards")  # a package and everything under it
    assert reward_code_problems(spec, embedded=False) == []
    monkeypatch.setenv(core_defaults.REWARD_MODULES_ENV, "team.rewardsx,other")
    assert reward_code_problems(spec, embedded=False)  # a prefix of a name is not the package
    assert reward_code_problems(spec, embedded=True) == []  # the local user's own platform runs their module
    assert reward_path(spec, embedded=True) == os.getcwd()
    assert reward_path(spec, embedded=False) is None


@pytest.mark.slow
def test_the_launch_route_of_a_real_server_refuses_an_unallowed_module(tmp_path):
    """Through a real ``python -m whileai platform`` server on loopback: 422 naming the setting, and the run failed."""
    import httpx

    from whileai.core import defaults as core_defaults
    from _platform_server import platform_process

    home = tmp_path / "home"
    with platform_process(home, tmp_path / "server.out", unset=(core_defaults.REWARD_MODULES_ENV,)) as (_, url):
        base = f"{url}/api/v1"
        headers = {"Authorization": f"Bearer {(home / 'local_key').read_text().strip()}"}
        data = httpx.post(f"{base}/datasets", headers=headers, timeout=30,
                          json={"name": "d", "rows": [{"messages": [{"role": "user", "content": "hi"}]}]}).json()
        run = httpx.post(f"{base}/runs", json={"name": "r"}, headers=headers, timeout=30).json()
        values = dict(resolve_spec("grpo", {}).values)
        values.pop("provenance", None)
        spec = {**values, "reward": ["python:evil:f"], "run_id": run["id"], "dataset": data["id"]}
        answer = httpx.post(f"{base}/jobs/launch", headers=headers, timeout=30,
                            json={"run_id": run["id"], "kind": "grpo", "target": "local", "spec": spec})
        assert answer.status_code == 422, answer.text
        assert core_defaults.REWARD_MODULES_ENV in answer.text and "python:evil:f" in answer.text
        assert httpx.get(f"{base}/jobs", headers=headers, timeout=30).json().get("jobs") in ([], None)


# ---------------------------------------------------------------------------
# Every reward value trains on the kit and lands on the run
# ---------------------------------------------------------------------------

USER_REWARD = textwrap.dedent('''
    def short(prompts, completions, **kwargs):
        """Pays for short replies."""
        return [1.0 / (1 + len(str(c))) for c in completions]
''')


def test_a_graded_rewards_run_logs_the_exact_judges_pass_rate_not_the_rewards_mean():
    from whileai.jobs._grpo_watch import group_watch
    from whileai.jobs._rewards import first_action_reward, tallied

    row_gold = json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}})
    right = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}</tool_call>'
    wrong = '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome", "unit": "celsius"}}</tool_call>'
    tally: list[float] = []
    paid = tallied(lambda prompts, completions, **_: [0.9, 0.6], first_action_reward("keep", set()), tally)
    prompts = [[{"role": "user", "content": "Weather in Paris?"}]] * 2
    assert paid(prompts=prompts, completions=[right, wrong], gold=[row_gold] * 2) == [0.9, 0.6]  # paid as it was
    assert tally == [1.0, 0.0]  # the exact judge's verdicts on the same completions
    watch = group_watch(tally=tally)
    logs = {"reward": 0.75, "frac_reward_zero_std": 0.5}
    watch.on_log(None, None, None, logs=logs)
    assert logs["sampled_pass_rate"] == 0.5 and logs["sampled_reward"] == 0.75 and tally == []
    assert watch.summary()["sampled_reward"]["mean"] == 0.75 and watch.summary()["sampled_pass_rate"]["mean"] == 0.5
    among = group_watch("rewards/first_action/mean")  # first_action among the paid rewards: its own column
    logs = {"reward": 0.8, "frac_reward_zero_std": 0.0, "rewards/first_action/mean": 0.25}
    among.on_log(None, None, None, logs=logs)
    assert (logs["sampled_pass_rate"], logs["sampled_reward"]) == (0.25, 0.8)
    exact = group_watch()  # the exact judge alone: its reward is the pass rate
    logs = {"reward": 0.5, "frac_reward_zero_std": 0.0}
    exact.on_log(None, None, None, logs=logs)
    assert logs["sampled_pass_rate"] == 0.5 and "sampled_reward" not in logs

    import asyncio
    import inspect

    async def graded(prompts, completions, **_):  # a user's async reward stays async, and is tallied the same
        return [0.5] * len(completions)

    watched = tallied(graded, first_action_reward("keep", set()), tally)
    assert inspect.iscoroutinefunction(watched) and watched.__name__ == "graded"
    assert asyncio.run(watched(prompts=prompts, completions=[right, wrong], gold=[row_gold] * 2)) == [0.5, 0.5]
    assert tally == [1.0, 0.0]
    tally.clear()
    # rows without a gold column: the judge fails, the reward is still paid and the step goes on, untallied
    assert paid(prompts=prompts, completions=[right, wrong]) == [0.9, 0.6] and tally == []
    logs = {"reward": 0.75, "frac_reward_zero_std": 0.5}
    watch.on_log(None, None, None, logs=logs)  # a step without a verdict still counts its groups, and claims no rate
    assert logs["mixed_groups"] == 0.5 and "sampled_pass_rate" not in logs and logs["sampled_reward"] == 0.75
    assert watch.summary()["sampled_pass_rate"]["mean"] == 0.5  # the judged step's rate alone


@pytest.mark.slow
def test_every_reward_value_trains_grpo_on_the_kit_and_is_recorded(home, push_sample, tmp_path, monkeypatch):
    import whileai.simulations as wai

    (tmp_path / "user_rewards.py").write_text(USER_REWARD)
    monkeypatch.chdir(tmp_path)  # the user's own module, beside where they run (the embedded platform's rule)
    data = push_sample("rewards", tasks=24)
    base = str(tiny_model_dir())  # plumbing, not learning: the random tiny model, not a fresh root's pre-training
    judge = wai.train(data["train"], method="rm", steps=2, holdout=data["holdout"], wait=True, base_model=base,
                      config={"reward_span": "first_action", "holdout_rows": 8})
    assert judge.status == "done", judge.error
    rewards = ["first_action", "fine_grained", "rm", "python:user_rewards:short"]
    run = wai.train(data["train"], method="grpo", steps=2, holdout=data["holdout"], wait=True, base_model=base,
                    reward=rewards, reward_weights=[1.0, 0.5, 0.5, 0.25], reward_model=judge,
                    config={"holdout_rows": 8, "monitor": {"every": 1, "n_prompts": 8, "k": 2}})
    assert run.status == "done", run.error
    assert run.config["reward"] == rewards and run.config["reward_weights"] == [1.0, 0.5, 0.5, 0.25]
    assert run.config["reward_model"] == judge.id
    training = run.training
    assert training["reward"] == rewards and training["reward_weights"] == [1.0, 0.5, 0.5, 0.25]
    versus = training["reward_vs_exact"]  # measured beside the exact judge on the same held-out prompts
    assert versus["prompts"] == training["holdout_prompts"] and 0.0 <= versus["p"] <= 1.0
    from whileai.domain.client import get_client

    series = get_client().request("GET", f"/runs/{run.id}")["series"]
    names = {key for point in series for key in point.get("metrics", {})}
    for name in ("first_action", "fine_grained", "reward_model", "short"):
        assert f"rewards/{name}/mean" in names, sorted(n for n in names if n.startswith("rewards/"))
    steps = [p["metrics"] for p in series if "mixed_groups" in p["metrics"]]
    assert steps and all(m["sampled_pass_rate"] == m["rewards/first_action/mean"] and "sampled_reward" in m
                         for m in steps), steps  # the exact judge's column, not the weighted sum's mean
    monitor = run.summary["monitor"]
    assert monitor["armed"]["divergence"] == "armed"  # gold: the exact judge, stronger than this reward
    assert "exact first-action judge" in training["monitor"]


@pytest.mark.slow
def test_an_exact_reward_arms_only_the_gold_free_alarms_and_says_why(home, push_sample):
    import whileai.simulations as wai

    data = push_sample("exact-reward", tasks=24)
    run = wai.train(data["train"], method="grpo", steps=2, holdout=data["holdout"], wait=True,
                    base_model=str(tiny_model_dir()), config={"holdout_rows": 8, "monitor": {"every": 1, "n_prompts": 8, "k": 2}})
    assert run.status == "done", run.error
    armed = run.summary["monitor"]["armed"]
    for kind in ("divergence", "gold_decline", "feature"):
        assert armed[kind].startswith("off: the reward is the exact first-action judge"), armed
    assert armed["length"] == "armed"
    assert "reward_vs_exact" not in run.training
    assert json.dumps(run.config["reward"]) == '["first_action"]'


def test_the_docs_worked_reward_validates_and_the_check_passes_the_types_the_trainer_does(tmp_path):
    """docs/examples/my_rewards.py is the README's worked example: validate imports it and calls it on two sample rows
    with the columns as GRPO's dataset holds them (gold and the row's tools as JSON text), the types its docstring
    gives."""
    root = Path(__file__).resolve().parents[1]
    examples = root / "docs" / "examples"
    (tmp_path / "typed.py").write_text(
        "import json\n"
        "def typed(prompts, completions, completion_ids=None, gold=None, task=None, row_tools=None, **kwargs):\n"
        "    assert all(isinstance(p, list) and isinstance(p[-1], dict) for p in prompts), prompts\n"
        "    assert all(c[0]['role'] == 'assistant' and isinstance(c[0]['content'], str) for c in completions)\n"
        "    assert all(isinstance(json.loads(g), dict) for g in gold), gold\n"
        "    assert all(isinstance(t, str) for t in task), task\n"
        "    assert all(isinstance(json.loads(t), list) for t in row_tools), row_tools\n"
        "    return [0.0] * len(completions)\n")
    assert python_reward_problems("python:typed:typed", search_path=str(tmp_path)) == []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(examples), os.environ.get("PYTHONPATH")) if p),
           "WHILEAI_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "whileai", "validate", "recipe=grpo_tooluse",
                           "reward=python:my_rewards:brevity"], capture_output=True, text=True, env=env, cwd=root,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "python:my_rewards:brevity" in done.stdout
