"""Stages and stopping with real worker processes: export settings reach the job's dataset, GRPO and DPO
continue an SFT run's adapter and move it (and the result serves), and ``run.stop()`` ends a running worker.

Like tests/test_jobs.py most of these train the kit's randomly initialised tiny model
(``tiny_model_dir``) for a step or two: they prove the plumbing. GRPO continues a short SFT run
on the kit's pre-trained demo base instead, because on the random model every sampled reply fails
and GRPO, with no advantage anywhere, changes nothing. Whether a stage moves the held-out rate
significantly above its start is tests/test_learning.py's and tests/test_design_card.py's question (and
benchmarks/training_stages.py's).
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.platform.launcher.jobs import adapter_dir, job_dir
from whileai.platform import defaults as platform_defaults
from whileai.domain.client import get_client
from _job_helpers import job_of as _job_of

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sets(session_home, push_sample):
    from whileai.kit._base import tiny_model_dir

    assert os.environ["WHILEAI_HOME"] == str(session_home)
    return {**push_sample("stages", tasks=40), "base": str(tiny_model_dir())}



def _train(dataset, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wai.train(dataset, **kwargs)


def _lora_weights(folder: str) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "adapter_model.safetensors"))


@pytest.fixture(scope="module")
def sft_stage(sets):
    """An SFT run that trains only the final turn, thinking kept.

    (No tool-output cap here: the sample's final answers quote their tool's
    output, so a cap that cuts it makes the answer look recited from the
    privileged block, and the export gate rightly refuses the rows.)
    """
    run = _train(sets["passes"], method="sft", steps=2, base_model=sets["base"], holdout=sets["holdout"],
                 mask_mode="final", strip_think=False, config={"holdout_rows": 4})
    assert run.wait(poll=1, timeout=240) == "done", run.error
    return run


def test_export_settings_shape_what_the_sft_job_trained_on(sft_stage):
    run = sft_stage
    assert run.config["mask_mode"] == "final" and run.config["strip_think"] is False
    assert run.training["export"] == {"mask_mode": "final", "unroll": False, "strip_think": False,
                                      "rows_shape": "prompt_completion"}
    trained = [json.loads(line) for line in (job_dir(_job_of(run.id)["id"]) / "train.trl.jsonl").open()]
    assert trained and all(set(r) >= {"prompt", "completion"} and "messages" not in r for r in trained)
    # "final": the completion is the last assistant turn; the first action stays in the context, untrained
    two_turn = [r for r in trained if any(m["role"] == "assistant" for m in r["prompt"])]
    assert two_turn and all(len(r["completion"]) == 1 and not r["completion"][0].get("tool_calls") for r in two_turn)
    assert run.training["rows"] == len(trained)


def _moved(run, start: dict) -> tuple[float, float]:
    """(how far the run's adapter moved from ``start``, the size of ``start``), both summed L2 norms."""
    folder = Path(run.adapter)
    assert folder == adapter_dir(run.id) and (folder / "adapter_config.json").is_file()
    assert not (folder / "ref").exists(), "only the trained adapter is saved, not the trainer's reference copy"
    weights = _lora_weights(run.adapter)
    assert set(weights) == set(start)
    return (sum(float((weights[k] - start[k]).norm()) for k in start), sum(float(start[k].norm()) for k in start))


@pytest.fixture(scope="module")
def kit_sft_stage(sets):
    """A short SFT run on the kit's pre-trained demo base: a policy whose sampled replies sometimes pass.

    (GRPO from the random tiny model's adapter learns nothing by construction: every sampled reply
    fails, so every group is unanimous and carries no advantage.)
    """
    from whileai.kit import defaults as kit_defaults

    run = _train(sets["passes"], method="sft", steps=40, learning_rate=kit_defaults.KIT_SFT_LR,
                 base_model=kit_defaults.KIT_BASE_NAME, holdout=sets["holdout"], config={"holdout_rows": 4})
    assert run.wait(poll=1, timeout=900) == "done", run.error
    return run


def test_grpo_continues_the_sft_adapter_and_moves_it(sets, kit_sft_stage):
    sft = kit_sft_stage
    grpo = _train(sets["train"], method="grpo", init_from=sft, steps=2, generations=4, learning_rate=3e-4,
                  max_completion_length=48, config={"holdout_rows": 4, "monitor": False})
    assert grpo.wait(poll=1, timeout=600) == "done", grpo.error
    assert grpo.config["init_from"] == sft.id and grpo.training["init_from"] == sft.id
    assert "before_read_back" not in grpo.training, "GRPO's measurement adds its proxy's scores: measured again"
    assert grpo.config["lora_rank"] == sft.config["lora_rank"]
    start = _lora_weights(sft.adapter)
    moved, size = _moved(grpo, start)
    # the SFT adapter, trained on (a fresh one would differ from it by about its whole size), and moved:
    # a GRPO job that changes nothing fails here
    groups = grpo.training["mixed_groups"]
    assert groups["mean"] > 0 and "groups_note" not in grpo.training, grpo.training
    assert 0 < moved < 0.5 * size, (moved, size)
    from whileai.core import defaults as core_defaults

    assert grpo.training["prompts_per_step"] == core_defaults.TRAIN_GRPO_PROMPTS_PER_STEP
    logged = [p["metrics"] for p in wai.get_run(grpo.id)["series"]]
    assert any("mixed_groups" in m and "sampled_pass_rate" in m for m in logged), "the group watch's figures are logged"


def test_dpo_continues_the_sft_adapter_and_the_result_serves(sets, sft_stage):
    sft = sft_stage
    dpo = _train(sets["all"], method="dpo", init_from=sft.id, steps=2, holdout=sets["holdout"],
                 config={"holdout_rows": 4, "batch_size": 2})
    start = _lora_weights(sft.adapter)
    assert any(float(v.abs().max()) > 0 for k, v in start.items() if "lora_B" in k)
    for run in (dpo,):
        assert run.wait(poll=1, timeout=300) == "done", run.error
        assert run.config["init_from"] == sft.id and run.training["init_from"] == sft.id
        assert run.config["base_model"] == sets["base"] and run.config["lora_rank"] == sft.config["lora_rank"]
        moved, size = _moved(run, start)
        assert 0 < moved < 0.5 * size, (run.config["method"], moved, size)
    row = wai.serve(dpo, "stage-dpo")
    assert row["adapterRunId"] == dpo.id and row["baseModel"] == sets["base"]
    held = wai.datasets.load_rows(sets["holdout"])[0]
    ask = held["messages"][: next(i for i, m in enumerate(held["messages"]) if m["role"] == "assistant")]
    reply = get_client().request("POST", "/v1/chat/completions",
                                 json={"model": "stage-dpo", "messages": ask, "max_tokens": 4, "temperature": 0})
    assert reply["model"] == "stage-dpo" and reply["choices"][0]["message"]["role"] == "assistant"
    wai.unserve("stage-dpo")


def test_dpo_on_policy_pairs_sample_the_sft_adapter_and_train_it(sets, kit_sft_stage):
    """pair_source="policy": the SFT policy's own sampled replies, judged against the gold, a pass against a fail."""
    sft = kit_sft_stage
    dpo = _train(sets["train"], method="dpo", init_from=sft, steps=2, holdout=sets["holdout"],
                 config={"pair_source": "policy", "policy_samples": 4, "nll_weight": 1.0, "holdout_rows": 4,
                         "batch_size": 2})
    assert dpo.wait(poll=1, timeout=600) == "done", dpo.error
    said = dpo.training["policy_pairs"]
    assert said["samples"] == said["prompts"] * 4 and said["samples_per_prompt"] == 4
    assert 0 < said["mixed_prompts"] <= said["prompts"] and 0 < said["pairs"] <= 2 * said["mixed_prompts"]
    assert dpo.training["pairs"] == said["pairs"] == dpo.training["trainer_received"]
    assert 0 < said["sampled_pass_rate"] < 1
    moved, size = _moved(dpo, _lora_weights(sft.adapter))
    assert 0 < moved < 0.5 * size, (moved, size)
    # what the trainer read is the sampled text: the prompt as the policy saw it, each side ending its turn
    trained = [json.loads(line) for line in (job_dir(_job_of(dpo.id)["id"]) / "pairs.policy.jsonl").open()]
    assert len(trained) == said["pairs"]
    assert all(p["prompt"].endswith("<|im_start|>assistant\n") and p["chosen"] != p["rejected"] for p in trained)
    assert all(p[side].endswith("<|im_end|>") for p in trained for side in ("chosen", "rejected"))
    # its "before" is the SFT run's own "after", read back from the SFT adapter's folder, not measured again
    assert dpo.training["before_read_back"] == sft.id
    assert dpo.training["outcomes"]["before"] == sft.training["outcomes"]["after"]


def test_the_kept_after_is_what_measuring_the_saved_adapter_again_gives(sets, kit_sft_stage):
    """What reading the start run's "after" back rests on: its saved adapter, measured again, passes the same prompts."""
    from whileai.jobs import _kept_measure, dpo
    from whileai.jobs.body import job_spec
    from whileai.domain.rows.datagate import gate_rows

    sft = kit_sft_stage
    spec = job_spec({"method": "dpo", "base_model": sft.config["base_model"], "init_from": sft.id,
                     "init_adapter": sft.adapter, "holdout_rows": 4})
    rows, _ = gate_rows(wai.datasets.load_rows(sets["holdout"]))
    model, tokenizer = dpo.load(spec)
    key = _kept_measure.measure_key(spec, tokenizer, rows)
    kept = _kept_measure.read_back(Path(sft.adapter), key)
    assert kept is not None and list(kept.outcomes) == sft.training["outcomes"]["after"]
    assert dpo.evaluate(spec, model, tokenizer, rows).outcomes == kept.outcomes


def test_dpo_on_policy_pairs_from_a_policy_that_never_passes_fail_with_the_fix(sets):
    run = _train(sets["train"], method="dpo", steps=2, base_model=sets["base"],
                 config={"pair_source": "policy", "policy_samples": 2, "holdout_rows": 4})
    assert run.wait(poll=1, timeout=300) == "failed"
    assert "sampled replies both pass and fail" in run.error and "init_from an SFT run" in run.error


def _process_gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _group_gone(pgid: int) -> bool:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(entry.name)
    return not members


def test_stop_ends_a_running_worker_and_its_group_and_the_run_stays_stopped(sets):
    run = _train(sets["train"], method="dpo", steps=500, base_model=sets["base"], config={"holdout_rows": 4})
    deadline = time.monotonic() + 120
    while _job_of(run.id)["heartbeat_at"] is None or not (run.refresh().step or 0):
        assert time.monotonic() < deadline, "the worker never started training"
        time.sleep(0.3)
    job = _job_of(run.id)
    pid = job["pid"]
    assert os.getpgid(pid) == pid  # the worker leads its own process group
    assert run.stop() == "stopped"
    assert _process_gone(pid) and _group_gone(pid)
    assert "stopped on request" in run.error and f"worker (pid {pid}) and its process group were ended" in run.error
    time.sleep(platform_defaults.JOB_HEARTBEAT_S + 1)  # nothing left to flip it back
    record = wai.get_run(run.id)
    assert record["status"] == "stopped" and record["summary"].get("adapter") is None
    assert not adapter_dir(run.id).exists()
    assert _job_of(run.id)["status"] == "stopped"
    with pytest.warns(UserWarning, match="already ended stopped"):
        assert run.stop() == "stopped"
