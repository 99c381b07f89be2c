"""A mix of BFCL categories through the runner: where its data is read from, and the held-out report per category.

The data folder is ``dataset.folder`` (the real recipes set it from BFCL_DATA), else the installed
``bfcl-eval`` package's data, else the committed sample, which makes the run a smoke run that says so
first. An installed package is stood in for by a folder named ``bfcl_eval`` on the import path (found
the way the code finds it, without importing it); nothing is installed.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from whileai.core.stats import group_lines, group_results

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import _bfcl_single_turn as _bfcl  # noqa: E402
from whileai.runner.schema import Dataset  # noqa: E402

MIX = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"]


def _sample_questions(categories: list[str]) -> int:
    return sum(len(_bfcl.read(_bfcl.SAMPLE / f"BFCL_v4_{c}.json")) for c in categories)


@pytest.fixture
def stand_in_package(tmp_path, monkeypatch):
    """A folder laid out as an installed bfcl-eval (bfcl_eval/data with two categories) on the import path."""
    package = tmp_path / "site" / "bfcl_eval"
    (package / "data" / "possible_answer").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for category in ("multiple", "irrelevance"):
        shutil.copy(_bfcl.SAMPLE / f"BFCL_v4_{category}.json", package / "data")
    shutil.copy(_bfcl.SAMPLE / "possible_answer" / "BFCL_v4_multiple.json", package / "data" / "possible_answer")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "bfcl_eval" or m.startswith("bfcl_eval.")]:
        monkeypatch.delitem(sys.modules, name)  # the vendored checker's modules (benchmarks/_bfcl_single_turn.py) are not the package
    return package / "data"


def test_the_per_category_lines_give_n_and_a_paired_p_each():
    before = [0] * 10 + [1, 1, 0, 0] + [1] * 6
    after = [1] * 9 + [0] + [1, 0, 0, 0] + [1] * 6
    groups = ["multiple"] * 10 + ["parallel"] * 4 + ["irrelevance"] * 6
    by_group = group_results(before, after, groups, "category")
    assert by_group is not None and list(by_group["groups"]) == ["irrelevance", "multiple", "parallel"]
    assert by_group["prompts"] == groups  # each prompt's group beside its outcomes: every test can be recomputed
    assert group_lines(by_group) == [
        "per category (3):",
        "  irrelevance  n=6    1.000 -> 1.000, no significant change (6/6; 95% CI 0.61-1.00; paired p = 1.000)",
        "  multiple     n=10   0.000 -> 0.900, significant gain (9/10; 95% CI 0.60-0.98; paired p = 0.004)",
        "  parallel     n=4    0.500 -> 0.250, no significant change (1/4; 95% CI 0.05-0.70; paired p = 1.000)",
    ]
    # rows without the field: no breakdown; a row lacking it among others is its own group
    assert group_results(before, after, [None] * 20, "category") is None
    assert group_results(before, after, groups[:5], "category") is None
    partial = group_results([0, 1], [1, 1], ["a", None], "category")
    assert partial is not None and set(partial["groups"]) == {"a", "(no category)"}
    one = group_results(before, after, ["multiple"] * 20, "category")  # kept, but its line would repeat the overall
    assert one is not None and one["groups"]["multiple"]["n"] == 20 and group_lines(one) == []


def test_the_closing_summary_shows_the_per_category_lines_under_the_overall_one():
    from whileai.core.stats import holdout_result
    from whileai.runner._closing import human_lines, summary
    from whileai.runner._facts import RunFacts

    before, after = [0, 0, 0, 1], [1, 1, 0, 1]
    groups = ["multiple", "multiple", "parallel", "parallel"]
    outcome = {"status": "done", "metric": "pass_rate", "before": 0.25, "after": 0.75,
               "stats": holdout_result(before, after), "by_group": group_results(before, after, groups, "category"),
               "alarms": [], "cost_usd": None, "cost_basis": "a CPU"}
    closing = summary(RunFacts(status="done"), None, outcome)
    assert closing["held_out"]["by_group"]["groups"]["multiple"]["paired"]["improved"] == 2
    lines = human_lines(closing)
    at = next(i for i, line in enumerate(lines) if line.startswith("held-out   pass_rate 0.250 -> 0.750"))
    assert lines[at + 1:at + 4] == [
        "           per category (2):",
        "             multiple  n=2    0.000 -> 1.000, no significant change (2/2; 95% CI 0.34-1.00; paired p = 0.500)",
        "             parallel  n=2    0.500 -> 0.500, no significant change (1/2; 95% CI 0.09-0.91; paired p = 1.000)",
    ]


def test_without_bfcl_data_the_mix_is_a_smoke_run_on_the_sample_and_says_so(monkeypatch):
    from whileai.runner._bfcl_data import SAMPLE, bfcl_folder, smoke_note

    monkeypatch.setitem(sys.modules, "bfcl_eval", None)  # as where bfcl-eval is not installed, even if it is here

    data = Dataset(source="bfcl", categories=MIX, folder=None)
    assert bfcl_folder(data) == (SAMPLE, True)
    note = smoke_note(data)
    assert note is not None and note.startswith(f"smoke run on the committed BFCL sample ({_sample_questions(MIX)} "
                                                "questions of simple_python, multiple, parallel, parallel_multiple, "
                                                "irrelevance")
    assert "measures nothing" in note and "pip install --no-deps bfcl-eval" in note


def test_a_named_folder_or_the_installed_package_is_read_and_is_no_smoke_run(tmp_path, stand_in_package):
    import whileai.simulations as wai
    from whileai.runner._bfcl_data import bfcl_folder, smoke_note

    named = Dataset(source="bfcl", categories=MIX, folder=str(_bfcl.SAMPLE))  # BFCL_DATA's seam: dataset.folder
    assert bfcl_folder(named) == (_bfcl.SAMPLE, False) and smoke_note(named) is None
    default = Dataset(source="bfcl", categories=["multiple", "irrelevance"], folder=None)
    assert wai.datasets.bfcl_data_folder() == stand_in_package
    assert bfcl_folder(default) == (stand_in_package, False) and smoke_note(default) is None
    rows = wai.datasets.from_bfcl_folder(bfcl_folder(default)[0], default.categories)
    assert len(rows) == _sample_questions(["multiple", "irrelevance"])


def test_the_real_recipe_reads_the_installed_data_by_default_and_bfcl_data_when_set(stand_in_package):
    """validate reads the named categories' files where the run will: the package's data, or BFCL_DATA's folder."""
    from _runner_helpers import tiny_base, whileai

    env = {"PYTHONPATH": f"{stand_in_package.parents[1]}:{_bfcl.ROOT}", "BFCL_DATA": ""}
    base = f"base_model={tiny_base()}"
    ok = whileai("validate", "recipe=real/sft_smollm2_bfcl", base, "dataset.categories=[multiple,irrelevance]", env=env)
    assert ok.returncode == 0, ok.stderr[-2000:]
    # the recipe's five categories: the stand-in package has two, and validate names the first file it lacks
    refused = whileai("validate", "recipe=real/sft_smollm2_bfcl", base, env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"{stand_in_package}/BFCL_v4_simple_python.json" in refused.stderr, refused.stderr[-2000:]
    named = whileai("validate", "recipe=real/sft_smollm2_bfcl", base, env={**env, "BFCL_DATA": str(_bfcl.SAMPLE)})
    assert named.returncode == 0, named.stderr[-2000:]


@pytest.mark.slow
def test_a_two_step_sft_on_the_mix_says_smoke_first_and_reports_each_category(tmp_path):
    """The real SFT recipe on the tiny kit base: its first line says smoke run, its summary a line per category."""
    from _runner_helpers import record, runs_file, tiny_base, whileai, without_bfcl_eval

    from whileai.core.stats import holdout_result

    done = whileai("run", "recipe=real/sft_smollm2_bfcl", f"base_model={tiny_base()}", "steps=2", "batch_size=2",
                   "holdout_rows=30", "lora_rank=4", "lora_alpha=8", "expect.holdout_gain_significant=null",
                   token="bfcl-mix", env=without_bfcl_eval())
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stderr.strip().splitlines()[0]
    assert first.startswith(f"smoke run on the committed BFCL sample ({_sample_questions(MIX)} questions"), first
    run = record(runs_file("bfcl-mix")["runs"][-1]["id"])
    training = run.get("training") or run["summary"]["training"]
    by_group = training["by_group"]
    assert by_group["field"] == "category" and set(by_group["groups"]) <= set(MIX) and len(by_group["groups"]) >= 3
    assert sum(g["n"] for g in by_group["groups"].values()) == training["holdout_prompts"] == 30
    outcomes = training["outcomes"]
    for name, result in by_group["groups"].items():  # recomputed from the kept per-prompt outcomes and groups
        picked = [i for i, g in enumerate(by_group["prompts"]) if g == name]
        assert result == holdout_result([outcomes["before"][i] for i in picked], [outcomes["after"][i] for i in picked])
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("held-out"))
    assert lines[at + 1] == f"           per category ({len(by_group['groups'])}):"
    for offset, (name, result) in enumerate(by_group["groups"].items(), 2):
        assert lines[at + offset].split()[:2] == [name, f"n={result['n']}"], lines[at:at + 8]
        assert "paired p" in lines[at + offset]
    from whileai.runner.runs import show_lines  # `python -m whileai show RUN` keeps the same lines

    shown = show_lines(run)
    assert [line.strip() for line in shown if line.strip().startswith(tuple(by_group["groups"]))] == [
        line.strip() for line in lines[at + 2:at + 2 + len(by_group["groups"])]]
