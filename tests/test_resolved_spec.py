"""What ``validate`` shows is what runs: the printed spec against the TRL and PEFT configs the jobs build.

For random valid overrides of every committed recipe (every method and stage shape), the YAML that
``validate`` prints is parsed back and, stage by stage, compared key by key with the real
``SFTConfig`` / ``GRPOConfig`` / ``DPOConfig`` / ``RewardConfig`` and ``LoraConfig`` objects built
from the spec the pipeline hands ``wai.train`` (stage rules, then the one resolution). No model
and no data are loaded.
"""

from __future__ import annotations

import functools
import os
import tempfile

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from whileai.core.spec import SPEC_MODELS, knob_fields, knob_of
from whileai.jobs.trainer_config import LORA_NAMES, TRL_NAMES, lora_settings, trl_settings
from whileai.runner._effective import annotated_yaml, effective
from whileai.runner.schema import HOST_KEYS, KNOBS, recipe_spec
from whileai.runner.stages import plan_stages, stage_inputs
from whileai.simulations.training import train_spec

from test_runner_validate import compose

RECIPES = ["sft_tooluse", "grpo_tooluse", "dpo_tooluse", "rm_tooluse"]
_OUT = tempfile.mkdtemp()


def _value(draw, method: str, name: str):
    meta = knob_of(SPEC_MODELS[method], name)
    if meta.choices is not None:
        return draw(st.sampled_from(meta.choices))
    lo, hi = meta.range
    if meta.many:  # a list of numbers (reward_weights)
        return draw(st.lists(st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False),
                             min_size=1, max_size=3))
    if isinstance(lo, int) and isinstance(hi, int) and SPEC_MODELS[method].model_fields[name].annotation in (int, int | None):
        return draw(st.integers(min_value=lo, max_value=min(hi, lo + 64)))
    low = lo * 1.001 if meta.open_low else lo
    return draw(st.floats(min_value=low, max_value=hi, allow_nan=False, allow_infinity=False)
                .filter(lambda x: x != 0.0 or not meta.open_low))


def _pattern_only(method: str, name: str) -> bool:
    meta = knob_of(SPEC_MODELS[method], name)
    return meta.choices is None and meta.range is None


def _typed(value) -> str:
    """A drawn value as the command line writes it."""
    if isinstance(value, list):
        return "[" + ",".join(_typed(v) for v in value) + "]"
    return repr(value) if isinstance(value, float) else str(value).lower() if isinstance(value, bool) else str(value)


@functools.cache
def _committed(recipe: str) -> dict:
    """The recipe as committed, composed once: the draw reads its stages and which keys it sets."""
    return compose([f"recipe={recipe}"])[0]


@st.composite
def _overrides(draw):
    recipe = draw(st.sampled_from(RECIPES))
    plain = _committed(recipe)
    out = [f"recipe={recipe}"]
    nodes = [("", plain["method"])] + [(f"stages.{k}.", v["method"]) for k, v in (plain.get("stages") or {}).items()]
    for prefix, method in nodes:
        # a knob whose value is only a pattern (reward_model: a run id or stages.NAME) names something that must
        # exist; the recipes' own tests give those
        names = [n for n in knob_fields(SPEC_MODELS[method]) if n in (*KNOBS, *HOST_KEYS) and n != "min_mixed_tasks"
                 and not _pattern_only(method, n)]
        for name in draw(st.lists(st.sampled_from(names), max_size=4, unique=True)):
            if method == "rm" and name == "near_misses":
                continue  # needs reward_span=first_action: a cross-knob rule, refused on its own
            value = _value(draw, method, name)
            text = _typed(value)
            node = (plain.get("stages") or {}).get(prefix[len("stages."):-1]) if prefix else plain
            sign = "" if (node or {}).get(name, "absent") != "absent" else "+"
            out.append(f"{sign}{prefix}{name}={text}")
    return out


def _built(spec):
    """The TRL config and LoRA config objects a job builds from ``spec`` (its own pure functions)."""
    import trl
    from peft import LoraConfig

    cls = {"sft": trl.SFTConfig, "grpo": trl.GRPOConfig, "dpo": trl.DPOConfig, "rm": trl.RewardConfig}[spec.method]
    extra = {"per_device_train_batch_size": spec.generations} if spec.method == "grpo" else {}
    config = cls(output_dir=_OUT, use_cpu=True, report_to=[], **trl_settings(spec), **extra)
    return config, LoraConfig(**lora_settings(spec))


def _check_validate_equals_what_runs(overrides: list[str]) -> None:
    from whileai.runner._effective import resolution_problems

    plain, problems = compose(overrides)
    spec = None if problems else recipe_spec(plain)
    if spec is None or resolution_problems(spec):  # refused (validate says so): not a spec that runs
        return
    printed = yaml.safe_load(annotated_yaml(*effective(spec)))
    resolved: dict[str, dict] = {}
    for stage in plan_stages(spec):
        kwargs, config = stage_inputs(stage, spec)  # what the pipeline passes wai.train for this stage
        start = resolved.get(stage.start) if stage.start else None
        result = train_spec(stage.method, kwargs, config, base_model=stage.settings.get("base_model"),
                            target="local", holdout=None, start=start)
        assert result.spec is not None, (overrides, result.problems)
        resolved[stage.name] = result.values
        shown = printed["stages"][stage.name] if stage.prefix else printed
        trl_config, lora = _built(result.spec)
        for knob, trl_name in TRL_NAMES.items():
            if knob not in shown or knob not in result.values:
                continue
            if stage.method == "dpo" and knob == "max_completion_length":
                continue  # DPO's cap is added to the longest prompt of the data: max_length, set by the job
            if stage.method == "grpo" and knob in ("generations", "temperature") and shown[knob] is None:
                continue  # validate says the dataset decides (it has not been read)
            value = getattr(trl_config, trl_name)
            if knob == "loss_type" and isinstance(value, list):
                value = value[0]
            if knob == "steps" and shown[knob] is None:
                assert value == -1, (overrides, stage.name)  # TRL's "epochs decide"
                continue
            if knob == "epochs" and shown[knob] is None:
                continue  # steps decide; TRL's max_steps wins over num_train_epochs
            if knob == "batch_size":
                # the effective batch: TRL's per-device batch, accumulated over its steps, on every process
                # (batch_per_device below the share trains it in micro-batches)
                value = trl_config.per_device_train_batch_size * trl_config.gradient_accumulation_steps * (
                    result.spec.world_size)
                cap = shown.get("batch_per_device")
                assert cap is None or trl_config.per_device_train_batch_size <= cap, (overrides, stage.name, cap)
            assert value == shown[knob], (overrides, stage.name, knob, shown[knob], value)
        for knob, peft_name in LORA_NAMES.items():
            assert getattr(lora, peft_name) == shown[knob], (overrides, stage.name, knob)


@settings(max_examples=int(os.environ.get("WHILEAI_PROPERTY_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_overrides())
def test_what_validate_prints_is_what_trl_and_peft_get(overrides):
    _check_validate_equals_what_runs(overrides)


@pytest.mark.parametrize("recipe", RECIPES)
def test_each_recipe_as_committed(recipe):
    _check_validate_equals_what_runs([f"recipe={recipe}"])


def test_a_reward_model_stage_s_lora_rank_is_its_own():
    """``+stages.proxy.lora_rank=4``: the rm stage continues nothing and nothing continues it, so the SFT stage keeps
    its own rank (the kit recipe's) and GRPO inherits the SFT stage's; validate once printed 4 for both."""
    from whileai.kit import defaults as kit_defaults

    overrides = ["recipe=hack/rm_proxy", "+stages.proxy.lora_rank=4"]  # an rm stage, then SFT, then GRPO
    plain, problems = compose(overrides)
    assert problems == []
    filled, notes = effective(recipe_spec(plain))
    assert filled["stages"]["proxy"]["lora_rank"] == 4
    assert filled["stages"]["sft"]["lora_rank"] == kit_defaults.KIT_SFT_LORA_R
    assert filled["lora_rank"] == kit_defaults.KIT_SFT_LORA_R
    assert "inherited" not in notes["stages.sft.lora_rank"]
    assert notes["lora_rank"].startswith("inherited from the sft stage")
    _check_validate_equals_what_runs(overrides)


def test_provenance_names_the_recipe_line_the_command_line_and_the_default():
    from whileai.runner._origin import Origins
    from whileai.runner._locate import sources

    overrides = ["recipe=grpo_tooluse", "beta=0.02"]
    plain, _ = compose(overrides)
    origin = Origins(sources(), {"recipe": "grpo_tooluse", "method": "grpo", "dataset": "sample",
                                 "monitor": "default"}, overrides)
    from whileai.runner._effective import resolve_stages

    stages = {stage.name: result for stage, result in resolve_stages(recipe_spec(plain), origin)}
    grpo = stages["grpo"].provenance
    assert grpo["beta"] == "command line"
    assert grpo["steps"].startswith("recipes/grpo_tooluse.yaml:")
    assert grpo["lora_rank"].startswith("inherited from the sft stage")
    assert grpo["epsilon_high"].startswith("grpo's default")
    assert stages["grpo"].spec is not None and stages["grpo"].spec.provenance == grpo


def test_the_expect_verdict_is_kept_on_the_run_record(home):
    """``expect.settle`` (the pipeline's and ``wait``'s one way) notes the verdict on the run; a spec without expect
    lines notes nothing. On the embedded platform, read back from the store."""
    import whileai.simulations as wai
    from whileai.runner.expect import settle
    from whileai.domain.client import get_client
    from whileai.domain.tracking import TrainingRun

    client = get_client()
    run = TrainingRun(client.request("POST", "/runs", json={"name": "verdict", "kind": "hosted"}), client)
    run.note(training={"before": 0.2, "after": 0.6, "metric": "pass_rate",
                       "stats": {"n": 10, "p_value": 0.01, "improved": 4, "worsened": 0}})
    run.finish("done")
    run.refresh()
    outcome, checked = settle(run, None, {"status": "done", "holdout_after_min": 0.9}, {"status": "recipes/x.yaml:3"},
                              "x")
    assert outcome["after"] == 0.6 and checked["passed"] is False
    stored = wai.get_run(run.id)["summary"]["expect"]
    assert stored["passed"] is False and stored["recipe"] == "x"
    assert [(line["key"], line["passed"], line["where"]) for line in stored["lines"]] == [
        ("status", True, "recipes/x.yaml:3"), ("holdout_after_min", False, "the spec")]
    other = TrainingRun(client.request("POST", "/runs", json={"name": "no lines", "kind": "hosted"}), client)
    other.finish("done")
    other.refresh()
    _, nothing = settle(other, None, {}, {}, None)
    assert nothing == {"passed": True, "lines": []} and "expect" not in (wai.get_run(other.id)["summary"] or {})


def test_no_job_body_reads_its_spec_as_a_dict():
    """The job bodies take the typed spec: no ``spec.get(`` and no ``spec[...]`` fallback anywhere under jobs/."""
    import re
    from pathlib import Path

    import whileai.jobs

    found = []
    for path in Path(whileai.jobs.__file__).parent.glob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\bspec\.get\(|\bspec\[", line):
                found.append(f"{path.name}:{number}: {line.strip()}")
    assert found == []


def test_validate_refuses_what_wai_train_would_refuse_between_knobs(tmp_path):
    """A spec the schema accepts but the resolution refuses (rm_tooluse's near misses with the whole conversation
    as the reward span) fails validate with the resolution's own words, before anything loads."""
    from test_runner_validate import run_cli

    done = run_cli("validate", "recipe=rm_tooluse", "reward_span=conversation", home=tmp_path)
    assert done.returncode == 2, done.stdout
    assert "near_misses=3 needs reward_span='first_action'" in done.stderr


def test_own_data_without_a_recipe_takes_the_defaults_of_the_chosen_base(tmp_path):
    """``run dataset=jsonl dataset.path=FILE`` with no recipe: on the kit base SFT resolves to the kit's measured recipe
    (its rate, not the generic LoRA default the method group once wrote in as if typed); on another base, the
    declared defaults. validate prints both with where they come from."""
    import yaml

    from pathlib import Path

    import whileai.kit
    from whileai.domain import defaults
    from whileai.kit import defaults as kit_defaults
    from _runner_helpers import cached_hub_base
    from test_runner_validate import run_cli

    def sample_path() -> Path:
        return Path(whileai.kit.__file__).parent / "data" / "sample_tooluse.jsonl"

    kit = run_cli("validate", "dataset=jsonl", f"dataset.path={sample_path()}", home=tmp_path)
    assert kit.returncode == 0, kit.stderr
    shown = yaml.safe_load(kit.stdout)
    assert shown["learning_rate"] == kit_defaults.KIT_SFT_LR and shown["steps"] == kit_defaults.KIT_SFT_STEPS
    assert "learning_rate: 0.003  # the kit base's measured SFT recipe (KIT_SFT_LR)" in kit.stdout
    other = run_cli("validate", "dataset=jsonl", f"dataset.path={sample_path()}", "base_model=Qwen/Qwen3-0.6B",
                    home=tmp_path, env=cached_hub_base(tmp_path, "Qwen/Qwen3-0.6B"))
    shown = yaml.safe_load(other.stdout)
    assert shown["learning_rate"] == defaults.TRAINING_KNOBS["learning_rate"]["sft"]["default"]
    assert shown["epochs"] == defaults.TRAINING_KNOBS["epochs"]["sft"]["default"] and shown["steps"] is None
