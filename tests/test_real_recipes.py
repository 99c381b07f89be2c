"""The real CPU recipes for GRPO and DPO (``recipes/real/*_smollm2_bfcl.yaml``) through ``python -m whileai run``.

Each runs its SFT stage and then its own method from that stage's adapter on SmolLM2-135M-Instruct,
two steps a stage on the committed BFCL sample: the plumbing of a real base through the runner (its
GGUF import, the hermes tool format, the stage hand-over), not learning. The learning figures are the
recipes' own, measured on BFCL's full data (recipes/MEASUREMENTS.md).
"""

from __future__ import annotations

import pytest

from _runner_helpers import record, runner_record, runs_file, whileai

#: 12 questions, two steps a stage, four held-out questions, the smallest samples each method takes (a CPU pays
#: per prompt token: at 8 prompts a step of ~400 tokens, two GRPO steps on SmolLM2 took 430 s)
SHORT = ["dataset.tasks=12", "steps=2", "stages.sft.steps=2", "stages.sft.batch_size=2", "holdout_rows=4", "stages.sft.holdout_rows=4",
         "lora_rank=4", "lora_alpha=8", "stages.sft.lora_rank=4", "stages.sft.lora_alpha=8",
         "expect.stage_gain_min=null"]


def _two_stages(recipe: str, method: str, token: str, *extra: str) -> tuple[dict, dict]:
    done = whileai("run", f"recipe=real/{recipe}", *SHORT, *extra, token=token, env={"BFCL_DATA": ""}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[0].startswith("smoke run on the committed BFCL sample"), done.stderr[:500]
    runs = runs_file(token)["runs"]
    assert [r["method"] for r in runs] == ["sft", method], runs
    sft, main = (record(r["id"]) for r in runs)
    assert runner_record(main["id"])["previous_run"] == sft["id"]  # it started from the SFT stage's adapter
    return sft, main


def _trained_on_smollm2(run: dict, smollm2: dict) -> dict:
    assert run["status"] == "done", run.get("error")
    training = run.get("training") or run["summary"]["training"]
    assert training["steps"] == 2
    assert training["tool_format"]["used"] == "hermes"  # SmolLM2's own template drops tools
    assert training["base_import"]["folder"] == str(smollm2["folder"])
    return training


@pytest.mark.slow
def test_the_grpo_recipe_runs_sft_then_grpo_on_smollm2_through_the_runner(smollm2):
    sft, grpo = _two_stages("grpo_smollm2_bfcl", "grpo", "real-grpo", "generations=2",
                            "prompts_per_step=1", "max_completion_length=16", "monitor.n_prompts=2", "monitor.every=2")
    _trained_on_smollm2(sft, smollm2)
    training = _trained_on_smollm2(grpo, smollm2)
    assert grpo["config"]["reward"] == ["first_action"] and grpo["config"]["prompt_source"] == "gold"
    assert training["prompts"] >= 1 and training["prompts_per_step"] == 1, sorted(training)
    # BFCL's questions each offer their own functions: each prompt went to the trainer with its own row's tools
    assert training["tools_per_prompt"] is True


@pytest.mark.slow
def test_the_dpo_recipe_runs_sft_then_dpo_from_its_own_samples_on_smollm2(smollm2):
    sft, dpo = _two_stages("dpo_smollm2_bfcl", "dpo", "real-dpo", "policy_samples=2", "max_completion_length=16",
                           "batch_size=2")
    _trained_on_smollm2(sft, smollm2)
    training = _trained_on_smollm2(dpo, smollm2)
    assert dpo["config"]["pair_source"] == "policy_gold"
    assert training["pairs"] >= 1 and training["policy_pairs"], sorted(training)  # pairs of its own samples
