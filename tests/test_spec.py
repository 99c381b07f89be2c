"""The typed run spec (whileai.core.spec), the one knob checker, and the trainer's resolved-config record."""

from __future__ import annotations

import pytest

from whileai.core import knobs
from whileai.core.spec import (
    ALIASES,
    SPEC_MODELS,
    SPEC_VERSION,
    NOT_KNOBS,
    GRPOSpec,
    SFTSpec,
    canonical,
    read_spec,
    same_run,
    spec_problems,
)
from whileai.domain import defaults


def _table_knobs(method: str) -> set[str]:
    """Every knob the knob table gives ``method``, in canonical spelling."""
    tables = (defaults.TRAINING_KNOBS, defaults.TRAINING_HOST_KEYS)
    names = {name for table in tables for name, per_method in table.items() if method in per_method}
    return {ALIASES.get(n, n) for n in names}


_NOT_KNOBS = set(NOT_KNOBS)


@pytest.mark.parametrize("method", sorted(SPEC_MODELS))
def test_each_method_model_has_exactly_the_knobs_the_table_gives_it(method):
    fields = set(SPEC_MODELS[method].model_fields) - _NOT_KNOBS
    assert fields == _table_knobs(method)


def test_aliases_are_read_and_recorded_in_canonical_form():
    old = {"method": "grpo", "base_model": "b", "loraRank": 8, "epsilonHigh": 0.28, "scaleRewards": "group",
           "goldJudge": "run_x", "beta": 0.04}
    spec = read_spec(old)
    assert isinstance(spec, GRPOSpec) and spec.lora_rank == 8 and spec.epsilon_high == 0.28
    assert spec.scale_rewards == "group" and spec.gold_judge == "run_x" and spec.spec_version == SPEC_VERSION
    dumped = spec.model_dump(exclude_none=True)
    assert not set(dumped) & set(ALIASES) and dumped["lora_rank"] == 8
    assert canonical({"loraRank": 4, "lora_rank": 8}) == {"lora_rank": 8}  # both given: the canonical one wins
    assert canonical({"lora_rank": None, "loraRank": 4}) == {"lora_rank": 4}  # ... unless it is unset
    assert canonical({"loraRank": 4, "lora_rank": None}) == {"lora_rank": 4}


def test_a_version_one_record_still_reads():
    """Runs recorded before the typed spec (camelCase host keys, no version) read and keep their values."""
    record = {"method": "sft", "base_model": "whileai/tiny-tooluse-base", "target": "local", "holdout": "ds_1",
              "steps": 300, "epochs": None, "learning_rate": 0.003, "seed": 0, "min_mixed_tasks": 32,
              "mask_mode": "assistant", "unroll": False, "strip_think": True, "max_tool_output_chars": None,
              "loraRank": 16, "loraAlpha": 32, "batchSize": 8, "holdoutRows": 200, "metric": "pass_rate"}
    spec = read_spec(record)
    assert isinstance(spec, SFTSpec) and spec.batch_size == 8 and spec.holdout_rows == 200
    assert spec.knobs()["learning_rate"] == 0.003


def test_every_problem_is_named_at_once():
    problems = spec_problems({"method": "dpo", "beta": "high", "generations": 4, "lora_rank": "x"})
    text = "\n".join(problems)
    assert len(problems) == 3, problems
    assert "generations is not a dpo setting" in text and "beta='high'" in text and "lora_rank='x'" in text
    assert spec_problems({"method": "ppo"}) == ["method='ppo' is not a training method; pass one of sft, grpo, dpo, rm"]
    with pytest.raises(ValueError, match="not a run spec"):
        read_spec({"method": "sft", "loraRank": "big"})


def test_one_same_run_rule():
    a = {"method": "sft", "steps": 10, "target": "local", "loraRank": 16}
    assert same_run(a, {"method": "sft", "steps": 10, "target": None, "lora_rank": 16})  # None: the platform's default
    assert same_run(a, {"method": "sft", "steps": 10, "target": "local", "lora_rank": 16, "spec_version": 2})
    assert not same_run(a, {"method": "sft", "steps": 11, "target": None, "lora_rank": 16})
    assert not same_run(a, {"method": "sft", "steps": 10, "target": "modal", "lora_rank": 16})


def test_the_one_knob_checker_words_both_surfaces():
    row = defaults.TRAINING_KNOBS["beta"]
    sdk = knobs.check_knob("beta", 2.0, "grpo", row)
    runner = knobs.check_knob("beta", 2.0, "grpo", row, label="method.beta", unset="null")
    assert sdk.startswith("beta=2 is outside") and sdk.endswith("leave it None")
    assert runner.startswith("method.beta=2 is outside") and runner.endswith("leave it null")
    assert sdk.split(" is outside ")[1].split(";")[0] == runner.split(" is outside ")[1].split(";")[0]
    assert "is not read by sft" in knobs.check_knob("beta", 0.1, "sft", row, suggest_method=True)
    assert knobs.check_knob("steps", 2.5, "sft", defaults.TRAINING_KNOBS["steps"], whole=True).startswith(
        "steps=2.5 is not a whole number")
    assert knobs.check_knob("beta", 0.04, "grpo", row) is None


def test_the_trainer_record_holds_every_field_and_marks_library_defaults(tmp_path):
    import dataclasses

    from trl import SFTConfig

    from whileai.jobs.trainer_record import resolved_trainer_config
    from whileai.runner.trainer_diff import trainer_differences

    args = SFTConfig(output_dir=str(tmp_path), learning_rate=1e-3, max_steps=5, report_to=[], use_cpu=True, bf16=False)
    record = resolved_trainer_config(args)
    assert record["config_class"] == "SFTConfig"
    assert {f.name for f in dataclasses.fields(args)} <= set(record["config"]) | {"push_to_hub_token"}
    assert "learning_rate" not in record["library_defaults"] and "weight_decay" in record["library_defaults"]
    assert record["versions"]["trl"] and record["versions"]["transformers"]

    # The same spec under a library whose default moved: the difference is the library's, not the user's.
    upgraded = {**record, "config": {**record["config"], "weight_decay": 0.1},
                "versions": {**record["versions"], "trl": "99.0"}}
    user = {**record, "config": {**record["config"], "learning_rate": 2e-3},
            "library_defaults": [k for k in record["library_defaults"]]}
    rows = trainer_differences({"summary": {"trainer": record}}, {"summary": {"trainer": upgraded}})
    assert rows == [["weight_decay", "0.0", "0.1", f"library default (trl {record['versions']['trl']} -> 99.0)"]]
    rows = trainer_differences({"summary": {"trainer": record}}, {"summary": {"trainer": user}})
    assert rows == [["learning_rate", "0.001", "0.002", "set by the spec"]]
    assert trainer_differences({"summary": {}}, {"summary": {"trainer": record}}) == []
