"""The runner's cut by task: a prompt asked under two task ids is never on both sides, on the user's data and
on BFCL's, and the run says how many held-out tasks moved (its progress line and its record's ``cut``).

Each case runs the pipeline's load, push and cut step on the embedded platform; nothing trains.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from test_runner_validate import compose

from whileai.core.runnerrecord import RunnerRecord
from whileai.runner import schema
from whileai.runner._progress import Progress
from whileai.runner._facts import RunFacts
from whileai.runner.pipeline import Context, _load_push_cut, _Plan
from whileai.simulations.datasets import _prompt_text

SAMPLE = Path(__file__).resolve().parent / "data" / "bfcl"


def _cut(overrides: list[str], tmp_path: Path) -> tuple[_Plan, str]:
    plain, problems = compose(["recipe=sft_tooluse", *overrides])
    assert problems == [], [str(p) for p in problems]
    spec = schema.recipe_spec(plain)
    out = io.StringIO()
    context = Context(recipe="r", overrides=[], choices={}, command="", output_dir=tmp_path)
    plan = _Plan(spec, context, Progress(out, tty=False), RunFacts(), RunnerRecord(), [])
    _load_push_cut(plan)
    return plan, out.getvalue()


def _sides_share_no_prompt(plan: _Plan) -> None:
    import whileai.simulations as wai

    held = {_prompt_text(r) for r in wai.datasets.load_rows(plan.held)}
    assert held and not held & {_prompt_text(r) for r in plan.train_rows}


def test_the_users_repeated_prompt_is_moved_to_training_and_counted(home, tmp_path):
    from whileai.kit import load_sample

    rows = load_sample()[:80]
    copies = [{**row, "task_id": f"again_{row['task_id']}"} for row in rows]  # every task asked again, new id
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows + copies))
    plan, said = _cut(["dataset=jsonl", f"dataset.path={path}"], tmp_path)
    moved = plan.record.cut["moved_to_train"]
    assert moved["tasks"] >= 1 and moved["rows"] >= moved["tasks"]
    assert f"{moved['tasks']} held-out task(s) ({moved['rows']} rows) moved to training" in said
    assert plan.record.cut["moved_task_ids"]
    _sides_share_no_prompt(plan)


def test_data_without_repeats_moves_nothing_and_says_nothing(home, tmp_path):
    from whileai.kit import load_sample

    first: dict[str, str] = {}  # the kit's sample asks some prompts under several task ids: keep one id each
    rows = [r for r in load_sample() if first.setdefault(_prompt_text(r), r["task_id"]) == r["task_id"]]
    path = tmp_path / "distinct.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plan, said = _cut(["dataset=jsonl", f"dataset.path={path}"], tmp_path)
    assert plan.record.cut["moved_to_train"] == {"tasks": 0, "rows": 0} and "moved to training" not in said


def test_a_bfcl_question_asked_under_two_ids_is_on_one_side(home, tmp_path):
    folder = tmp_path / "bfcl"
    shutil.copytree(SAMPLE, folder)
    questions = folder / "BFCL_v4_simple_python.json"
    answers = folder / "possible_answer" / "BFCL_v4_simple_python.json"
    asked = [json.loads(line) for line in questions.read_text().splitlines() if line.strip()]
    truth = [json.loads(line) for line in answers.read_text().splitlines() if line.strip()]
    with questions.open("a") as q, answers.open("a") as a:  # each question again, as BFCL's live set repeats some
        for entry, answer in zip(asked, truth):
            q.write(json.dumps({**entry, "id": entry["id"] + "_again"}) + "\n")
            a.write(json.dumps({**answer, "id": answer["id"] + "_again"}) + "\n")
    plan, said = _cut(["dataset=bfcl", f"dataset.folder={folder}", "dataset.categories=[simple_python]"], tmp_path)
    assert plan.record.cut["moved_to_train"]["tasks"] >= 1 and "moved to training" in said
    _sides_share_no_prompt(plan)
