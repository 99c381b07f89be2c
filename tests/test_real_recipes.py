"""The real CPU recipes for GRPO and DPO (``recipes/real/*_smollm2_bfcl.yaml``) through ``python -m whileai run``.

Each recipe's own method runs two steps on SmolLM2-135M-Instruct on the committed BFCL sample: the plumbing
of a real base through the runner (its GGUF import, the hermes tool format, GRPO's prompts from BFCL's gold
with each question's own functions, DPO's pairs from the policy's own samples), not learning. The SFT stage
each recipe starts from is left out here (``~stages``: SmolLM2's SFT is tested in tests/test_real_base.py,
and a stage's hand-over in tests/test_runner_e2e.py); the learning figures are the recipes' own, measured
on BFCL's full data.
"""

from __future__ import annotations

import pytest

from _runner_helpers import record, runs_file, whileai, without_bfcl_eval

#: 12 questions, two steps, four held-out questions, the smallest samples each method takes: a CPU pays per
#: prompt token (at 8 prompts a step of ~400 tokens, two GRPO steps on SmolLM2 took 430 s)
SHORT = ["~stages", "dataset.tasks=12", "steps=2", "lora_rank=4", "lora_alpha=8",
         "expect.stage_gain_min=null"]


def _run(recipe: str, method: str, token: str, smollm2: dict, *extra: str) -> tuple[dict, dict, str]:
    done = whileai("run", f"recipe=real/{recipe}", *SHORT, *extra, token=token, env=without_bfcl_eval(), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[0].startswith("smoke run on the committed BFCL sample"), done.stderr[:500]
    runs = runs_file(token)["runs"]
    assert [r["method"] for r in runs] == [method], runs
    run = record(runs[0]["id"])
    assert run["status"] == "done", run.get("error")
    training = run.get("training") or run["summary"]["training"]
    assert training["steps"] == 2
    assert training["tool_format"]["used"] == "hermes"  # SmolLM2's own template drops tools
    assert training["base_import"]["folder"] == str(smollm2["folder"])
    return run, training, done.stderr  # the progress lines


@pytest.mark.slow
def test_the_grpo_recipe_trains_smollm2_on_bfcls_gold_through_the_runner(smollm2):
    run, training, _ = _run("grpo_smollm2_bfcl", "grpo", "real-grpo", smollm2, "holdout_rows=4", "generations=2",
                         "prompts_per_step=1", "max_completion_length=16", "monitor.n_prompts=2", "monitor.every=2",
                         "monitor.max_new_tokens=16")
    assert run["config"]["reward"] == ["first_action"] and run["config"]["prompt_source"] == "gold"
    assert training["prompts"] >= 1 and training["prompts_per_step"] == 1, sorted(training)
    # BFCL's questions each offer their own functions: each prompt went to the trainer with its own row's tools
    assert training["tools_per_prompt"] is True
    assert run["config"]["monitor"]["max_new_tokens"] == 16 and run["summary"]["monitor"]["armed"]["length"] == "armed"


@pytest.mark.slow
def test_the_dpo_recipe_trains_smollm2_on_pairs_of_its_own_samples_through_the_runner(smollm2):
    # SmolLM2 without its SFT stage ends few replies inside the cap, and a reply the cap cut pairs with nothing:
    # 4 samples of up to 96 tokens (the held-out cap) a question give it replies to pair with the gold
    run, training, said = _run("dpo_smollm2_bfcl", "dpo", "real-dpo", smollm2, "policy_samples=4",
                         "max_completion_length=96", "batch_size=2", "holdout_rows=2",
                         "expect.holdout_gain_significant=null")
    assert run["config"]["pair_source"] == "policy_gold"
    assert training["pairs"] >= 1 and training["policy_pairs"], sorted(training)  # pairs of its own samples
    # sampling is most of a CPU DPO run: the progress line names it (and its count), not the held-out measurement
    assert "(sampling the policy's pairs: " in said and "prompts x 4)" in said, said
