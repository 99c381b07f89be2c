"""The held-out measure (``whileai.jobs._measure.HeldOutMeasure``): what every method's ``evaluate`` answers, kept on
disk as the JSON the measurement always had, and read by the job into the run's summary in the same shape as before.

The real measurements (the kit's tiny model, end to end through a job) are tests/test_jobs.py's,
tests/test_stages.py's, tests/test_resume.py's and tests/test_episode_play.py's; these pin the object and its edges.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from whileai.core.spec import read_spec
from whileai.core.stats import group_results, holdout_result
from whileai.jobs import _measure, body, sft
from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._rewards import proxy_vs_gold
from whileai.jobs.distributed import World


def _record(task_id: str, passed: bool) -> dict:
    return {"task_id": task_id, "passed": passed, "reason": "judged", "turns": 1, "stopped": "answered",
            "messages": [{"role": "user", "content": "move the file"}]}


#: Each measure's JSON as its evaluate wrote it before the measure was typed (and as before.json and held_out.json
#: still hold it), with the object it reads into.
SHAPES = {
    "pass_rate": (
        {"value": 0.5, "prompts": 4, "gold_over_cap": 1, "outcomes": [1, 0, 1, 0], "prompt_digest": "3f2a",
         "groups": ["simple", "multiple", None, "simple"], "proxy_scores": [0.5, 0.25, 1.0, 0.0], "metric": "pass_rate"},
        HeldOutMeasure(metric="pass_rate", value=0.5, prompts=4, gold_over_cap=1, outcomes=(1, 0, 1, 0),
                       prompt_digest="3f2a", groups=("simple", "multiple", None, "simple"),
                       proxy_scores=(0.5, 0.25, 1.0, 0.0)),
    ),
    "no_gold": (
        {"value": None, "prompts": 0, "why": "no held-out row carries a gold first action", "metric": "pass_rate"},
        HeldOutMeasure(metric="pass_rate", value=None, prompts=0, why="no held-out row carries a gold first action"),
    ),
    "loss": (
        {"value": 1.25, "rows": 7, "metric": "loss"},
        HeldOutMeasure(metric="loss", value=1.25, rows=7),
    ),
    "episodes": (
        {"value": 0.5, "prompts": 2, "outcomes": [1, 0], "prompt_digest": "9c01", "metric": "episode_pass_rate",
         "stopped": {"answered": 1, "cap": 1}, "mean_rounds": 1.5, "records": [_record("t1", True), _record("t2", False)],
         "groups": ["base", "base"]},
        HeldOutMeasure(metric="episode_pass_rate", value=0.5, prompts=2, outcomes=(1, 0), prompt_digest="9c01",
                       stopped={"answered": 1, "cap": 1}, mean_rounds=1.5,
                       records=(_record("t1", True), _record("t2", False)), groups=("base", "base")),
    ),
    "rm_pairs": (
        {"metric": "pair_accuracy", "threshold": 0.125, "row_accuracy": 0.75, "reward_span": "first_action",
         "prompts": 2, "rows": 6, "near_misses": {"pairs": 2, "rows": 2, "still_passed": 0, "by_rule": {"value": 2}},
         "value": 0.5, "outcomes": [1, 0], "by_failure": {"near_miss:value": {"right": 1, "pairs": 2}}},
        HeldOutMeasure(metric="pair_accuracy", value=0.5, threshold=0.125, row_accuracy=0.75,
                       reward_span="first_action", prompts=2, rows=6,
                       near_misses={"pairs": 2, "rows": 2, "still_passed": 0, "by_rule": {"value": 2}},
                       outcomes=(1, 0), by_failure={"near_miss:value": {"right": 1, "pairs": 2}}),
    ),
    "rm_rows": (
        {"metric": "row_accuracy", "threshold": 0.5, "row_accuracy": 0.8, "reward_span": "whole", "prompts": 0,
         "rows": 5, "value": 0.8},
        HeldOutMeasure(metric="row_accuracy", value=0.8, threshold=0.5, row_accuracy=0.8, reward_span="whole",
                       prompts=0, rows=5),
    ),
    "read_back": (
        {"value": 0.5, "prompts": 2, "outcomes": [1, 0], "metric": "pass_rate", "prompt_digest": "d",
         "read_back_from": "run_0123"},
        HeldOutMeasure(metric="pass_rate", value=0.5, prompts=2, outcomes=(1, 0), prompt_digest="d",
                       read_back_from="run_0123"),
    ),
}


@pytest.mark.parametrize("name", SHAPES)
def test_the_json_is_the_shape_the_measure_always_had_and_reads_back_whole(name):
    old, measure = SHAPES[name]
    assert HeldOutMeasure.from_json(old) == measure  # a before.json an older job wrote still reads
    assert measure.to_json() == old
    assert json.dumps(measure.to_json(), sort_keys=True) == json.dumps(old, sort_keys=True)
    assert HeldOutMeasure.from_json(json.loads(json.dumps(measure.to_json()))) == measure


def test_every_field_has_its_json_check():
    """Each field is checked by its type, and says in its description what it accepts (a refusal's words)."""
    described = {name: info.description for name, info in HeldOutMeasure.__pydantic_fields__.items()}
    assert list(described) == [field.name for field in dataclasses.fields(HeldOutMeasure)]
    assert all(described.values()) and list(_measure._FIELDS) == list(described)


def test_json_that_is_no_measure_is_refused_naming_each_field_and_what_it_accepts():
    with pytest.raises(ValueError) as refused:
        HeldOutMeasure.from_json({"metric": "accuracy", "value": "half", "outcomes": [1, "0"], "score": 1})
    said = str(refused.value)
    assert "'score' is no field" in said and "value='half' is not a number or null" in said
    assert "metric='accuracy' is not one of pass_rate" in said and "outcomes=[1, '0'] is not a list of 0s and 1s" in said
    with pytest.raises(ValueError, match="value is missing"):
        HeldOutMeasure.from_json({"metric": "pass_rate"})
    with pytest.raises(ValueError, match="a JSON object"):
        HeldOutMeasure.from_json([0.5])
    with pytest.raises(ValueError, match="metric='accuracy' is no held-out metric; accepted: pass_rate, loss"):
        HeldOutMeasure(metric="accuracy", value=0.5)


def _summary(before: HeldOutMeasure | None, after: HeldOutMeasure | None,
             holdout_rows: list[dict] | None = None) -> dict:
    """The run's ``training`` summary the job writes for these measures (a CPU job of one process)."""
    spec = read_spec({"method": "sft", "base_model": "/nowhere/base", "init_from": "run_start"})
    job = body._Job(spec, body.OtherRankRun("run_x"), sft, World(), time.time())
    trained = body._Trained(None, {"steps": 3, "rows": 9}, 1.0, {"lora_rank": 8})
    gates = {"tool_names_mapped": 0, "types_mapped": 0, "refused_rows": 0}
    return body._summary(job, trained, None, before, after, holdout_rows, gates, None)


def test_the_summary_keeps_outcomes_stats_and_groups_as_json_lists():
    before, after = SHAPES["pass_rate"][1], dataclasses.replace(SHAPES["pass_rate"][1], value=0.75, outcomes=(1, 1, 1, 0))
    training = _summary(before, after, [{}] * 9)
    assert json.loads(json.dumps(training)) == training, "no tuple reaches the summary"
    assert (training["before"], training["after"], training["metric"]) == (0.5, 0.75, "pass_rate")
    assert (training["holdout_prompts"], training["holdout_digest"], training["holdout_rows_given"]) == (4, "3f2a", 9)
    assert training["outcomes"] == {"before": [1, 0, 1, 0], "after": [1, 1, 1, 0]}
    assert training["stats"] == holdout_result([1, 0, 1, 0], [1, 1, 1, 0])
    assert training["by_group"] == group_results([1, 0, 1, 0], [1, 1, 1, 0], ["simple", "multiple", None, "simple"],
                                                 "category")
    assert training["reward_vs_exact"] == proxy_vs_gold(before, after)
    assert training["reward_vs_exact"]["exact_after"] == 0.75 and training["reward_vs_exact"]["prompts"] == 4


def test_the_summary_keeps_the_reward_models_cut_and_its_pairs_by_failure():
    before, after = SHAPES["rm_pairs"][1], dataclasses.replace(
        SHAPES["rm_pairs"][1], value=1.0, outcomes=(1, 1), by_failure={"near_miss:value": {"right": 2, "pairs": 2}})
    training = _summary(before, after, [{}] * 6)
    assert training["metric"] == "pair_accuracy" and (training["threshold"], training["threshold_row_accuracy"]) == (
        0.125, 0.75)
    assert training["pairs_by_failure"] == {"before": {"near_miss:value": {"right": 1, "pairs": 2}},
                                            "after": {"near_miss:value": {"right": 2, "pairs": 2}}}
    assert "reward_vs_exact" not in training and "by_group" not in training


def test_the_summary_says_why_nothing_was_measured_and_reads_a_read_back_before():
    why = SHAPES["no_gold"][1]
    training = _summary(why, why, [{}])
    assert training["holdout_note"] == why.why and training["before"] is None and "outcomes" not in training
    training = _summary(SHAPES["read_back"][1], None, [{}])
    assert training["before_read_back"] == "run_0123" and training["after"] is None
    assert training["holdout_prompts"] is None and training["holdout_digest"] == "d"
    loss = _summary(None, SHAPES["loss"][1], [{}])
    assert loss["metric"] == "loss" and "stats" not in loss
    assert _summary(None, None)["metric"] == "pass_rate"


def test_the_summary_lists_its_keys_in_the_order_the_run_has_always_noted_them(monkeypatch):
    """The job's own fields, the trainer's batch, the world, the method's fields (a key the case sets again keeps
    its place), the outcomes and stats, then the case's notes; a resume counts the interrupted jobs' seconds."""
    from whileai.jobs import _environment

    monkeypatch.setattr(_environment, "gpu_name", lambda spec: None)
    spec = read_spec({"method": "sft", "base_model": "/nowhere/base", "init_from": "run_start",
                      "processes": 2, "strategy": "fsdp"})
    job = body._Job(spec, body.OtherRankRun("run_x"), sft, World(size=2), time.time() - 5.0)
    setup = {"base_model": "b", "lora_rank": 8, "lora_alpha": 16, "batch_per_device": 2, "gradient_accumulation": 4,
             "batch_size": 8}
    extra = {"rows": 4, "steps": 2, "pairs": 3, "threshold": None, "threshold_row_accuracy": None, "unit": "pairs"}
    trained = body._Trained(None, extra, 1.0, setup)
    before, after = SHAPES["rm_pairs"][1], dataclasses.replace(
        SHAPES["rm_pairs"][1], value=1.0, outcomes=(1, 1), by_failure={"near_miss:value": {"right": 2, "pairs": 2}})
    gates = {"tool_names_mapped": 0, "types_mapped": {}, "refused_rows": 0}
    resumed = {"earlier_seconds": 10.5, "from_step": 4, "times": 1}
    training = body._summary(job, trained, None, before, after, [{}] * 6, gates, resumed)
    assert list(training) == [
        "method", "base_model", "before", "after", "metric", "holdout", "holdout_prompts", "holdout_digest",
        "holdout_rows_given", "seconds", "train_seconds", "gpu", "device", "compute", "target", "lora_rank",
        "batch_per_device", "gradient_accumulation", "batch_size", "world_size", "processes", "nodes", "strategy",
        "data_gates", "rows", "steps", "pairs", "threshold", "threshold_row_accuracy", "unit", "outcomes", "stats",
        "base_weights", "init_from", "resumed", "job_seconds", "pairs_by_failure", "cost_basis"]
    assert (training["threshold"], training["threshold_row_accuracy"]) == (0.125, 0.75)
    assert training["seconds"] == round(training["job_seconds"] + 10.5, 2) and training["strategy"] == "fsdp"
    assert training["data_gates"] == gates and training["data_gates"] is not gates


def test_the_log_line_counts_what_each_measure_counted():
    counted = {name: body._measured(measure, [{}] * 9) for name, (_, measure) in SHAPES.items()}
    assert counted == {"pass_rate": "4 distinct prompts (of 9 held-out rows)",
                       "no_gold": "0 distinct prompts (of 9 held-out rows)",
                       "loss": "7 rows (of 9 held-out rows)",
                       "episodes": "2 distinct episodes played whole (of 9 held-out rows)",
                       "rm_pairs": "2 pairs of 6 rows (of 9 held-out rows)",
                       "rm_rows": "0 pairs of 5 rows (of 9 held-out rows)",
                       "read_back": "2 distinct prompts (of 9 held-out rows)"}
