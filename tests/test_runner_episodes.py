"""The runner over episodes: dataset=episodes loads the kit's gold episodes, the cut holds whole tasks out (no
held-out instruction is a training one), every SFT and GRPO stage gets the environment, a spec that could not play
its episodes is refused at validate, and ``python -m whileai run recipe=agent_tooluse`` runs SFT then GRPO in the
kit environment (here each on its own half of the training tasks), measuring held-out episodes like any held-out set.
"""

from __future__ import annotations

import pytest
from test_runner_validate import compose

from _runner_helpers import record, runner_record, runs_file, tiny_base, whileai
from whileai.runner import schema
from whileai.runner.pipeline import load_rows
from whileai.runner.stages import plan_stages, stage_inputs


def _messages(problems: list[schema.Problem]) -> dict[str, str]:
    return {p.key: p.message for p in problems}


def test_the_recipe_validates_and_every_policy_stage_plays_the_environment():
    plain, problems = compose(["recipe=agent_tooluse"])
    assert problems == [], [str(p) for p in problems]
    spec = schema.recipe_spec(plain)
    assert spec.dataset.source == "episodes" and spec.environment.name == "kit"
    configs = [stage_inputs(stage, spec)[1] for stage in plan_stages(spec)]
    assert [c.get("environment") for c in configs] == ["kit", "kit"]
    assert "max_turns" not in configs[0], "no cap given: the job's EPISODE_MAX_TURNS"
    plain, _ = compose(["recipe=agent_tooluse", "environment.max_turns=3"])
    config = stage_inputs(plan_stages(schema.recipe_spec(plain))[0], schema.recipe_spec(plain))[1]
    assert config["max_turns"] == 3


def test_a_spec_that_cannot_play_its_episodes_is_refused_saying_what_to_pick():
    _, problems = compose(["recipe=grpo_tooluse", "environment=kit"])
    said = _messages(problems)
    assert said["dataset.source"].startswith("environment=kit plays episodes reset from each row's episode, and "
                                             "the rows of dataset.source=sample carry none; pick dataset=episodes")
    assert said["prompt_source"].endswith("pass prompt_source=gold")
    _, problems = compose(["recipe=agent_tooluse", "environment=bfcl"])
    assert "dataset=episodes draws the kit environment's tasks" in _messages(problems)["dataset.source"]
    _, problems = compose(["recipe=agent_tooluse", "prompt_source=mixed"])
    assert list(_messages(problems)) == ["prompt_source"]
    _, problems = compose(["recipe=sft_tooluse", "+dataset.episode_tasks=20"])
    assert "dataset.episode_tasks draws the environment's tasks" in _messages(problems)["dataset.episode_tasks"]
    _, problems = compose(["recipe=agent_tooluse", "dataset.episode_tasks=1"])
    assert list(_messages(problems)) == ["dataset.episode_tasks"]


def test_episodes_load_as_rows_and_the_cut_keeps_every_held_out_instruction_unseen(session_home):
    import whileai.simulations as wai

    plain, _ = compose(["recipe=agent_tooluse", "dataset.episode_tasks=300"])
    data = schema.recipe_spec(plain).dataset
    rows, what = load_rows(data)
    assert len(rows) == 300 and "300 tasks" in what and all("episode" in r and r["passed"] for r in rows)
    sides = wai.datasets.cut_rows(rows, data.holdout, data.cut_seed, "episodes")
    held = wai.datasets.load_rows(sides.holdout)
    assert held and {r["task_id"] for r in held}.isdisjoint(r["task_id"] for r in sides.train_rows)
    assert {r["messages"][0]["content"] for r in held}.isdisjoint(r["messages"][0]["content"] for r in sides.train_rows)
    assert held == [r for r in rows if r["task_id"] in {h["task_id"] for h in held}], "pushed and read back whole"


@pytest.mark.slow
def test_the_recipe_runs_sft_then_grpo_in_the_kit_and_measures_held_out_episodes():
    args = ["recipe=agent_tooluse", f"base_model={tiny_base()}", "dataset.episode_tasks=40", "stages.sft.steps=2",
            "stages.sft.holdout_rows=5", "steps=1", "holdout_rows=5", "generations=2", "max_completion_length=160",
            "expect.holdout_gain_significant=null", "stages.sft.train_tasks=[0,0.5]", "train_tasks=[0.5,1]",
            "prompt_filter_pool=null"]  # a 2-step SFT start's episodes all fail: the filter would keep no prompt
    done = whileai("run", *args, token="episodes")
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    runs = runs_file("episodes")["runs"]
    assert [r["method"] for r in runs] == ["sft", "grpo"]
    sft, grpo = (record(r["id"]) for r in runs)
    # each stage on its own half of the training tasks (train_tasks): GRPO plays tasks the SFT stage never saw
    import whileai.simulations as wai

    halves = [{r["task_id"] for r in wai.datasets.load_rows(run["dataset"])} for run in (sft, grpo)]
    assert halves[0] and halves[1] and halves[0].isdisjoint(halves[1]), halves
    assert "(train_tasks 0-0.5 of the train side's tasks)" in done.stderr
    assert "(train_tasks 0.5-1 of the train side's tasks)" in done.stderr
    for run in (sft, grpo):
        training = run["summary"]["training"]
        assert run["config"]["environment"] == "kit" and training["metric"] == "episode_pass_rate"
        assert training["holdout_prompts"] == 5 == len(training["outcomes"]["before"]) == len(training["outcomes"]["after"])
        assert training["stats"]["n"] == 5 and "paired" in training["stats"]
        assert [len(run["summary"]["episodes"][side]) for side in ("before", "after")] == [5, 5]
    assert grpo["summary"]["training"]["before_read_back"] == runs[0]["id"], "the SFT stage's after, not measured again"
    assert grpo["summary"]["training"]["reward"] == ["episode"] and grpo["summary"]["training"]["unit"] == "episodes"
    assert runner_record(runs[1]["id"])["previous_run"] == runs[0]["id"]
    assert "held-out episode_pass_rate" in done.stderr
    diffed = whileai("diff", runs[0]["id"], runs[1]["id"])
    assert diffed.returncode == 0 and "on the same 5 held-out prompts" in diffed.stdout, diffed.stdout + diffed.stderr
