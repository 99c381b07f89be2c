"""A reward model that starts from a policy: ``init_from: stages.NAME`` in a recipe, the stage plan that follows
from it, the checks that refuse a start that is not an earlier policy stage, and the loader that puts a causal
LM's LoRA into a sequence classifier's backbone (``whileai.jobs._loading.classifier_from_policy``).

The whole path (an SFT stage, then the reward model from it, through ``python -m whileai run``) runs in
tests/test_runner_e2e.py's rm_tooluse sweep; its figures are recipes/MEASUREMENTS.md's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_runner_validate import compose


def _plan(overrides: list[str]):
    from whileai.runner.schema import recipe_spec
    from whileai.runner.stages import plan_stages

    plain, problems = compose(overrides)
    assert problems == []
    return {s.name: s for s in plan_stages(recipe_spec(plain))}


def test_a_reward_model_starts_from_the_policy_stage_it_names_and_only_then():
    stages = _plan(["recipe=rm_tooluse"])
    assert list(stages) == ["sft", "rm"] and stages["rm"].start == "sft" and stages["sft"].start is None
    # without init_from a reward-model stage starts from the base, as before (hack/rm_proxy's proxy comes first;
    # its GRPO continues the SFT stage, never the reward model)
    stages = _plan(["recipe=hack/rm_proxy"])
    assert stages["proxy"].start is None and stages["sft"].start is None and stages["grpo"].start == "sft"
    stages = _plan(["recipe=rm_tooluse", "~init_from"])
    assert stages["rm"].start is None


def test_init_from_that_names_no_earlier_policy_stage_is_refused_with_every_reason_at_once():
    _, problems = compose(["recipe=hack/rm_proxy", "+stages.proxy.init_from=stages.sft",
                           "+stages.sft.init_from=stages.proxy", "init_from=sft"])
    by_key = {p.key: p.message for p in problems}
    assert set(by_key) == {"stages.proxy.init_from", "stages.sft.init_from", "init_from"}
    assert by_key["stages.proxy.init_from"] == (
        "stages.proxy.init_from='stages.sft' names no stage written before this one: a stage starts from an earlier "
        "policy stage (sft, grpo, dpo) of this spec; add an sft, grpo or dpo stage before it, or drop init_from (a "
        "policy stage continues the latest earlier policy stage on its own)")
    assert by_key["stages.sft.init_from"] == (
        "stages.sft.init_from='stages.proxy' names an rm stage, which writes no rows to start from: a stage starts "
        "from an earlier policy stage (sft, grpo, dpo) of this spec; add an sft, grpo or dpo stage before it, or drop "
        "init_from (a policy stage continues the latest earlier policy stage on its own)")
    assert by_key["init_from"] == (
        "init_from='sft' is not stages.NAME: a stage starts from an earlier policy stage (sft, grpo, dpo) of this "
        "spec; name one of them: stages.sft")
    _, problems = compose(["recipe=rm_tooluse", "init_from=stages.sft"])
    assert problems == []


def test_expect_compares_a_reward_model_with_no_start_even_when_it_began_as_a_policy():
    """stage_gain_min reads the start's "after": a policy's pass rate is not a reward model's pair accuracy."""
    from types import SimpleNamespace

    from whileai.runner.expect import outcome_of

    def run(method: str, after: float, run_id: str) -> SimpleNamespace:
        return SimpleNamespace(id=run_id, status="done", summary={}, training={"method": method, "after": after},
                               cost_usd=None, cost_basis=None)

    policy = run("sft", 0.9, "run_sft")
    assert outcome_of(run("rm", 0.95, "run_rm"), policy)["previous_run"] is None
    assert outcome_of(run("rm", 0.95, "run_rm"), policy)["previous_after"] is None
    assert outcome_of(run("grpo", 0.95, "run_grpo"), policy)["previous_run"] == "run_sft"


@pytest.fixture(scope="module")
def policy_adapter(tmp_path_factory):
    """A causal LM LoRA on the kit's tiny random base, its B matrices set non-zero so a load is visible."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from whileai.kit._base import tiny_model_dir

    base = tiny_model_dir()
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_()
    folder = tmp_path_factory.mktemp("policy")
    model.save_pretrained(folder)
    return base, folder


def _classifier(base: Path, folder: Path, **spec: object):
    from transformers import AutoModelForSequenceClassification

    from whileai.core.spec import RMSpec
    from whileai.jobs._loading import classifier_from_policy

    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    return classifier_from_policy(model, RMSpec(init_from="run_policy", init_adapter=str(folder), **spec))


def test_the_policy_s_lora_loads_into_the_classifier_s_backbone_with_a_fresh_trainable_head(policy_adapter,
                                                                                           tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file

    base, folder = policy_adapter
    model = _classifier(base, folder)
    saved = load_file(str(folder / "adapter_model.safetensors"))
    state = {k.replace(".default", ""): v for k, v in model.state_dict().items()}
    assert saved and all(name in state and state[name].equal(value) for name, value in saved.items())
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert any("lora_B" in n for n in trainable) and any("score" in n for n in trainable)
    assert model.peft_config["default"].r == 4 and model.peft_config["default"].task_type == "SEQ_CLS"
    # what the run saves is the whole reward model: the base plus this adapter scores as the trained one does
    model.save_pretrained(tmp_path / "rm")
    config = json.loads((tmp_path / "rm" / "adapter_config.json").read_text())
    assert "score" in config["modules_to_save"] and config["task_type"] == "SEQ_CLS"
    from transformers import AutoModelForSequenceClassification

    again = PeftModel.from_pretrained(AutoModelForSequenceClassification.from_pretrained(base, num_labels=1),
                                      tmp_path / "rm")
    ids = __import__("torch").tensor([[1, 2, 3, 4]])
    model.eval()
    assert again(input_ids=ids).logits.equal(model(input_ids=ids).logits)


def test_a_policy_adapter_that_does_not_fit_the_backbone_stops_the_job_naming_its_weights(policy_adapter, tmp_path):
    from safetensors.torch import load_file, save_file

    base, folder = policy_adapter
    weights = load_file(str(folder / "adapter_model.safetensors"))
    bent = tmp_path / "bent"
    bent.mkdir()
    (bent / "adapter_config.json").write_text((folder / "adapter_config.json").read_text())
    some = next(iter(weights))
    save_file({**weights, "base_model.model.lm_head.lora_A.weight": weights[some].clone()}, str(bent / "adapter_model.safetensors"))
    with pytest.raises(ValueError, match=r"does not fit this reward model's backbone: 1 of its weights find no "
                                         r"module here \(first: \['base_model.model.lm_head.lora_A.weight'\]\)"):
        _classifier(base, bent)
    del weights[some]
    save_file(weights, str(bent / "adapter_model.safetensors"))
    with pytest.raises(ValueError, match=r"0 of its weights find no module here \(first: \[\]\), 1 LoRA weights "
                                         r"here get none"):
        _classifier(base, bent)
    with pytest.raises(FileNotFoundError, match="the adapter of init_from run run_policy is not at"):
        _classifier(base, tmp_path / "nothing")


def test_the_rm_job_loads_its_start_policy_into_the_model_it_trains(policy_adapter):
    """``jobs.rm.load`` is what a job trains: with ``init_adapter`` its model carries the policy's LoRA, without it
    a bare classifier (the e2e sweep cannot tell the two apart: both train and pass on the tiny model)."""
    from safetensors.torch import load_file

    from whileai.core.spec import RMSpec
    from whileai.jobs import rm

    base, folder = policy_adapter
    model, _ = rm.load(RMSpec(base_model=str(base), init_from="run_policy", init_adapter=str(folder),
                              lora_rank=4, lora_alpha=8))
    state = {k.replace(".default", ""): v for k, v in model.state_dict().items()}
    saved = load_file(str(folder / "adapter_model.safetensors"))
    assert all(state[name].equal(value) for name, value in saved.items())
    bare, _ = rm.load(RMSpec(base_model=str(base)))
    assert not any("lora_" in name for name in bare.state_dict())
