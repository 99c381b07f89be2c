"""The SmolLM2 agent recipes on BFCL's multi_turn_base (``recipes/real/agent_smollm2_bfcl*.yaml``), checked without
loading a model: each composes and validates, reads BFCL's entries as gold episodes played in ``environment=bfcl``
(its files found in a data folder laid out as bfcl-eval's, here the committed sample), runs an SFT stage before GRPO
with the same held-out entries measured before and after each, and claims only that the run finishes. The GPU
variant is the CPU recipe's setting with only a GPU's batch changed. Their runs need SmolLM2, bfcl-eval and hours of
CPU or one GPU: the recipes' notes and recipes/MEASUREMENTS.md hold what they gave.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import _bfcl_checker as bfcl  # noqa: E402
from test_runner_validate import compose_recipe  # noqa: E402

RECIPES = ("real/agent_smollm2_bfcl", "real/agent_smollm2_bfcl_gpu")
#: what the GPU variant sets apart from the CPU recipe: its name and the batch each device's memory holds
GPU_BATCH = {"name", "prompts_per_step", "generations", "batch_per_device", "stages.sft.batch_per_device"}


def _composed(recipe: str, monkeypatch) -> dict:
    """The recipe composed and validated here (where bfcl-eval is not installed, less its one problem that the
    backends are missing: test_runner_validate.compose_recipe); validated whole, the backends present, below."""
    monkeypatch.setenv("BFCL_DATA", str(bfcl.SAMPLE))  # the recipes read dataset.folder from BFCL_DATA
    plain, problems = compose_recipe(recipe)
    assert problems == [], [str(p) for p in problems]
    return plain


def test_the_cpu_recipe_validates_with_bfcl_evals_backends_and_entries(tmp_path):
    """With bfcl-eval's backends importable (the committed copies laid out as the installed package, its data the
    sample's entries: tests/test_runner_bfcl_episodes.py), ``validate`` passes and names the environment."""
    from _runner_helpers import whileai
    from test_runner_bfcl_episodes import stand_in_bfcl_eval

    env = {"PYTHONPATH": str(stand_in_bfcl_eval(tmp_path)), "BFCL_DATA": str(bfcl.SAMPLE)}
    done = whileai("validate", f"recipe={RECIPES[0]}", env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"# valid: recipe={RECIPES[0]}" in done.stderr, done.stderr[-500:]
    assert "# environment bfcl:multi_turn_base" in done.stdout + done.stderr


def _flat(plain: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in plain.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("recipe", RECIPES)
def test_each_recipe_composes_validates_and_reads_multi_turn_base_as_episodes(recipe, monkeypatch):
    from whileai.runner import schema
    from whileai.runner._datacheck import data_problems

    plain = _composed(recipe, monkeypatch)
    spec = schema.recipe_spec(plain)
    assert data_problems(spec, lambda key: "") == [], "the sample's multi_turn_base files are found and read"
    assert plain["method"] == "grpo" and plain["prompt_source"] == "gold" and plain["base_model"] == "smollm2-135m"
    assert plain["environment"]["name"] == "bfcl" and plain["environment"]["category"] == "multi_turn_base"
    assert plain["dataset"]["source"] == "bfcl_episodes" and plain["dataset"]["folder"] == str(bfcl.SAMPLE)
    sft = plain["stages"]["sft"]
    assert sft["method"] == "sft" and sft["base_model"] == "smollm2-135m"
    assert sft["holdout_rows"] == plain["holdout_rows"], "both stages measure the same held-out entries"
    assert sft["eval_max_new_tokens"] == plain["eval_max_new_tokens"]
    assert plain["expect"] == {"status": "done"}, "no held-out gain is claimed before seeds show one"


def test_the_gpu_variant_is_the_cpu_recipes_setting_at_a_gpus_batch(monkeypatch):
    cpu, gpu = (_flat(_composed(recipe, monkeypatch)) for recipe in RECIPES)
    apart = {key for key in cpu.keys() | gpu.keys() if cpu.get(key) != gpu.get(key)}
    assert apart == GPU_BATCH, {key: (cpu.get(key), gpu.get(key)) for key in apart}
    # the effective batches: the SFT stage's is the same on both, GRPO's is larger on the GPU
    assert cpu["stages.sft.batch_size"] == gpu["stages.sft.batch_size"]
    assert cpu["prompts_per_step"] * cpu["generations"] < gpu["prompts_per_step"] * gpu["generations"]
