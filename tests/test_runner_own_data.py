"""A user's own data through the command line: ``init``, the held-out n warning, and row errors by file line.

Each case runs ``python -m whileai`` as a subprocess on a JSONL file of the kit's sample rows
written to a temporary folder, as a user's own file would be; the one that trains uses the kit's
tiny random base for two steps (about ten seconds).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from _runner_helpers import cached_hub_base, tiny_base, whileai


def _rows_file(folder: Path, n: int, name: str = "mine.jsonl") -> Path:
    from whileai.kit import load_sample

    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in load_sample()[:n]))
    return path


def test_init_writes_a_recipe_for_the_users_data_that_validates(tmp_path):
    data = _rows_file(tmp_path, 40)
    recipes = tmp_path / "my-recipes"
    done = whileai("init", "mine", "--data", str(data), "--method", "sft", "--holdout", "0.25",
                   "--recipes", str(recipes), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = recipes / "mine.yaml"
    text = written.read_text()
    assert text.startswith("# @package _global_\n") and f"python -m whileai run --recipes {recipes} recipe=mine" in text
    loaded = yaml.safe_load(text)
    assert loaded["defaults"] == [{"override /method": "sft"}, {"override /dataset": "jsonl"}]
    assert loaded["dataset"]["path"] == str(data) and loaded["dataset"]["holdout"] == 0.25
    assert "expect" not in loaded and "# expect:\n#   status: done" in text, "the expect block is written commented out"
    checked = whileai("validate", "--recipes", str(recipes), "recipe=mine", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "method: sft" in checked.stdout and str(data) in checked.stdout


def test_init_writes_a_valid_recipe_for_every_method(tmp_path):
    data = _rows_file(tmp_path, 40)
    for method in ("grpo", "dpo", "rm"):
        done = whileai("init", f"mine_{method}", "--data", str(data), "--method", method,
                       "--base", "Qwen/Qwen2.5-0.5B-Instruct", "--recipes", str(tmp_path / "r"), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        checked = whileai("validate", "--recipes", str(tmp_path / "r"), f"recipe=mine_{method}", cwd=tmp_path,
                          env=cached_hub_base(tmp_path, "Qwen/Qwen2.5-0.5B-Instruct"))
        assert checked.returncode == 0, (method, checked.stderr)
        shown = yaml.safe_load(checked.stdout)
        assert shown["method"] == method and shown["base_model"] == "Qwen/Qwen2.5-0.5B-Instruct"


def test_init_never_overwrites_a_file_and_says_the_fix(tmp_path):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "mine.yaml").write_text("# mine, by hand\n")
    done = whileai("init", "mine", "--data", str(tmp_path / "nope.jsonl"), "--method", "ppo", "--recipes", str(recipes),
                   cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert (recipes / "mine.yaml").read_text() == "# mine, by hand\n"
    assert "3 problem(s); nothing was written" in done.stderr, done.stderr  # all at once
    assert "already exists and init never overwrites a file: pick another NAME, or edit that recipe" in done.stderr
    assert "--method 'ppo' is not a method; accepted: sft, grpo, dpo, rm" in done.stderr
    assert "nope.jsonl' does not exist" in done.stderr
    bad = whileai("init", "../escape", "--recipes", str(recipes), cwd=tmp_path)
    assert bad.returncode == 2 and "is not a recipe name" in bad.stderr
    assert not (tmp_path / "escape.yaml").exists()


def test_a_run_on_few_rows_says_its_held_out_n_and_that_no_result_can_be_significant(tmp_path):
    data = _rows_file(tmp_path, 18)
    # no recipe: the dataset names what to run (the issue's `run dataset=jsonl dataset.path=FILE`)
    done = whileai("run", "dataset=jsonl", f"dataset.path={data}", f"base_model={tiny_base()}",
                   "steps=2", "+expect.holdout_gain_significant=0.05", "learning_rate=0.003", cwd=tmp_path)
    said = done.stderr
    line = next((x for x in said.splitlines() if x.startswith("- held-out: ")), None)
    assert line == "- held-out: 1 held-out prompt(s): no change on them can be significant at p < 0.05 (exact McNemar)", said
    assert said.index(line) < said.index("wai.train on"), "said before anything trains"
    assert ("warning: no result on 1 held-out prompt(s) can be significant at p < 0.05: exact McNemar needs at least 6 "
            "prompts that change the same way") in said
    assert "(this spec's expect.holdout_gain_significant will fail)" in said
    assert "0/1" in done.stdout, "the job measured the count the warning named"
    run_id = next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("run "))
    shown = whileai("show", run_id)
    assert "warning    no result on 1 held-out prompt(s) can be significant" in shown.stdout, shown.stdout


def test_a_folder_as_dataset_path_is_named_as_a_folder(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    _rows_file(folder, 4, "part-1.jsonl")
    done = whileai("validate", "recipe=none", "dataset=jsonl", f"dataset.path={folder}", cwd=tmp_path)
    assert done.returncode == 2
    assert f"dataset.path={str(folder)!r} is a folder, not a file" in done.stderr, done.stderr
    assert f"dataset.path={folder / 'part-1.jsonl'}" in done.stderr
    assert "does not exist" not in done.stderr


def test_a_row_the_data_gates_refuse_is_named_by_its_file_line_before_anything_runs(tmp_path):
    from whileai.kit import load_sample

    rows = load_sample()[:6]
    broken = json.loads(json.dumps(rows[2]))
    broken["tools"][0]["function"]["parameters"]["properties"]["city"]["type"] = "widget"
    lines = [json.dumps(r) for r in rows[:2]] + ["", json.dumps(broken)] + [json.dumps(r) for r in rows[3:]]
    data = tmp_path / "mine.jsonl"
    data.write_text("\n".join(lines) + "\n")  # a blank line 3: the broken row is line 4, row index 2
    for command in ("validate", "run"):
        done = whileai(command, "recipe=none", "dataset=jsonl", f"dataset.path={data}", f"base_model={tiny_base()}",
                       "steps=2", cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert f"{data}:4" in done.stderr and "type 'widget' is not JSON Schema" in done.stderr, done.stderr
        assert f"fix line 4 of {data} (or remove it) and run again" in done.stderr
        assert "push again" not in done.stderr and "row 2" not in done.stderr and "Traceback" not in done.stderr
