"""The runner's own small values, each built as its declared type: their keys, in the order they are printed or
written, and what they read when a part of a record is missing (whileai/runner/_sweep.py, _estimate.py,
depends.py, compare.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from whileai.runner import _estimate, _sweep, defaults
from whileai.runner.compare import _result
from whileai.runner.depends import depends_on


def _job(folder, name, runs, summary=None):
    (folder / name).mkdir(parents=True)
    written = {"sweep_id": "sweep_t", "runs": runs, "overrides": [f"seed={name}"]}
    if summary is not None:
        written["summary"] = summary
    (folder / name / defaults.RUN_FILE).write_text(json.dumps(written))


def test_a_sweeps_closing_lines_read_each_job_with_or_without_its_summary(tmp_path, capsys):
    run = {"id": "run_a", "stage": None, "method": "sft", "name": "first"}
    _job(tmp_path, "0", [run], {"status": "done", "held_out": {"metric": "pass_rate", "before": 0.25, "after": 0.5}})
    _job(tmp_path, "1", [{**run, "id": "run_b", "name": None}], {"status": "done", "quick": {"steps": 4}})
    _job(tmp_path, "2", [{**run, "id": "run_c"}])
    jobs = _sweep._jobs(str(tmp_path))
    assert [list(job) for job in jobs] == [["job", "overrides", "runs", "summary"]] * 3
    assert jobs[2]["summary"] is None
    _sweep.close(str(tmp_path), as_json=False)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"sweep      {tmp_path}: 3 job(s), 3 run(s)")
    assert lines[2] == "  job 0    run_a  done     first"
    assert lines[3].startswith("             held-out pass_rate 0.250 -> 0.500")
    assert lines[4] == "  job 1    run_b  done · quick run: expect not checked"
    assert lines[5] == "  job 2    run_c  -        first"


def test_a_stages_step_size_holds_every_size_knob_in_order():
    size = _estimate._size(SimpleNamespace(batch_size=8, generations=4, lora_rank=16))
    assert size == {"batch_size": 8, "gradient_accumulation": None, "generations": 4, "max_completion_length": None,
                    "policy_samples": None, "lora_rank": 16, "processes": None}
    assert list(size) == list(_estimate.StepSize.__annotations__)


def test_what_a_run_depends_on_lists_its_entries_in_the_printed_order():
    found = depends_on({"summary": {"training": {"compute": {"threads": 2, "device": "cpu"}}}})
    assert list(found) == ["base weights (SHA-256)", "data (content hash)", "held-out prompts (digest)",
                           "CPU kernel path", "CPU", "BLAS branch (MKL)", "torch threads", "device", "packages off constraints.txt", "versions",
                           "commit"]
    assert found["torch threads"] == 2 and found["device"] == "cpu" and found["commit"] is None


def test_a_runs_result_cells_in_the_printed_order():
    cells = _result({"status": "done", "summary": {}, "cost_usd": 0.5, "cost_basis": {"gpu": "A10G"}})
    assert list(cells) == ["held-out", "n", "verdict", "alarms", "cost", "expect", "status"]
    assert cells["cost"] == "$0.50 (A10G)" and cells["n"] == "-" and cells["alarms"] == 0
