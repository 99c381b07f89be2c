"""A run validates each spec once per trust boundary: the runner's process resolves each stage once and carries it.

``python -m whileai run recipe=grpo_tooluse`` (an SFT stage, then GRPO from its adapter) and a single-stage GRPO run
(``recipe=none method=grpo``) are each run in a process of their own whose spec models count the validations made
on its main thread (the embedded platform's launch route, the server's own boundary, answers on another thread and
is not counted). The jobs are replaced by a stub that finishes each run at once with an adapter folder, so nothing
trains: what is counted is everything up to each submit.

The pinned count, for the client's process:

- the recipe (the runner's schema): once;
- each stage's run spec: once when the runner resolves it (before anything trains; a GRPO stage that starts from no
  other reads its group size and temperature from the run's rows first, ``runner/_rundata.py``). Its submit sends
  it as it is, with what only the submit knows (the held-out set, the runner's record, each checked by its own type)
  written beside it at the JSON edge (``simulations/_sent.py``);
- once more only where the submit fills in what a rule of the spec reads: the GRPO stage's start run (its base and
  LoRA shape come from the SFT stage's adapter, and the dataset gives its group size and temperature).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _runner_helpers import ROOT

#: Runs the runner with every spec model's validator wrapped in a counter and the local job launch stubbed out.
_SCRIPT = '''
import collections, json, sys, threading

from whileai.core.paths import adapter_dir
from whileai.core.spec import SPEC_MODELS
from whileai.platform.launcher import jobs
from whileai.runner import schema
from whileai.runner.cli import run_main
from whileai.runner.reproduce import reproduce_main

counts = collections.Counter()


class Counting:
    """A model's validator that counts its calls on the main thread (the runner's own)."""

    def __init__(self, inner, name):
        self._inner, self._name = inner, name

    def _count(self):
        if threading.current_thread() is threading.main_thread():
            counts[self._name] += 1

    def validate_python(self, *args, **kwargs):
        self._count()
        return self._inner.validate_python(*args, **kwargs)

    def validate_json(self, *args, **kwargs):
        self._count()
        return self._inner.validate_json(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


for model in (*SPEC_MODELS.values(), schema._RECIPE_MODEL):
    model.__pydantic_validator__ = Counting(model.__pydantic_validator__, model.__name__)
launched = []

import whileai.simulations.datasets as datasets

draws = collections.Counter()


def counted(name):
    """``datasets.NAME`` with each call counted: ``split`` is the cut's draw by task, ``task_share`` a stage's
    ``train_tasks`` share of the train side."""
    inner = getattr(datasets, name)

    def draw(*args, **kwargs):
        draws[name] += 1
        return inner(*args, **kwargs)

    setattr(datasets, name, draw)


counted("split")
counted("task_share")


def finished_at_once(store, account_id, job):
    """The job as if it had trained: its run done, with an adapter folder the next stage can start from."""
    launched.append(job["spec"])
    folder = adapter_dir(job["run_id"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text("{}")
    store.update_run(account_id, job["run_id"], {"status": "done", "summary": {
        "adapter": str(folder), "training": {"metric": "pass_rate", "before": 0.0, "after": 0.0}}})
    return store.update_job(account_id, job["id"], {"status": "done"})


jobs._launch_local = finished_at_once
try:
    code = (reproduce_main(sys.argv[2:]) if sys.argv[1:2] == ["reproduce"] else run_main(sys.argv[1:]))
except SystemExit as exc:
    code = exc.code
print(json.dumps({"exit": code, "counts": dict(counts), "launched": launched, "cuts": draws["split"],
                  "shares": draws["task_share"]}, default=str))
'''

#: the recipe's two stages on a few tasks of the shipped sample, its expect lines about learning set aside
_ARGS = ["recipe=grpo_tooluse", "dataset.sample_tasks=null", "dataset.tasks=24", "holdout_rows=4",
         "stages.sft.holdout_rows=4", "expect.stage_gain_min=null", "expect.holdout_gain_significant=null",
         "expect.no_alarm=null"]


#: GRPO alone on the same few tasks, every knob left to its resolution (the group size and temperature the data's)
_SINGLE_ARGS = ["recipe=none", "method=grpo", "dataset.tasks=24", "holdout_rows=4"]


def _counted_run(home: Path, tmp_path: Path, args: list[str]) -> dict:
    script = tmp_path / "counted_run.py"
    script.write_text(_SCRIPT)
    env = {**os.environ, "WHILEAI_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    env.pop("WHILEAI_RUNNER_TOKEN", None)
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0 and done.stdout.strip(), done.stdout + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_staged_grpo_run_validates_each_spec_once_and_once_more_where_its_start_run_is_filled_in(home, tmp_path):
    found = _counted_run(home, tmp_path, _ARGS)
    assert found["exit"] == 0, found
    assert found["counts"] == {"RecipeSpec": 1, "SFTSpec": 1, "GRPOSpec": 2}, found["counts"]
    assert found["cuts"] == 1, "the rows are cut by task once"
    sft, grpo = found["launched"]
    assert (sft["method"], grpo["method"]) == ("sft", "grpo")
    # what the submit filled in: the held-out set, the stage it continues, the dataset's facts, the runner's record
    assert sft["holdout"] and grpo["holdout"] == sft["holdout"]
    assert "init_from" not in sft and grpo["init_from"] == sft["run_id"]
    assert grpo["provenance"]["temperature"].startswith("the rows' own sampling.temperature")
    assert grpo["provenance"]["lora_rank"] == f"inherited from {sft['run_id']} (its adapter's shape)"
    assert grpo["runner"]["stage"] == "grpo" and grpo["runner"]["previous_run"] == sft["run_id"]
    # the values the runner resolved are the values the job got
    assert (grpo["generations"], grpo["beta"], grpo["steps"], grpo["holdout_rows"]) == (4, 0.04, 120, 4)
    assert (sft["steps"], sft["holdout_rows"], sft["lora_rank"]) == (80, 4, grpo["lora_rank"])


def test_a_single_stage_grpo_run_validates_its_spec_once_with_the_datasets_group_size_and_temperature(home, tmp_path):
    """No stage before it: the runner reads the group size and temperature from its own cut of the rows before it
    resolves the stage, so the submit fills in nothing and sends the spec as it is."""
    found = _counted_run(home, tmp_path, _SINGLE_ARGS)
    assert found["exit"] == 0, found
    assert found["counts"] == {"RecipeSpec": 1, "GRPOSpec": 1}, found["counts"]
    assert found["cuts"] == 1, "the cut the stage's resolution drew is the one the run pushes, not drawn again"
    (grpo,) = found["launched"]
    assert grpo["method"] == "grpo" and grpo["holdout"] and "init_from" not in grpo
    # the values wai.train would have read of the train side: the sample's 4 rollouts per task and their temperature
    assert (grpo["generations"], grpo["temperature"]) == (4, 0.7)
    assert grpo["provenance"]["generations"] == "the dataset's rollouts per task (clipped to range)"
    assert grpo["provenance"]["temperature"] == "the rows' own sampling.temperature (like for like)"
    assert grpo["runner"]["stage"] == "train" and grpo["runner"]["previous_run"] is None
    assert grpo["holdout_rows"] == 4
    # reproduce resolves the stored spec the same way: the rows first, then the stage, once
    again = _counted_run(home, tmp_path, ["reproduce", grpo["run_id"]])
    assert again["counts"] == {"RecipeSpec": 1, "GRPOSpec": 1} and again["cuts"] == 1, again
    (redo,) = again["launched"]
    assert (redo["generations"], redo["temperature"], redo["holdout"]) == (4, 0.7, grpo["holdout"])


def test_a_stage_with_a_train_tasks_share_draws_it_once_for_its_facts_and_its_training_set(home, tmp_path):
    """The share's rows give the stage its group size and temperature (resolved before anything trains) and are the
    rows it trains on: one draw serves both."""
    found = _counted_run(home, tmp_path, [*_SINGLE_ARGS, "train_tasks=[0,0.5]"])
    assert found["exit"] == 0, found
    assert found["counts"] == {"RecipeSpec": 1, "GRPOSpec": 1}, found["counts"]
    assert (found["cuts"], found["shares"]) == (1, 1), found
    (grpo,) = found["launched"]
    assert grpo["runner"]["stage"] == "train" and (grpo["generations"], grpo["temperature"]) == (4, 0.7)


PACKAGE = ROOT / "whileai"


def _copies_with_update(path: Path) -> list[int]:
    import ast

    return [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "model_copy"
            and any(keyword.arg == "update" for keyword in node.keywords)]


def test_a_validated_spec_changes_only_through_the_one_function_that_validates_it():
    """``model_copy(update=...)`` changes a frozen model without checking the change; ``whileai.core.spec.updated``
    applies the change and validates the result, on the client's side and the server's alike."""
    found = [f"whileai/{path.relative_to(PACKAGE).as_posix()}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             for line in _copies_with_update(path)]
    assert not found, f"change a spec with whileai.core.spec.updated(spec, **changes), not model_copy: {found}"


def test_what_a_submit_writes_beside_a_resolved_spec_reads_as_the_spec_validated_with_it():
    """The held-out set and the runner's record written beside a spec sent as it is (``spec_json``'s ``holdout``
    and ``runner``) give the JSON of the spec validated with them: the same keys, values and order."""
    from whileai.core.runnerrecord import RunnerRecord
    from whileai.core.spec import SPEC_MODELS, job_json, spec_json, updated
    from whileai.simulations.training import train_spec

    runner = RunnerRecord.model_validate({"recipe": "r", "stage": "sft", "stage_index": 0, "stages": ["sft", "grpo"],
                                          "previous_run": None, "export": {"rows_out": 3}, "spec": {"steps": 4}})
    for method in SPEC_MODELS:
        spec = train_spec(method, {"steps": 4}, None, base_model=None, target="local", holdout=None).spec
        assert spec is not None, method
        whole = updated(spec, holdout="ds_0123456789abcdef", runner=runner)
        assert spec_json(spec, holdout="ds_0123456789abcdef", runner=runner) == spec_json(whole), method
        assert list(spec_json(spec, holdout="ds_0123456789abcdef", runner=runner)) == list(spec_json(whole)), method
        assert job_json(spec, "run_1", "ds_1", holdout="ds_0123456789abcdef", runner=runner) == \
            job_json(whole, "run_1", "ds_1"), method


def test_only_a_spec_a_resolution_made_is_sent_as_it_is():
    """A hand-made spec, a GRPO spec whose group size and temperature the dataset decides, a job's own copy and a
    spec with a user's notes are resolved again at the submit; a resolved spec with only the held-out set and the
    runner's record beside it is sent as it is, and anything else beside it resolves again."""
    from whileai.core.spec import GRPOSpec, read_job_spec, spec_json
    from whileai.simulations._resolve import is_resolved
    from whileai.simulations._sent import sent_as_is
    from whileai.simulations.training import train_spec

    sft = train_spec("sft", {"steps": 4}, None, base_model=None, target="local", holdout=None).spec
    later = train_spec("grpo", {}, None, base_model=None, target="local", holdout=None, data_later=True).spec
    noted = train_spec("sft", {"steps": 4}, {"note": 1}, base_model=None, target="local", holdout=None).spec
    assert sft is not None and later is not None and noted is not None
    job_copy = read_job_spec({**spec_json(sft), "run_id": "run_1", "dataset": "ds_1"})
    assert is_resolved(sft) and not any(map(is_resolved, (GRPOSpec(beta=0.02), later, noted, job_copy)))
    place = {"holdout": "ds_0123456789abcdef", "base_model": sft.base_model, "target": "local"}
    sent = sent_as_is(sft, {"runner": {"stage": "sft"}, "gpu": None}, None, **place)
    assert sent is not None and sent.spec is sft and sent.runner is not None and sent.runner.stage == "sft"
    assert sent.holdout == "ds_0123456789abcdef"
    for settings, config, changed in (({"steps": 5}, None, {}), ({}, {"gpu": "A100"}, {}),
                                      ({}, None, {"base_model": "other"}), ({}, None, {"target": "modal"}),
                                      ({"runner": {"stage_index": "first"}}, None, {})):
        assert sent_as_is(sft, settings, config, **{**place, **changed}) is None, (settings, config, changed)


def test_updated_validates_the_change_and_keeps_what_was_given():
    import pytest
    from pydantic import ValidationError

    from whileai.core.spec import GRPOSpec, spec_json, updated

    spec = GRPOSpec(beta=0.02, steps=5)
    changed = updated(spec, holdout="ds_0123456789abcdef", steps=7)
    assert (changed.beta, changed.steps, changed.holdout) == (0.02, 7, "ds_0123456789abcdef") and spec.steps == 5
    assert set(spec_json(changed)) == {"beta", "steps", "holdout"}  # the fields given, and only those
    with pytest.raises(ValidationError, match=r"beta=2 is outside \[0, 1\] for grpo"):
        updated(spec, beta=2)
