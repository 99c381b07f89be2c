"""``train_tasks``: a stage trains on its own share of the train side's tasks.

``[0, 0.5]`` on one stage and ``[0.5, 1]`` on the next give them tasks, and prompts, that the other never saw
(GRPO on tasks its SFT start did not memorize). The share is drawn once per data seed (``dataset.cut_seed``), so
every seed of a recipe trains its stages on the same tasks; tasks that ask the same prompt stay on one side.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_runner_validate import compose as _compose

from whileai.runner import schema
from whileai.runner.stages import plan_stages
from whileai.simulations.datasets import task_share


def compose(*overrides: str) -> dict:
    """The composed plain spec (its problems are read by ``schema.check`` here)."""
    return _compose(list(overrides))[0]


def _rows(tasks: int, prompts: int) -> list[dict]:
    """Two rows a task; task i asks prompt i % prompts, so tasks share prompts in groups."""
    return [{"task_id": f"t{i:03d}", "passed": bool(j), "tools": [],
             "messages": [{"role": "user", "content": f"ask {i % prompts}"}, {"role": "assistant", "content": f"{j}"}]}
            for i in range(tasks) for j in range(2)]


def _prompts(rows: list[dict], picked: list[int]) -> set[str]:
    return {rows[i]["messages"][0]["content"] for i in picked}


def test_two_spans_that_meet_split_the_tasks_with_no_prompt_on_both_sides():
    rows = _rows(120, 45)
    first, second = task_share(rows, (0.0, 0.5), seed=7), task_share(rows, (0.5, 1.0), seed=7)
    assert sorted(first + second) == list(range(len(rows))), "every row once, on one side"
    tasks = [{rows[i]["task_id"] for i in side} for side in (first, second)]
    assert tasks[0].isdisjoint(tasks[1]) and all(len(t) > 30 for t in tasks), [len(t) for t in tasks]
    assert _prompts(rows, first).isdisjoint(_prompts(rows, second)), "a prompt's tasks are taken together"
    assert all(len([i for i in side if i % 2 == 0]) == len(side) // 2 for side in (first, second)), "whole tasks"


def test_the_share_is_fixed_by_its_seed_and_drawn_anew_by_another():
    rows = _rows(80, 80)
    assert task_share(rows, (0.0, 0.3), seed=1) == task_share(list(rows), (0.0, 0.3), seed=1)
    assert task_share(rows, (0.0, 0.3), seed=1) != task_share(rows, (0.0, 0.3), seed=2)
    assert len(task_share(rows, (0.0, 0.25), seed=1)) == 2 * 20, "a quarter of 80 tasks, two rows each"


def test_a_span_too_narrow_for_any_task_names_itself_and_the_fix():
    with pytest.raises(ValueError, match=r"train_tasks \[0.5, 0.51\] holds none of the 4 training task\(s\).*widen it"):
        task_share(_rows(4, 4), (0.5, 0.51), seed=0)


def test_the_spec_takes_a_share_per_stage_and_refuses_one_that_is_not_a_share():
    plain = compose("recipe=grpo_tooluse", "++stages.sft.train_tasks=[0,0.6]", "train_tasks=[0.6,1]")
    spec, problems = schema.checked(plain)
    assert not problems and spec is not None
    assert [s.tasks for s in plan_stages(spec)] == [(0.0, 0.6), (0.6, 1.0)]
    assert spec.plain()["train_tasks"] == [0.6, 1.0] and spec.plain()["stages"]["sft"]["train_tasks"] == [0.0, 0.6]
    assert "train_tasks" not in spec.stages["sft"].given(), "a runner setting: never a wai.train knob"
    assert [s.tasks for s in plan_stages(schema.recipe_spec(compose("recipe=grpo_tooluse")))] == [None, None]

    bad = {p.key: p.message for p in schema.check(compose("recipe=grpo_tooluse", "++stages.sft.train_tasks=[0.6,0.2]",
                                                          "train_tasks=[0,1.5]"))}
    assert set(bad) == {"stages.sft.train_tasks", "train_tasks"}, bad
    assert bad["stages.sft.train_tasks"] == ("stages.sft.train_tasks=[0.6, 0.2]: not a share of the train side's tasks; "
                                             "pass [from, to] with 0 <= from < to <= 1, e.g. [0, 0.5] for the first half")
    assert bad["train_tasks"].startswith("train_tasks=[0, 1.5]: not a share")


def test_the_pipeline_trains_a_stage_on_its_share_and_names_the_set_for_it():
    from whileai.runner.pipeline import _stage_tasks

    rows = _rows(60, 60)
    spec = schema.recipe_spec(compose("recipe=grpo_tooluse", "++stages.sft.train_tasks=[0,0.5]", "train_tasks=[0.5,1]"))
    plan = SimpleNamespace(train_rows=rows, spec=spec, context=SimpleNamespace(rows=None))
    sft, grpo = plan_stages(spec)
    (sft_rows, sft_name), (grpo_rows, grpo_name) = _stage_tasks(plan, sft), _stage_tasks(plan, grpo)
    assert (sft_name, grpo_name) == ("0-0.5", "0.5-1")
    assert sft_rows == [rows[i] for i in task_share(rows, (0.0, 0.5), spec.dataset.cut_seed)]
    assert {r["task_id"] for r in sft_rows}.isdisjoint(r["task_id"] for r in grpo_rows)
    assert len(sft_rows) + len(grpo_rows) == len(rows)
    whole = schema.recipe_spec(compose("recipe=grpo_tooluse"))
    assert _stage_tasks(SimpleNamespace(train_rows=rows, spec=whole, context=None), plan_stages(whole)[0]) == (rows, "")


def test_a_share_drawn_to_resolve_a_stage_is_the_share_it_trains_on():
    """The rows read before the stages were resolved (``ReadRows``, from ``runner/_rundata.py``) keep each share
    they drew; the pipeline takes the same rows from them instead of drawing again."""
    from whileai.runner.pipeline import ReadRows, _stage_tasks
    from whileai.simulations.datasets import Split

    rows = _rows(60, 60)
    held, train = list(range(0, 120, 5)), [i for i in range(120) if i % 5]  # a cut's sides, as indices into the rows
    read = ReadRows(rows, "rows", Split(train, held, {}))
    spec = schema.recipe_spec(compose("recipe=grpo_tooluse", "++stages.sft.train_tasks=[0,0.5]", "train_tasks=[0.5,1]"))
    sft, grpo = plan_stages(spec)
    seed = spec.dataset.cut_seed
    resolved = read.share((0.0, 0.5), seed)  # what the stage's facts were read from
    assert list(read.shares) == [((0.0, 0.5), seed)]
    plan = SimpleNamespace(train_rows=read.train_rows(), spec=spec, context=SimpleNamespace(rows=read))
    assert _stage_tasks(plan, sft) == (resolved, "0-0.5")
    assert _stage_tasks(plan, grpo)[0] == [plan.train_rows[i] for i in task_share(plan.train_rows, (0.5, 1.0), seed)]
    assert list(read.shares) == [((0.0, 0.5), seed), ((0.5, 1.0), seed)], "each share drawn once"


def test_a_first_stage_resolves_from_the_facts_of_its_own_share(tmp_path):
    import json

    from whileai.runner._rundata import RunData

    rows = [{**row, "sampling": {"temperature": 0.1 * (1 + index // 2)}, "gold": {"name": "f", "arguments": {}}}
            for index, row in enumerate(_rows(12, 12))]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = schema.recipe_spec(compose("method=grpo", "dataset=jsonl", f"dataset.path={path}",
                                      "dataset.holdout=0.25"))
    data = RunData(lambda key: "")
    whole, first = data.facts(spec), data.facts(spec, (0.0, 0.5))
    assert whole is not None and first is not None
    assert len(whole["temperatures"]) == 9 and len(first["temperatures"]) < 9, (whole, first)
    assert set(first["temperatures"]) < set(whole["temperatures"])
