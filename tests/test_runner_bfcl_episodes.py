"""BFCL's multi-turn entries through the runner: ``dataset=bfcl_episodes`` is cut by BFCL's own split by scenario (a
held-out entry never trains), a mismatched pair of dataset and environment is refused saying what to pick, and
``python -m whileai run method=grpo environment=bfcl dataset=bfcl_episodes`` runs SFT then GRPO and measures the
held-out entries before and after, per category, through the runner's summary and ``diff``.

The entries are the committed sample (tests/data/bfcl/multi_turn); bfcl-eval's backends are its copies beside the
sample, loaded in this process by benchmarks/_bfcl_checker.py and, for the runner's subprocess, laid out as an
installed ``bfcl_eval`` package (:func:`stand_in_bfcl_eval`) with a few of the sample's entries as its data.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import _bfcl_checker as bfcl  # noqa: E402
from _bfcl_episode_fixtures import checker_fixture, entries_fixture, rows_fixture  # noqa: E402,F401  (checker, entries, rows)
from _runner_helpers import record, runs_file, whileai  # noqa: E402
from test_runner_validate import compose  # noqa: E402

#: Two scenarios of the two categories (bfcl.EPISODE_CATEGORIES), all of one backend (TradingBot: the sample's
#: shortest prompts): scenario 100 is on BFCL's held-out side, 120 on the training side.
SCENARIOS = (100, 120)


def stand_in_bfcl_eval(root: Path, scenarios: tuple[int, ...] = SCENARIOS,
                       categories: tuple[str, ...] = bfcl.EPISODE_CATEGORIES) -> Path:
    """``root/site/bfcl_eval``: the committed copies of bfcl-eval's backends laid out as the installed package, its
    ``data`` holding the sample's entries of ``scenarios`` in ``categories`` and every function doc. Returns the
    folder to put on PYTHONPATH."""
    package = root / "site" / "bfcl_eval"
    shutil.copytree(bfcl.VENDORED, package)
    (package / "__init__.py").write_text('"""Stands in for an installed bfcl-eval (tests/test_runner_bfcl_episodes.py)."""\n')
    data = package / "data"
    (data / "possible_answer").mkdir(parents=True)
    shutil.copytree(bfcl.SAMPLE / "multi_turn_func_doc", data / "multi_turn_func_doc")
    wanted = {f"{category}_{n}" for category in categories for n in scenarios}
    for category in categories:
        for part in (Path(f"BFCL_v4_{category}.json"), Path("possible_answer") / f"BFCL_v4_{category}.json"):
            lines = (bfcl.SAMPLE / part).read_text(encoding="utf-8").splitlines()
            (data / part).write_text("".join(line + "\n" for line in lines if json.loads(line)["id"] in wanted))
    return root / "site"


def long_context_model(folder: Path) -> Path:
    """The kit's tiny random model with a context of EPISODE_MAX_LENGTH: BFCL's prompts with their tools are
    thousands of the kit tokenizer's tokens, past the kit base's KIT_MAX_POSITIONS."""
    from whileai.core.defaults import EPISODE_MAX_LENGTH
    from whileai.kit._model import tiny_model
    from whileai.kit._tokenizer import build_tokenizer

    tokenizer = build_tokenizer(0)
    tokenizer.save_pretrained(folder)
    tiny_model(tokenizer, seed=0, max_position_embeddings=EPISODE_MAX_LENGTH).save_pretrained(folder)
    return folder


# ---------------------------------------------------------------------------
# The cut
# ---------------------------------------------------------------------------


def test_the_cut_is_bfcls_split_by_scenario_and_a_held_out_entry_never_trains(entries, rows):
    import whileai.simulations as wai
    from whileai.domain.episodes.bfcl_rows import held_out_flags

    flags = held_out_flags(rows)
    assert flags == [e.held_out for e in entries] and any(flags) and not all(flags)
    sides = wai.datasets.fixed_split(rows, flags)
    held = {rows[i]["task_id"] for i in sides.holdout}
    assert held == {e.id for e in entries if e.held_out} and sides.moved["tasks"] == 0
    assert held.isdisjoint(rows[i]["task_id"] for i in sides.train)
    assert {e.scenario for e in entries if e.id in held}.isdisjoint(e.scenario for e in entries if e.id not in held), \
        "a held-out scenario is held out in every category"
    with pytest.raises(ValueError, match="leaves the held-out side empty"):
        wai.datasets.fixed_split(rows, [False] * len(rows))
    with pytest.raises(ValueError, match="is not a BFCL multi-turn id"):
        held_out_flags([{**rows[0], "task_id": "kit-move-all"}])


def test_the_categories_default_to_the_environments_and_validate_names_a_wrong_one():
    from whileai.runner import schema
    from whileai.runner._datacheck import data_problems
    from whileai.runner.pipeline import load_rows

    data = schema.Dataset(source="bfcl_episodes", folder=str(bfcl.SAMPLE))
    rows, what = load_rows(data, schema.Environment(name="bfcl", category="multi_turn_miss_func"))
    assert {r["category"] for r in rows} == {"multi_turn_miss_func"} and "12 entries" in what
    plain, problems = compose(["method=grpo", "prompt_source=gold", "environment=bfcl", "dataset=bfcl_episodes",
                               "dataset.categories=[multi_turn_bse]", f"dataset.folder={bfcl.SAMPLE}"])
    said = {p.key: p.message for p in data_problems(schema.recipe_spec(plain), lambda key: "")}
    assert said == {"dataset.categories": "dataset.categories: 'multi_turn_bse' (did you mean 'multi_turn_base'?) is "
                    "not a BFCL multi-turn category; the ones read as episodes: multi_turn_base, multi_turn_miss_func, "
                    "multi_turn_miss_param, multi_turn_long_context (single-turn categories: from_bfcl / "
                    "from_bfcl_folder)"}


# ---------------------------------------------------------------------------
# The spec: the group, its refusals, and the run
# ---------------------------------------------------------------------------


def _messages(overrides: list[str]) -> dict[str, str]:
    _, problems = compose(overrides)
    return {p.key: p.message for p in problems}


def test_a_mismatched_pair_is_refused_saying_what_to_pick():
    base = ["method=grpo", "prompt_source=gold"]
    said = _messages([*base, "environment=kit", "dataset=bfcl_episodes"])
    assert said["dataset.source"].startswith("dataset=bfcl_episodes reads BFCL's multi-turn entries, played in "
                                             "environment=bfcl, and environment=kit is another; pick environment=bfcl")
    said = _messages([*base, "environment=bfcl", "dataset=sample"])
    assert "pick dataset=bfcl_episodes (BFCL's entries as gold episodes)" in said["dataset.source"]
    said = _messages([*base, "environment=bfcl", "dataset=episodes"])
    assert "dataset=episodes draws the kit environment's tasks" in said["dataset.source"]
    assert "or dataset=bfcl_episodes for BFCL's entries" in said["dataset.source"]
    said = _messages([*base, "environment=bfcl", "dataset=bfcl_episodes", "+dataset.holdout=0.3"])
    assert said["dataset.holdout"].startswith("dataset.holdout is not read by dataset=bfcl_episodes: its cut is "
                                              "BFCL's own split by scenario")


@pytest.mark.slow
def test_sft_then_grpo_on_bfcl_episodes_runs_and_measures_held_out_entries_per_category(tmp_path):
    site = stand_in_bfcl_eval(tmp_path)
    model = long_context_model(tmp_path / "model")
    env = {"PYTHONPATH": str(site), "BFCL_DATA": ""}
    args = ["method=grpo", "environment=bfcl", "dataset=bfcl_episodes",
            f"dataset.categories=[{','.join(bfcl.EPISODE_CATEGORIES)}]",
            "prompt_source=gold", f"base_model={model}", "steps=1", "generations=2", "max_completion_length=24",
            "eval_max_new_tokens=8", "+stages.sft.method=sft", "+stages.sft.steps=1"]
    checked = whileai("validate", *args, env=env)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert "bfcl:TradingBot-get_stock_info" in checked.stdout, "each class a row can route to, with its tools"
    done = whileai("run", *args, token="bfcl-episodes", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
    assert "BFCL's own split by scenario" in done.stderr
    runs = runs_file("bfcl-episodes")["runs"]
    assert [r["method"] for r in runs] == ["sft", "grpo"]
    for run in (record(r["id"]) for r in runs):
        training = run["summary"]["training"]
        assert run["config"]["environment"] == "bfcl:multi_turn_base" and training["metric"] == "episode_pass_rate"
        held = [e["task_id"] for e in run["summary"]["episodes"]["before"]]
        assert sorted(held) == [f"{c}_100" for c in bfcl.EPISODE_CATEGORIES], "BFCL's held-out side, played whole"
        assert training["stats"]["n"] == 2 and "paired" in training["stats"]
        assert sorted(training["by_group"]["groups"]) == list(bfcl.EPISODE_CATEGORIES)
        assert all(e["reason"].startswith("multi_turn:") for e in run["summary"]["episodes"]["after"])
    grpo = record(runs[1]["id"])["summary"]["training"]
    assert grpo["unit"] == "episodes" and grpo["prompts"] == 2 and grpo["reward"] == ["episode"]
    assert grpo["monitor"].startswith("off")
    assert "per category (2)" in done.stderr
    diffed = whileai("diff", runs[0]["id"], runs[1]["id"], env=env)
    assert diffed.returncode == 0 and "on the same 2 held-out prompts" in diffed.stdout, diffed.stdout + diffed.stderr


@pytest.mark.slow
def test_a_bfcl_run_paid_a_python_reward_is_watched_with_bfcls_check_as_gold(tmp_path):
    """GRPO on BFCL's episodes paid the user's reward (brief_success): the HackMonitor samples held-out entries every
    step and judges each with BFCL's own multi-turn check, and the held-out entries are scored by the reward beside
    that check (``reward_vs_exact``)."""
    site = stand_in_bfcl_eval(tmp_path)
    model = long_context_model(tmp_path / "model")
    env = {"PYTHONPATH": str(site), "BFCL_DATA": ""}
    args = ["method=grpo", "environment=bfcl", "dataset=bfcl_episodes",
            f"dataset.categories=[{','.join(bfcl.EPISODE_CATEGORIES)}]", "prompt_source=gold", f"base_model={model}",
            "steps=2", "generations=2", "max_completion_length=24", "eval_max_new_tokens=8",
            "reward=python:whileai.simulations.proxy_rewards:brief_success", "monitor=default", "monitor.every=1",
            "monitor.n_prompts=2", "monitor.k=2", "monitor.max_new_tokens=8"]
    done = whileai("run", *args, token="bfcl-watched", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
    (run,) = runs_file("bfcl-watched")["runs"]
    summary = record(run["id"])["summary"]
    training, monitor = summary["training"], summary.get("monitor")
    assert monitor, (training.get("monitor"), sorted(summary))
    assert training["monitor"].startswith("on episodes: 2 held-out episodes"), training["monitor"]
    assert "gold judge: the episode judge (the reward, python:" in training["monitor"]
    assert not monitor["errors"]["evaluate"] and len(monitor["curve"]) == 3, "looks at steps 0, 1 and 2, each judged"
    assert all(point["gold"] == 0.0 for point in monitor["curve"]), "a random model passes no BFCL entry"
    versus = training["reward_vs_exact"]
    assert versus["prompts"] == 2 and versus["exact_before"] == versus["exact_after"] == 0.0
