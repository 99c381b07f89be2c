"""The runner's record (``whileai/core/runnerrecord.py``): one declaration, written in the order stored records hold."""

from __future__ import annotations

from types import SimpleNamespace

from whileai.core.runnerrecord import CutNote, HeldOutNote, PushedNote, RunnerRecord
from whileai.core.spec import read_spec, spec_json, updated
from whileai.runner import provenance

#: the keys of a stage's record as the runs stored so far list them: the JSON a new run writes lists them alike
STORED_ORDER = ["recipe", "overrides", "stage", "stage_index", "stages", "previous_run", "spec", "choices", "command",
                "versions", "constraints_differ", "git", "sweep_id", "hydra_dir", "reproduces", "expect_lines", "quick",
                "dataset", "cut", "held_out", "export", "constraints_file"]


def _stage_record(tmp_path) -> RunnerRecord:
    """A stage's record built as the pipeline builds it: the run's record, the data's notes, then the stage's fields."""
    context = SimpleNamespace(recipe="r", overrides=["steps=3"], choices={"method": "sft"}, command="c",
                              sweep_id=None, output_dir=tmp_path, reproduces=None, expect_lines={"status": "r.yaml:3"})
    record = provenance.runner_record({"method": "sft"}, context)
    record = updated(record, dataset=PushedNote(id="ds_1", content_hash="h", rows=40))
    record = updated(record, cut=CutNote(moved_to_train={"tasks": 1, "rows": 2}, moved_task_ids=["t1"]))
    record = updated(record, held_out=HeldOutNote(note="n", warning=None))
    return updated(record, stage="sft", stage_index=1, stages=["sft", "dpo"], previous_run="run_0",
                   export={"rows_out": 3}, quick={"steps": 4, "holdout_rows": 8, "expect_not_checked": [],
                                                  "sft_rows": {"kept": 32, "of": 40}})


def test_a_stage_record_lists_its_keys_in_the_order_stored_records_hold_them(tmp_path):
    written = spec_json(read_spec({"method": "sft", "base_model": "b"}), runner=_stage_record(tmp_path))["runner"]
    assert list(written) == STORED_ORDER
    assert written["dataset"] == {"id": "ds_1", "content_hash": "h", "rows": 40}
    assert list(written["quick"]) == ["steps", "holdout_rows", "expect_not_checked", "sft_rows"]
    assert written["hydra_dir"] == str(tmp_path) and written["previous_run"] == "run_0"


def test_the_declaration_is_the_stored_order_and_a_key_it_does_not_declare_goes_last(tmp_path):
    assert list(RunnerRecord.model_fields) == STORED_ORDER
    given = {"later": 1, "stage": "sft", "recipe": "r"}  # a record another caller (or a later runner) wrote
    assert RunnerRecord.model_validate(given).model_dump(mode="json", exclude_unset=True) == given
    assert list(RunnerRecord.model_validate(given).model_dump(exclude_unset=True)) == ["recipe", "stage", "later"]


def test_a_record_reads_back_from_its_json_as_the_same_record(tmp_path):
    record = _stage_record(tmp_path)
    config = spec_json(read_spec({"method": "sft", "base_model": "b"}), runner=record)
    assert read_spec(config).runner == record


def test_a_key_not_recorded_reads_none_and_an_empty_one_reads_empty(tmp_path):
    older = RunnerRecord.model_validate({"recipe": "r"})  # a record from before these keys, or another caller's
    assert (older.overrides, older.stages, older.choices, older.versions, older.expect_lines) == (None,) * 5
    context = SimpleNamespace(recipe="r", overrides=[], choices={}, command="c", sweep_id=None, output_dir=tmp_path,
                              reproduces=None, expect_lines={})
    written = spec_json(read_spec({"method": "sft", "base_model": "b"}),
                        runner=provenance.runner_record({}, context))["runner"]
    assert written["overrides"] == [] and written["choices"] == {} and written["expect_lines"] == {}, \
        "the runner writes what it knows, empty included"
    assert "stages" not in written, "a run that is no stage's records no stages"
    unknown = SimpleNamespace(**{**vars(context), "choices": None})  # a reproduction of a record without them
    assert "choices" in provenance.runner_record({}, unknown).model_fields_set
    assert provenance.runner_record({}, unknown).choices is None
