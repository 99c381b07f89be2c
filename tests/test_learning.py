"""The methods learn: SFT, DPO and the reward model at the committed recipes' settings beat their start significantly.

GRPO's is tests/test_design_card.py: grpo_tooluse as committed, through the runner, at an untuned seed on another
CPU kernel path.

Unlike tests/test_jobs.py and tests/test_stages.py, which train the kit's random
tiny model to prove the plumbing, these train the kit's pre-trained demo base
(built once per session in the session's data root and shared by every test
here) with the job bodies themselves (``whileai.jobs.sft`` / ``grpo``: the same
``fit`` and held-out judge a hosted run uses), on a pinned seed:

- SFT at dpo_tooluse's SFT stage settings (``stages.sft``, the hack recipe's
  too) lifts the held-out first-action pass rate of the bare base;
- DPO at dpo_tooluse's settings, from its SFT stage's adapter (cached for the
  module), lifts the same held-out prompts above the SFT start;
- a reward model at rm_tooluse's settings (near misses on, its full steps)
  lifts the held-out pair accuracy of its fresh head to the recipe's floor (0.9)
  or more and tells a right tool with a wrong value apart (trained on the rows' own
  pairs alone, it stayed near chance);
- the hack recipe (a reward that reads the tool name only) hacks, and the
  monitor raises an alarm of the kind the recipe expects.

"Significantly" is the exact McNemar test over the same held-out prompts
(``whileai.core.stats``): p < ALPHA on the prompts that changed, and more
prompts gained than lost.
"""

from __future__ import annotations

from whileai.core.spec import read_spec
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ALPHA = 0.05
SEED = 0
RECIPES = Path(__file__).resolve().parents[1] / "recipes"
RECIPE = RECIPES / "grpo_tooluse.yaml"
#: The reward model runs rm_tooluse as committed (1200 steps, about 300 s on one thread) and is held to its own
#: expect. Half the steps did not hold across CPU kernel paths on the packaged kit base (2026-12-05, seed 0, these
#: 53 held-out pairs): 43/53 native (AVX-512), 39/53 under avx2, 48/53 under default, and a right tool with a wrong
#: value 14-19 of 22; the full 1200 steps gave 50/53 on both native and avx2 (27 gained, 3 lost, p < 0.001), the
#: wrong-value pairs 19/22 and 20/22.


def _recipe(path: Path = RECIPE) -> dict[str, Any]:
    """The committed recipe's values, ``${wai.const:NAME}`` read where the runner reads them."""
    import yaml

    from whileai.runner.cli import _const

    text = re.sub(r"\$\{wai\.const:([A-Z0-9_]+)\}", lambda m: repr(_const(m.group(1))),
                  path.read_text(encoding="utf-8"))
    return yaml.safe_load(text)


def _outcomes(model: Any, tokenizer: Any, prompts: list[dict[str, Any]]) -> list[int]:
    from whileai.jobs import _evaluation
    from whileai.core import defaults as core_defaults
    from whileai.domain.judges.judging import judge_reply

    replies = _evaluation.generate_replies(model, tokenizer, prompts, core_defaults.TRAIN_EVAL_MAX_NEW_TOKENS)
    return [int(bool(judge_reply(text, row)["passed"])) for row, text in zip(prompts, replies, strict=True)]


def _significant_gain(before: list[int], after: list[int]) -> tuple[bool, str]:
    from whileai.core.stats import holdout_result

    paired = holdout_result(before, after)["paired"]
    b, c, p = paired["improved"], paired["worsened"], paired["p"]
    said = f"{sum(before)}/{len(before)} -> {sum(after)}/{len(after)} (gained {b}, lost {c}, exact McNemar p={p:.4f})"
    return b > c and p < ALPHA, said


@pytest.fixture(scope="module")
def split(session_home) -> dict[str, Any]:
    """The sample cut by task as the runner cuts it, and the held-out prompts the recipe measures."""
    from whileai.jobs import _evaluation
    from whileai.kit import load_sample
    from whileai.domain import defaults
    from whileai.simulations.datasets import split_tasks

    recipe = _recipe()
    rows = load_sample()
    train_idx, held_idx = split_tasks(rows, defaults.CUT_HOLDOUT, defaults.CUT_SEED)
    held = [rows[i] for i in held_idx]
    prompts = list(_evaluation.distinct_prompts(held, recipe["holdout_rows"], SEED))
    return {"train": [rows[i] for i in train_idx], "held": held, "prompts": prompts, "recipe": recipe}


@pytest.fixture(scope="module")
def sft_starts(split, tmp_path_factory) -> Any:
    """``sft_starts(recipe)``: SFT at ``recipe``'s SFT stage settings from the demo base, made once per distinct
    stage: outcomes before/after and the adapter folder."""
    import json

    made: dict[str, dict[str, Any]] = {}

    def get(recipe: dict[str, Any]) -> dict[str, Any]:
        stage = recipe["stages"]["sft"]
        key = json.dumps(stage, sort_keys=True, default=str)
        if key not in made:
            made[key] = _sft(stage, split, tmp_path_factory.mktemp("sft-start"))
        return made[key]

    return get


def _sft(stage: dict[str, Any], split: dict[str, Any], folder: Path) -> dict[str, Any]:
    from whileai.jobs import _environment, _loading, sft
    from whileai.kit import defaults as kit_defaults

    spec = {"method": "sft", "base_model": kit_defaults.KIT_BASE_NAME, "seed": SEED, "steps": int(stage["steps"]),
            "learning_rate": float(stage["learning_rate"]), "batch_size": int(stage.get("batch_size") or 8)}
    _environment.cpu_threads()
    _environment.seed_all(SEED)
    model, tokenizer = sft.load(read_spec(spec))
    before = _outcomes(model, tokenizer, split["prompts"])
    model, _ = sft.fit(read_spec(spec), model, tokenizer, [r for r in split["train"] if r["passed"]], folder / "job", [])
    after = _outcomes(model, tokenizer, split["prompts"])
    _loading.save_adapter(model, tokenizer, folder / "adapter")
    return {"before": before, "after": after, "adapter": folder / "adapter", "spec": spec}


@pytest.fixture(scope="module")
def sft_start(split, sft_starts) -> dict[str, Any]:
    """dpo_tooluse's SFT stage (the hack recipe's is the same, so the module runs one SFT)."""
    return sft_starts(_recipe(RECIPES / "dpo_tooluse.yaml"))


def _stage_from_sft(job: Any, spec: dict[str, Any], split: dict[str, Any], sft_start: dict[str, Any],
                    folder: Path) -> tuple[list[int], list[int], dict[str, Any]]:
    """``job`` (grpo or dpo) fitted from the cached SFT adapter: per-prompt outcomes before and after, and its extra."""
    from whileai.jobs import _environment

    spec = {**spec, "init_adapter": str(sft_start["adapter"]), "init_from": "sft-start"}
    _environment.cpu_threads()
    _environment.seed_all(SEED)
    model, tokenizer = job.load(read_spec(spec))
    start = _outcomes(model, tokenizer, split["prompts"])
    assert start == sft_start["after"], "the SFT adapter reloaded is not the policy SFT ended with"
    model, extra = job.fit(read_spec(spec), model, tokenizer, split["train"], folder, [], holdout=split["held"])
    return start, _outcomes(model, tokenizer, split["prompts"]), extra


def test_sft_at_the_recipe_settings_beats_the_bare_base_significantly(sft_start):
    ok, said = _significant_gain(sft_start["before"], sft_start["after"])
    assert ok, f"SFT at dpo_tooluse's SFT stage settings did not beat the bare base: {said}"


def test_dpo_from_the_cached_sft_adapter_beats_its_start_significantly(split, sft_starts, tmp_path):
    from whileai.jobs import dpo
    from whileai.domain import defaults
    from whileai.core import defaults as core_defaults
    from whileai.kit import defaults as kit_defaults

    recipe = _recipe(RECIPES / "dpo_tooluse.yaml")
    sft_start = sft_starts(recipe)
    spec = {"method": "dpo", "base_model": kit_defaults.KIT_BASE_NAME, "seed": SEED,
            "steps": int(recipe["steps"]), "learning_rate": float(recipe["learning_rate"]),
            "beta": float(recipe.get("beta") or defaults.TRAINING_KNOBS["beta"]["dpo"]["default"]),
            "loss_type": "sigmoid", "max_completion_length": core_defaults.TRAIN_EVAL_MAX_NEW_TOKENS,
            "pair_source": recipe["pair_source"], "policy_samples": int(recipe["policy_samples"]),
            "nll_weight": float(recipe["nll_weight"])}
    start, after, extra = _stage_from_sft(dpo, spec, split, sft_start, tmp_path)
    assert extra["pairs"] == extra["policy_pairs"]["pairs"] > 0
    ok, said = _significant_gain(start, after)
    assert ok, f"DPO at dpo_tooluse's settings did not beat its SFT start: {said}; pairs {extra['policy_pairs']}"


def test_rm_at_the_recipe_settings_tells_near_misses_apart(split, tmp_path):
    from whileai.jobs import _environment, rm
    from whileai.kit import defaults as kit_defaults

    recipe = _recipe(RECIPES / "rm_tooluse.yaml")
    assert recipe["near_misses"] > 0 and recipe["reward_span"] == "first_action"
    spec = {"method": "rm", "base_model": kit_defaults.KIT_BASE_NAME, "seed": SEED, "steps": int(recipe["steps"]),
            "learning_rate": float(recipe["learning_rate"]), "holdout_rows": int(recipe["holdout_rows"]),
            "reward_span": recipe["reward_span"], "balance": recipe["balance"], "near_misses": recipe["near_misses"]}
    _environment.cpu_threads()
    _environment.seed_all(SEED)
    model, tokenizer = rm.load(read_spec(spec))
    before = rm.evaluate(read_spec(spec), model, tokenizer, split["held"])
    model, extra = rm.fit(read_spec(spec), model, tokenizer, split["train"], tmp_path, [], holdout=split["held"])
    after = rm.evaluate(read_spec(spec), model, tokenizer, split["held"])
    assert len(after.outcomes) >= 40 and extra["near_misses"]["pairs"] > 2 * (extra["pairs"] - extra["near_misses"]["pairs"])
    ok, said = _significant_gain(list(before.outcomes), list(after.outcomes))
    assert ok and after.value >= recipe["expect"]["holdout_after_min"], (
        f"rm at rm_tooluse's settings: {said}, by failure kind {after.by_failure}")
    wrong = after.by_failure["wrong_argument"]
    assert wrong["right"] >= 0.8 * wrong["pairs"], f"a right tool with a wrong value: {wrong} (chance is half)"


#: The hack recipe the suite runs (a reward that pays the right tool name less a charge per character of its
#: arguments, values never compared).
HACK_RECIPE = RECIPES / "hack" / "tool_name.yaml"
#: Its CI-fast settings: 60 GRPO steps and 16 prompts a look instead of the recipe's 90 and 32. The proxy's hack is
#: large at every seed measured (recipes/MEASUREMENTS.md: the exact judge down to 0-4 of 60 by step 90), and the
#: test's own assertions say whether 60 steps still show it.
HACK_CI = {"steps": 60, "n_prompts": 16}


def _grpo_from_sft(recipe: dict[str, Any], split: dict[str, Any], sft_start: dict[str, Any], folder: Path,
                   monkeypatch: Any, **over: Any) -> dict[str, Any]:
    """GRPO at ``recipe``'s settings from the cached SFT adapter, with its monitor on: the held-out measurement
    before and after (the job's own ``evaluate``, the reward beside the exact judge) and the monitor's summary."""
    from whileai.jobs import _environment, grpo
    from whileai.kit import defaults as kit_defaults
    from whileai.core import defaults as core_defaults
    from whileai.domain import monitor as monitor_module

    made: list[Any] = []

    class Kept(monitor_module.HackMonitor):  # the job's own monitor, kept so the test can read its summary
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(monitor_module, "HackMonitor", Kept)
    spec = {"method": "grpo", "base_model": kit_defaults.KIT_BASE_NAME, "seed": SEED,
            "steps": int(recipe["steps"]), "learning_rate": float(recipe["learning_rate"]),
            "generations": int(recipe["generations"]), "beta": float(recipe.get("beta", 0.04)),
            "temperature": float(recipe.get("temperature") or kit_defaults.KIT_SAMPLE_TEMPERATURE),
            "loss_type": "bnpo", "max_completion_length": core_defaults.TRAIN_EVAL_MAX_NEW_TOKENS,
            "holdout_rows": int(recipe["holdout_rows"]), "reward": [recipe.get("reward") or "first_action"],
            "monitor": dict(recipe["monitor"]), "init_adapter": str(sft_start["adapter"]), "init_from": "sft-start",
            **over}
    typed = read_spec(spec)
    _environment.cpu_threads()
    _environment.seed_all(SEED)
    model, tokenizer = grpo.load(typed)
    before = grpo.evaluate(typed, model, tokenizer, split["held"])
    model, extra = grpo.fit(typed, model, tokenizer, split["train"], folder, [], holdout=split["held"])
    after = grpo.evaluate(typed, model, tokenizer, split["held"])
    assert len(made) == 1, "the job built one HackMonitor"
    return {"before": before, "after": after, "monitor": made[0].summary(), "extra": extra}


def test_the_hack_recipe_hacks_and_the_monitor_raises_its_alarm(split, sft_starts, tmp_path, monkeypatch):
    """Gao et al.'s setting on the kit: the policy pleases a reward that pays for a short call to the right tool;
    on the same held-out prompts that reward rises significantly more than the exact judge, and an alarm of the
    kinds the recipe expects fires by the look it names."""
    from whileai.jobs._rewards import proxy_vs_gold

    recipe = _recipe(HACK_RECIPE)
    seen = _grpo_from_sft(recipe, split, sft_starts(recipe), tmp_path, monkeypatch, steps=HACK_CI["steps"],
                          monitor={**recipe["monitor"], "n_prompts": HACK_CI["n_prompts"]})
    versus = proxy_vs_gold(seen["before"], seen["after"])
    assert versus is not None and versus["gap_change"] > 0 and versus["p"] < ALPHA, versus
    wanted = recipe["expect"]["alarm"]
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    kinds = [a["kind"] for a in seen["monitor"]["alarms"]]
    assert set(wanted) & set(kinds), (kinds, seen["monitor"].get("curve"))
    first = min(a["evaluation"] for a in seen["monitor"]["alarms"] if a["kind"] in wanted)
    assert first <= recipe["expect"]["alarm_look_max"]
    assert seen["monitor"]["armed"]["divergence"] == "armed"  # gold: the exact judge
