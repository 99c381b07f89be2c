"""scripts/device_real_seeds.sh, the prepared GPU run of the real recipes' seeds, checked without a GPU; and
scripts/device_agent_seeds.sh, which runs it on the BFCL multi-turn agent's GPU variant alone.

The scripts are valid bash; the recipes they name exist and pass ``python -m whileai validate``; each GPU variant
of device_real_seeds.sh is its CPU recipe's setting with only a GPU's batch changed (so what the GPU measures is
what the CPU recipe claims, at a larger batch; the agent's pair: tests/test_agent_smollm2_bfcl_recipes.py); and on
a machine without a GPU each stops at once, saying so, before any run starts. Their runs themselves need SmolLM2 on
a GPU and minutes: the recipes' notes and recipes/MEASUREMENTS.md hold what they gave.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from _runner_helpers import ROOT, whileai

SCRIPT = ROOT / "scripts" / "device_real_seeds.sh"
AGENT_SCRIPT = ROOT / "scripts" / "device_agent_seeds.sh"
#: what a GPU variant may set apart from its CPU recipe: its name and the batch a GPU affords
GPU_BATCH = {"grpo": {"name", "prompts_per_step", "generations"}, "dpo": {"name", "batch_size"}}


def _named(script=SCRIPT) -> list[str]:
    """The recipes the script runs, read from its RECIPES=(...) line."""
    found = re.search(r"^RECIPES=\(([^)]*)\)", script.read_text(encoding="utf-8"), re.MULTILINE)
    assert found, f"{script.name} names its recipes on one RECIPES=(...) line"
    return found.group(1).split()


@pytest.mark.parametrize("script", [SCRIPT, AGENT_SCRIPT], ids=lambda p: p.name)
def test_the_script_is_valid_bash(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_script_runs_both_gpu_variants_at_seeds_0_1_2():
    assert _named() == ["real/grpo_smollm2_bfcl_gpu", "real/dpo_smollm2_bfcl_gpu"]
    assert re.search(r"^SEEDS=\(0 1 2\)$", SCRIPT.read_text(encoding="utf-8"), re.MULTILINE)


@pytest.mark.parametrize("recipe", _named())
def test_each_recipe_it_names_exists_and_validates(recipe):
    assert (ROOT / "recipes" / f"{recipe}.yaml").is_file(), recipe
    done = whileai("validate", f"recipe={recipe}", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"# valid: recipe={recipe}" in done.stderr, done.stderr[-500:]


@pytest.mark.parametrize("recipe", _named())
def test_each_gpu_variant_is_its_cpu_recipes_setting_at_a_gpus_batch(recipe):
    from test_runner_validate import compose

    gpu, problems = compose([f"recipe={recipe}"])
    assert problems == [], [str(p) for p in problems]
    cpu, problems = compose([f"recipe={recipe.removesuffix('_gpu')}"])
    assert problems == [], [str(p) for p in problems]
    apart = {key for key in gpu.keys() | cpu.keys() if gpu.get(key) != cpu.get(key)}
    assert apart == GPU_BATCH[gpu["method"]], {key: (cpu.get(key), gpu.get(key)) for key in apart}


def test_without_a_gpu_it_stops_at_once_saying_why(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert "no CUDA GPU visible to torch" in done.stderr and "NVIDIA GPU" in done.stderr, done.stderr[-2000:]
    assert "started" not in done.stdout and list((tmp_path / "out").iterdir()) == [], done.stdout


def test_the_agent_script_runs_the_agent_gpu_variant_through_the_seeds_script():
    assert _named(AGENT_SCRIPT) == ["real/agent_smollm2_bfcl_gpu"]
    assert "device_real_seeds.sh" in AGENT_SCRIPT.read_text(encoding="utf-8"), "its checks, deadline and tables"


def test_the_agent_recipe_validates_with_bfcl_evals_backends_and_entries(tmp_path):
    """Played in environment=bfcl, the recipe needs bfcl-eval's backends and its entries: here the committed copies
    laid out as the installed package (tests/test_runner_bfcl_episodes.py), wherever the wheel is absent."""
    from test_runner_bfcl_episodes import stand_in_bfcl_eval

    (recipe,) = _named(AGENT_SCRIPT)
    env = {"PYTHONPATH": str(stand_in_bfcl_eval(tmp_path)), "BFCL_DATA": ""}
    done = whileai("validate", f"recipe={recipe}", env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"# valid: recipe={recipe}" in done.stderr, done.stderr[-500:]
    assert "# environment bfcl:multi_turn_base" in done.stdout + done.stderr


def test_without_a_gpu_the_agent_script_stops_at_once_naming_its_cpu_recipe(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", str(AGENT_SCRIPT), str(tmp_path / "out")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert "no CUDA GPU visible to torch" in done.stderr and "recipes/real/agent_smollm2_bfcl.yaml" in done.stderr
    assert "started" not in done.stdout and list((tmp_path / "out").iterdir()) == [], done.stdout
