"""whileai.core.spec's checks at their edges, each refusal in its exact words: the batch and step products
(split across processes, micro-batches, a GRPO group per device, the tokens one step holds), the knob declarations
read back (knob_of, knob_fields, is_whole, the table), aliases, unknown keys, the missing-keys rule and the JSON
form. Pure: no training, no platform."""

from __future__ import annotations

import numpy as np
import pytest

from whileai.core import _knob, _spec_io, _spec_models
from whileai.core import defaults as d
from whileai.core import spec as S
from whileai.core.runnerrecord import RunnerRecord
from whileai.core.spec import (
    DPOSpec,
    GRPOSpec,
    RMSpec,
    SFTSpec,
    canonical,
    knob,
    knob_fields,
    knob_of,
    micro_batches,
    micro_problem,
    missing_keys,
    parse_spec,
    read_job_spec,
    read_spec,
    same_run,
    spec_json,
    spec_problems,
    split_problem,
    step_memory,
    step_problem,
)

NO_GPU = "80 GiB (STEP_DEFAULT_GIB: the spec names no known gpu)"


def test_a_batch_that_does_not_divide_across_the_processes_is_refused_with_the_sizes_that_do():
    assert split_problem("batch_size", 30, 4) == (
        "batch_size=30 does not divide across 4 processes (processes x nodes): it is the effective batch, split "
        "evenly over the processes; pass a multiple of 4 (28, 32, 36, ...), or a world size that divides 30")
    assert split_problem("batch_size", 3, 4).startswith("batch_size=3 does not") and "(4, 8, ...)" in split_problem(
        "batch_size", 3, 4), "0 is no batch size"
    assert split_problem("b", 32, 4) is None and split_problem("b", 31, 1) is None and split_problem("b", 31, 0) is None
    assert spec_problems({"method": "sft", "batch_size": 30, "processes": 2, "nodes": 2}) == [
        split_problem("batch_size", 30, 4)]
    assert spec_problems({"method": "sft", "batch_size": 32, "processes": 2, "nodes": 2}) == []


def test_micro_batches_divide_a_processs_share_exactly():
    assert micro_batches(32, None) == (32, 1) and micro_batches(32, 32) == (32, 1) and micro_batches(32, 64) == (32, 1)
    assert micro_batches(32, 8) == (8, 4) and micro_batches(32, 31) == (31, 1)
    assert micro_problem(32, 5) == (
        "batch_per_device=5 does not divide a process's share of the effective batch (32): its micro-batches must "
        "add up to the share exactly; pass one that divides 32 (4, 2, 1, ...), or change batch_size")
    assert "pass one that divides 12 (6, 4, 3, ...)" in micro_problem(12, 7)
    for share, cap in ((32, 8), (32, 32), (32, 40), (32, 0), (32, -1), (1, 1)):
        assert micro_problem(share, cap) is None, (share, cap)
    assert spec_problems({"method": "sft", "batch_size": 32, "batch_per_device": 5}) == [micro_problem(32, 5)]
    assert spec_problems({"method": "sft", "batch_size": 32, "batch_per_device": 6, "processes": 2}) == [
        micro_problem(16, 6)], "the share is the batch over the processes"
    assert spec_problems({"method": "sft", "batch_size": 32, "batch_per_device": 8, "processes": 2}) == []
    refused = spec_problems({"method": "sft", "batch_size": 30, "batch_per_device": 7, "processes": 4})
    assert refused == [split_problem("batch_size", 30, 4)], "a batch that does not split is not also cut"


def test_a_grpo_device_holds_at_least_one_group():
    assert spec_problems({"method": "grpo", "batch_per_device": 2, "generations": 4}) == [
        "batch_per_device=2 is under generations=4: a device holds at least one prompt's group of completions; pass "
        "batch_per_device >= 4 (a multiple of it uses the memory fully), or fewer generations"]
    assert spec_problems({"method": "grpo", "batch_per_device": 4, "generations": 4}) == []
    assert spec_problems({"method": "grpo", "generations": 4}) == []


def test_the_memory_of_a_step_comes_from_the_gpu_named_or_the_default():
    assert step_memory(read_spec({"method": "grpo", "gpu": "A100-80GB:2"})) == (80, "80 GiB (a A100-80GB's)")
    assert step_memory(read_spec({"method": "grpo", "gpu": "T4"})) == (16, "16 GiB (a T4's)")
    assert step_memory(read_spec({"method": "grpo", "gpu": "TPU"})) == (80, NO_GPU)
    assert step_memory(read_spec({"method": "grpo"})) == (80, NO_GPU)


def test_a_grpo_step_over_the_targets_memory_is_refused_naming_the_product_and_the_knob_to_lower():
    assert spec_problems({"method": "grpo", "prompts_per_step": 4096, "generations": 64}) == [
        "grpo: prompts_per_step=4096 x generations=64 x max_completion_length=96 = 25,165,824 tokens in one step, "
        "over the 5,242,880 the target's memory can hold (STEP_TOKENS_PER_GIB=65,536 a GiB x 80 GiB "
        "(STEP_DEFAULT_GIB: the spec names no known gpu) x 1 process); lower prompts_per_step (to 853 or less), or "
        "generations, or max_completion_length, or name a gpu with more memory"]
    two = spec_problems({"method": "grpo", "prompts_per_step": 4096, "generations": 64, "processes": 2, "gpu": "T4"})
    assert two == [
        "grpo: prompts_per_step=4096 x generations=64 x max_completion_length=96 = 25,165,824 tokens in one step, "
        "over the 2,097,152 the target's memory can hold (STEP_TOKENS_PER_GIB=65,536 a GiB x 16 GiB (a T4's) x 2 "
        "processes); lower prompts_per_step (to 341 or less), or generations, or max_completion_length, or name a "
        "gpu with more memory"]
    limit = d.STEP_TOKENS_PER_GIB * 80
    exact = limit // (64 * 96)
    at = read_spec({"method": "grpo", "prompts_per_step": exact, "generations": 64, "max_completion_length": 96})
    assert step_problem(at) is None and exact * 64 * 96 <= limit < (exact + 1) * 64 * 96
    assert step_problem(at.model_copy(update={"prompts_per_step": exact + 1})).endswith(
        f"lower prompts_per_step (to {exact} or less), or generations, or max_completion_length, or name a gpu with "
        "more memory")


def test_a_pair_step_counts_two_sequences_and_the_micro_batch_when_it_is_smaller():
    assert spec_problems({"method": "dpo", "batch_size": 4096, "max_completion_length": 4096}) == [
        "dpo: batch_size=4096 x 2 (2 sequences a pair) x max_completion_length=4096 = 33,554,432 tokens in one step, "
        "over the 5,242,880 the target's memory can hold (STEP_TOKENS_PER_GIB=65,536 a GiB x 80 GiB "
        "(STEP_DEFAULT_GIB: the spec names no known gpu) x 1 process); lower batch_size (to 640 or less), or "
        "max_completion_length, or name a gpu with more memory"]
    rm = read_spec({"method": "rm"}).model_copy(update={"batch_size": 4096})
    assert _spec_models._step_factors(rm) == [("batch_size", 4096), ("2 sequences a pair", 2), ("TRAIN_MAX_LENGTH", 2048)]
    assert step_problem(rm) == (
        "rm: batch_size=4096 x 2 (2 sequences a pair) x 2048 (TRAIN_MAX_LENGTH) = 16,777,216 tokens in one step, "
        "over the 5,242,880 the target's memory can hold (STEP_TOKENS_PER_GIB=65,536 a GiB x 80 GiB "
        "(STEP_DEFAULT_GIB: the spec names no known gpu) x 1 process); lower batch_size (to 1280 or less), or name "
        "a gpu with more memory")
    micro = rm.model_copy(update={"batch_per_device": 512, "processes": 4})
    assert _spec_models._step_factors(micro) == [("batch_per_device", 512), ("processes x nodes", 4), ("2 sequences a pair", 2),
                                      ("TRAIN_MAX_LENGTH", 2048)]
    whole = rm.model_copy(update={"batch_per_device": 1024, "processes": 4})
    assert _spec_models._step_factors(whole)[0] == ("batch_size", 4096), "a cap that holds the whole share is the batch"
    assert _spec_models._step_factors(read_spec({"method": "sft"})) == [] and step_problem(read_spec({"method": "sft"})) is None
    dpo = read_spec({"method": "dpo", "batch_size": 8, "max_completion_length": 100})
    assert _spec_models._step_factors(dpo) == [("batch_size", 8), ("2 sequences a pair", 2), ("max_completion_length", 100)]


def test_only_a_reward_model_neither_continues_nor_is_continued():
    assert [m for m in S.SPEC_MODELS if S.continues_runs(m)] == ["sft", "grpo", "dpo"]


def test_a_knob_has_a_range_choices_or_a_pattern_and_its_row_says_which():
    for bad in ({}, {"range": (0, 1), "choices": (1,)}):
        with pytest.raises(TypeError, match="a knob has a range, choices or a pattern"):
            knob(1, help="h", **bad)
    knob(1, help="h", pattern="x")
    row = knob_of(SFTSpec, "lora_rank").row()
    assert row == {"default": d.TRAIN_LORA_R, "paper": 64, "source": "QLoRA, arXiv:2305.14314",
                   "reason": "TRAIN_LORA_R", "help": "rank of the LoRA update", "range": (1, 1024)}
    meta = S.Knob(help="h", surface="config", default=None, choices=("a",), open_low=True, many=True, pattern="p",
                  pattern_hint="hint")
    assert meta.row() == {"default": None, "paper": None, "source": "", "reason": "", "help": "h", "choices": ("a",),
                          "open_low": True, "many": True, "pattern": "p", "pattern_hint": "hint"}
    with pytest.raises(KeyError, match="method is not a knob of SFTSpec"):
        knob_of(SFTSpec, "method")


def test_the_knob_fields_and_whole_numbers_are_read_from_the_declarations():
    fields = knob_fields(SFTSpec)
    assert fields[:4] == ["seed", "min_mixed_tasks", "lora_rank", "lora_alpha"]
    assert "method" not in fields and "gpu" not in fields and set(S.NOT_KNOBS).isdisjoint(fields)
    assert S.is_whole(SFTSpec, "lora_rank") and S.is_whole(SFTSpec, "batch_per_device")
    assert not S.is_whole(SFTSpec, "learning_rate") and not S.is_whole(SFTSpec, "tool_format")
    table = S.knob_table()
    assert set(table["lora_rank"]) == {"sft", "grpo", "dpo", "rm"} and table["seed"]["sft"]["range"] == (0, 2**32 - 1)
    arguments = S.knob_table("argument")
    assert "seed" in arguments and "lora_rank" not in arguments
    assert set(S.knob_table("argument", "config")) == set(table) - set(S.knob_table("export"))


def test_none_means_the_default_only_for_a_knob_whose_values_exclude_none():
    assert _knob._unset(SFTSpec, "lora_rank") and not _knob._unset(SFTSpec, "batch_per_device")
    assert not _knob._unset(SFTSpec, "gpu") and not _knob._unset(SFTSpec, "nope")
    assert read_spec({"method": "sft", "lora_rank": None}).lora_rank == d.TRAIN_LORA_R
    assert missing_keys({"method": "sft", "lora_rank": None, "batch_per_device": None})[:2] == ["base_model", "seed"]
    assert "lora_rank" in missing_keys({"method": "sft", "lora_rank": None})
    assert "batch_per_device" not in missing_keys({"method": "sft", "batch_per_device": None})


def test_missing_keys_are_the_base_and_every_knob_a_resolved_spec_would_name():
    full = spec_json(read_spec({"method": "dpo", "base_model": "b"}))
    resolved = {**full, **{name: getattr(read_spec(full), name) for name in knob_fields(DPOSpec)}}
    assert missing_keys(resolved) == []
    assert missing_keys({k: v for k, v in resolved.items() if k != "base_model"}) == ["base_model"]
    assert missing_keys({"method": "x"}) == ["method"] and missing_keys({}) == ["method"]
    assert missing_keys({"method": "dpo", "loraRank": 8})[:3] == ["base_model", "seed", "min_mixed_tasks"]
    assert "lora_rank" not in missing_keys({"method": "dpo", "loraRank": 8}), "an alias names its knob"


def test_an_alias_is_renamed_and_the_canonical_spelling_wins_unless_it_is_none():
    assert canonical({"loraRank": 8, "seed": 1}) == {"lora_rank": 8, "seed": 1}
    assert canonical({"loraRank": 8, "lora_rank": 16}) == {"lora_rank": 16}
    assert canonical({"lora_rank": 16, "loraRank": 8}) == {"lora_rank": 16}
    assert canonical({"lora_rank": None, "loraRank": 8}) == {"lora_rank": 8}
    assert canonical({"loraRank": 8, "lora_rank": None}) == {"lora_rank": 8}


def test_unknown_keys_are_named_together_and_each_other_problem_once():
    problems = spec_problems({"method": "sft", "bogus": 1, "other": 2, "lora_rank": "x"})
    known = ", ".join(sorted(f for f in SFTSpec.model_fields if f not in S.BOOKKEEPING))
    assert problems == [f"bogus, other are not sft settings; use one of: {known}",
                        "lora_rank='x': Input should be a valid integer, unable to parse string as an integer"]
    assert spec_problems({"method": "rm", "bogus": 1})[0].startswith("bogus is not a rm setting; use one of: ")
    assert spec_problems({"method": "nope"}) == ["method='nope' is not a training method; pass one of sft, grpo, dpo, rm"]
    assert spec_problems({"method": ["sft"]}) == ["method=['sft'] is not a training method; pass one of sft, grpo, dpo, rm"]
    assert spec_problems({}) == ["method=None is not a training method; pass one of sft, grpo, dpo, rm"]
    assert spec_problems({"method": "sft", "lora_rank": 0, "seed": -1}) == [
        p for p in spec_problems({"method": "sft", "lora_rank": 0, "seed": -1})], "every knob's range problem"
    assert len(spec_problems({"method": "sft", "lora_rank": 0, "seed": -1})) == 2


def test_a_long_value_or_key_is_cut_in_a_message_saying_how_long_it_was():
    long = "x" * (d.SPEC_SHOWN_CHARS + 50)
    assert _spec_io._cut(long) == long[: d.SPEC_SHOWN_CHARS] + f"... ({len(long):,} characters)"
    assert _spec_io._cut(long[: d.SPEC_SHOWN_CHARS]) == long[: d.SPEC_SHOWN_CHARS]
    assert _spec_io._shown("ab") == "'ab'"
    (unknown,) = spec_problems({"method": "sft", long: 1})
    assert unknown.startswith(long[: d.SPEC_SHOWN_CHARS] + f"... ({len(long):,} characters) is not a sft setting")
    (wrong,) = spec_problems({"method": "sft", "lora_rank": long})
    assert wrong.startswith("lora_rank='" + "x" * (d.SPEC_SHOWN_CHARS - 1) + f"... ({len(long) + 2:,} characters): ")


def test_read_spec_raises_with_every_problem_and_a_retired_key_is_dropped():
    with pytest.raises(ValueError) as raised:
        read_spec({"method": "sft", "bogus": 1, "lora_rank": "x"})
    problems = spec_problems({"method": "sft", "bogus": 1, "lora_rank": "x"})
    assert str(raised.value) == "not a run spec: " + "; ".join(problems) and len(problems) == 2
    spec, none = parse_spec({"method": "grpo", "trl_defaults_overridden": {}, "mask_truncated_completions": True})
    assert none == [] and isinstance(spec, GRPOSpec) and spec.spec_version == S.SPEC_VERSION
    assert parse_spec({"method": "sft", "spec_version": 1})[0].spec_version == 1
    assert parse_spec({"method": "nope"}) == (None, ["method='nope' is not a training method; pass one of sft, grpo, dpo, rm"])


def test_one_same_run_rule_ignores_bookkeeping_provenance_and_an_unset_target():
    a = {"method": "sft", "seed": 1, "target": "modal", "run_id": "run_1", "dataset": "ds", "provenance": {"a": "b"},
         "spec_version": 3, "init_adapter": "x"}
    assert same_run(a, {"method": "sft", "seed": 1}) and same_run(a, {"method": "sft", "seed": 1, "target": None})
    assert same_run(a, {"method": "sft", "seed": 1, "target": "modal"})
    assert not same_run(a, {"method": "sft", "seed": 1, "target": "local"}) and not same_run(a, {"method": "sft"})
    assert same_run({"method": "sft", "loraRank": 8}, {"method": "sft", "lora_rank": 8})
    assert not same_run({"method": "sft"}, {"method": "sft", "target": "modal"}), "a target named must match"


def test_a_job_row_reads_past_the_keys_the_platform_writes_and_the_json_form_round_trips():
    spec = read_spec({"method": "sft", "base_model": "b", "extra": {"n": 1}})
    row = {**spec_json(spec), **{key: 1 for key in S.JOB_ROW_KEYS}}
    assert read_job_spec(row) == spec
    assert spec_json(spec) == {"method": "sft", "base_model": "b", "extra": {"n": 1}, "spec_version": S.SPEC_VERSION}

    class Array:
        def tolist(self):
            return [1, 2]

    holds = SFTSpec.model_construct(method="sft", extra={"a": Array()})
    holds.model_fields_set.add("extra")
    assert spec_json(holds)["extra"] == {"a": [1, 2]}
    odd = SFTSpec.model_construct(method="sft", extra={"a": object()})
    odd.model_fields_set.add("extra")
    with pytest.raises(Exception, match=r"\(object\) in a run spec has no JSON form; pass numbers, strings, lists"):
        spec_json(odd)


def test_each_method_has_its_model_and_rm_and_dpo_are_told_apart():
    assert {m: _spec_io._model({"method": m}) for m in S.SPEC_MODELS} == {"sft": SFTSpec, "grpo": GRPOSpec, "dpo": DPOSpec,
                                                                    "rm": RMSpec}
    with pytest.raises(ValueError, match="method=3 is not a training method"):
        _spec_io._model({"method": 3})


def test_a_knob_declaration_is_a_field_carrying_every_part_of_it():
    field = knob(7, help="h", surface="argument", reason="r", range=(1, 9), open_low=True, paper=8, source="s", many=True,
                 pattern="p", pattern_hint="ph")
    assert field.default == 7 and field.description == "h"
    assert field.json_schema_extra == {"knob": S.Knob(help="h", surface="argument", default=7, reason="r", range=(1, 9),
                                                      choices=None, open_low=True, paper=8, source="s", many=True,
                                                      pattern="p", pattern_hint="ph")}
    plain = knob(None, help="h", choices=("a", "b")).json_schema_extra["knob"]
    assert plain == S.Knob(help="h", surface="config", default=None, choices=("a", "b"))
    assert (plain.reason, plain.source, plain.pattern_hint, plain.open_low, plain.many) == ("", "", "", False, False)
    assert knob(1, help="h", range=(0, 2)).json_schema_extra["knob"].range == (0, 2)
    with pytest.raises(TypeError, match=r"^a knob has a range, choices or a pattern: not a range with choices, and not "
                                        r"none$"):
        knob(1, help="h")


def test_the_step_bound_admits_a_step_of_exactly_the_targets_tokens():
    limit = d.STEP_TOKENS_PER_GIB * 80
    at = read_spec({"method": "grpo", "prompts_per_step": 1024, "generations": 64, "max_completion_length": 80})
    assert 1024 * 64 * 80 == limit and step_problem(at) is None
    assert split_problem("batch_size", 31, 2) == (
        "batch_size=31 does not divide across 2 processes (processes x nodes): it is the effective batch, split evenly "
        "over the processes; pass a multiple of 2 (30, 32, 34, ...), or a world size that divides 31")


def test_an_alias_set_first_keeps_its_value_and_the_keys_after_it_are_read():
    assert canonical({"loraRank": 8, "lora_rank": None, "seed": 1}) == {"lora_rank": 8, "seed": 1}
    assert _knob._unset(SFTSpec, "no_such_field") is False and _knob._unset(SFTSpec, "processes") is False, "not a knob"


def test_a_nested_key_is_named_by_its_path():
    assert spec_problems({"method": "sft", "runner": {"stage_index": "x"}}) == [
        "runner.stage_index='x': Input should be a valid integer, unable to parse string as an integer"]


def test_the_json_form_holds_json_types_only_and_a_jobs_copy_names_its_run_and_dataset():
    spec = read_spec({"method": "sft", "base_model": "b", "extra": {"t": (1, 2)}})
    assert spec_json(spec)["extra"] == {"t": [1, 2]} and isinstance(spec_json(spec)["extra"]["t"], list)
    assert S.job_json(spec, "run_1", "ds_1") == {**spec_json(spec), "run_id": "run_1", "dataset": "ds_1"}


def test_an_update_is_validated_again_over_the_fields_the_spec_was_given():
    spec = read_spec({"method": "sft", "base_model": "b", "seed": 3})
    changed = S.updated(spec, seed=5, holdout="ds_h")
    assert (changed.seed, changed.holdout, changed.base_model) == (5, "ds_h", "b") and type(changed) is SFTSpec
    assert changed.model_fields_set == spec.model_fields_set | {"holdout"}
    with pytest.raises(Exception, match="lora_rank=0 is outside"):
        S.updated(spec, lora_rank=0)


def test_a_python_ref_is_a_string_that_starts_with_the_prefix():
    assert S.is_python_ref("python:mod:fn") and S.is_python_ref(S.PYTHON_PREFIX)
    assert not S.is_python_ref("fine_grained") and not S.is_python_ref("rm:python:x")
    assert not S.is_python_ref(None) and not S.is_python_ref(3), "not a string: no ref, and no error"


#: the reward knobs of a GRPO spec, and every problem environment_reward_problems finds in them, word for word
ENVIRONMENT_REWARD_CASES = [
    ({"environment": None, "turn_reward": None}, []),
    ({"environment": None, "reward": "fine_grained", "reward_weights": [1.0]}, []),
    ({"environment": None, "turn_reward": "fine_grained"},
     ["turn_reward=fine_grained scores an episode's calls against its gold calls, and this spec plays no environment "
      "(environment=None); pick an environment (environment=kit, bfcl or python:MODULE:CLASS), or leave turn_reward "
      "None (single-turn prompts: reward=fine_grained pays the first action's parts)"]),
    ({"environment": "bfcl:multi_turn_base", "turn_reward": "first_action"},
     ["turn_reward=first_action scores a rollout's calls against the gold calls of the whole entry, and in "
      "environment=bfcl:multi_turn_base GRPO's rollouts play only the entry's first user turn (TRL's tool loop has no "
      "next user turn), so every later turn's gold call would count as missed; leave turn_reward None (the episode "
      "judge, BFCL's check of the turns played, pays it), or play environment=kit"]),
    ({"environment": "bfclish", "turn_reward": "first_action"}, []),
    ({"environment": "kit", "reward": "python:m:f", "turn_reward": None}, []),
    ({"environment": "kit", "reward": ["python:m:f"], "reward_weights": [2.0]}, []),
    ({"environment": "kit", "reward": ["python:m:f", "python:m:g"], "turn_reward": "first_action"},
     ["turn_reward=first_action scores calls beside the episode judge, and reward=python:m:f,python:m:g is paid in the "
      "judge's place (environment=kit), so there is no judge for it to sit beside; score the calls inside your reward "
      "function, or leave turn_reward None"]),
    ({"environment": "kit", "turn_reward": "fine_grained"}, []),
    ({"environment": "kit", "reward": ["first_action"], "turn_reward": None}, []),
    ({"environment": "kit", "reward": "fine_grained", "reward_weights": [1.0]},
     ["reward=fine_grained is not read in environment=kit: there the reward is the episode judge (the end state and "
      "the final reply), and per-turn scores come from turn_reward; pass turn_reward=fine_grained (weighted by "
      "turn_reward_weight) and leave reward at its default (first_action), or play without an environment",
      "reward_weights=[1.0] is not read in environment=kit: the episode judge weighs 1.0 and turn_reward's score "
      "turn_reward_weight; pass turn_reward_weight=... and leave reward_weights None"]),
    ({"environment": "kit", "reward": ["python:m:f", "rm"], "turn_reward": None},
     ["reward=python:m:f,rm is not read in environment=kit: there the reward is the episode judge (the end state and "
      "the final reply), and per-turn scores come from turn_reward; pass turn_reward=first_action or fine_grained "
      "(weighted by turn_reward_weight) and leave reward at its default (first_action), or play without an "
      "environment"]),
]


@pytest.mark.parametrize("values, problems", ENVIRONMENT_REWARD_CASES)
def test_environment_reward_problems_name_each_knob_that_would_not_be_read(values, problems):
    assert S.environment_reward_problems(values) == problems


def test_spec_json_writes_holdout_and_runner_beside_the_spec_in_field_order():
    spec = read_spec({"method": "sft", "base_model": "b"})
    # a numpy value and a tuple a user's record may carry: JSON has neither
    runner = RunnerRecord(recipe="r", stage="sft", count=np.int64(3), pair=(1, 2))
    assert spec_json(spec, holdout="ds_h") == {"spec_version": S.SPEC_VERSION, "method": "sft", "base_model": "b",
                                               "holdout": "ds_h"}
    started = read_spec({"method": "sft", "base_model": "b", "init_from": "run_0"})
    assert list(spec_json(started)) == ["spec_version", "method", "base_model", "init_from"]
    assert list(spec_json(started, holdout="ds_h")) == ["spec_version", "method", "base_model", "holdout", "init_from"]
    with_runner = spec_json(spec, runner=runner)
    assert with_runner["runner"] == {"recipe": "r", "stage": "sft", "count": 3, "pair": [1, 2]}, "only what it set"
    assert type(with_runner["runner"]["count"]) is int and type(with_runner["runner"]["pair"]) is list, "as JSON"
    assert "holdout" not in with_runner
    both = S.job_json(spec, "run_1", "ds_1", holdout="ds_h", runner=runner)
    assert both == {"spec_version": S.SPEC_VERSION, "method": "sft", "base_model": "b", "holdout": "ds_h",
                    "runner": {"recipe": "r", "stage": "sft", "count": 3, "pair": [1, 2]}, "run_id": "run_1",
                    "dataset": "ds_1"}


def test_without_an_environment_or_in_bfcl_the_filter_is_refused_naming_why():
    alone = S.environment_reward_problems({"environment": None, "prompt_filter_pool": 64})
    assert alone == ["prompt_filter_pool=64 chooses GRPO's prompts by the start's sampled episodes, and this spec "
                     "plays no environment (environment=None): single-turn GRPO's prompt_source=mixed already trains "
                     "on tasks whose rollouts both pass and fail; leave prompt_filter_pool None, or play "
                     "environment=kit or python:MODULE:CLASS"]
    bfcl = S.environment_reward_problems({"environment": "bfcl:multi_turn_base", "prompt_filter_pool": 64})
    assert bfcl == ["prompt_filter_pool=64 chooses GRPO's prompts by the start's sampled episodes, and in "
                    "environment=bfcl:multi_turn_base GRPO's rollouts play only an entry's first user turn while the "
                    "filter would play every turn; leave prompt_filter_pool None, or play environment=kit or "
                    "python:MODULE:CLASS"]
    assert S.environment_reward_problems({"environment": "bfcl", "prompt_filter_pool": 64}) == [
        bfcl[0].replace("bfcl:multi_turn_base", "bfcl")]
    assert S.environment_reward_problems({"environment": "python:team_envs.bank:Bank", "prompt_filter_pool": 9}) == []
    # reported with the spec's other problems, all at once
    both = S.environment_reward_problems({"environment": None, "prompt_filter_pool": 8, "turn_reward": "fine_grained"})
    assert [p.split("=")[0] for p in both] == ["prompt_filter_pool", "turn_reward"]
    assert S.environment_reward_problems({"environment": "kit", "prompt_filter_pool": 64}) == []
    assert S.environment_reward_problems({"environment": None, "prompt_filter_pool": None}) == []
    with pytest.raises(ValueError, match="prompt_filter_pool=64 chooses"):
        S.GRPOSpec(prompt_filter_pool=64)
    with pytest.raises(ValueError, match="prompt_filter_pool=0"):
        S.GRPOSpec(prompt_filter_pool=0, environment="kit")
    assert S.GRPOSpec(prompt_filter_pool=64, environment="kit").prompt_filter_pool == 64
