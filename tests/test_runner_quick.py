"""``quick=true``: a recipe at a few steps whose summary says "quick run: expect not checked" instead of failing.

The quick run starts on a fresh data root, so it also shows how the store's first migrations are
logged (labelled as the store's, never as Hydra's: conf/hydra/hydra_logging/stderr.yaml).

The main recipe's expect block (held-out after >= 0.5, a significant gain) cannot hold on the kit's
tiny random base after a few steps: without ``quick`` the same run exits 3 naming the failed lines.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from _runner_helpers import record, runner_record, tiny_base, whileai


def test_a_quick_run_caps_its_steps_and_says_expect_was_not_checked(home, monkeypatch):
    from pathlib import Path

    from whileai.runner._closing import human_lines

    base = tiny_base()  # built under the session's data root; this run's fresh root loads it from there
    monkeypatch.setenv("WHILEAI_SERVE_DIRS", str(Path(base).parent))
    done = whileai("run", "recipe=sft_tooluse", "quick=true", "dataset.tasks=24", f"base_model={base}", "--json")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    # a fresh data root: the store's first migrations say nothing (WHILEAI_STORE_MIGRATION_LOG=1 shows them)
    assert "Running upgrade" not in done.stderr and "Context impl" not in done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("[HYDRA]") and "upgrade" in line]
    closing = json.loads(done.stdout.strip().splitlines()[-1])
    assert closing["quick"]["steps"] == 4 and not closing["expect"]["lines"]
    lines = human_lines(closing)  # what the terminal prints without --json
    status = next(line for line in lines if line.startswith("status"))
    assert status.startswith("status     done · quick run: expect not checked (4 line(s) set aside; at most 4 steps"), status
    assert not any(line.startswith("FAILED") for line in lines)
    run_id = closing["run"]
    kept = runner_record(run_id)
    passing = kept["quick"]["sft_rows"]["of"]
    assert passing > 32  # 4 steps of KIT_SFT_BATCH (8) rows: the rows tokenized, checked and trained on
    assert kept["quick"] == {"steps": 4, "holdout_rows": 8, "expect_not_checked": [
        "holdout_after_min", "holdout_gain_min", "holdout_gain_significant", "status"],
        "sft_rows": {"kept": 32, "of": passing}}
    assert f"SFT on 32 of {passing} rows" in status
    assert kept["spec"]["steps"] == 4 and kept["spec"]["holdout_rows"] == 8
    assert set(kept["spec"]["expect"].values()) == {None}
    run = record(run_id)
    assert run["name"].endswith(" · quick") and "expect" not in run["summary"]
    assert run["summary"]["training"]["holdout_prompts"] <= 8
    shown = whileai("show", run_id)
    assert "status     done · quick run: expect not checked" in shown.stdout, shown.stdout + shown.stderr
    # the stage left its times for the next estimate on this data root (runner/_estimate.py)
    from whileai.runner import _estimate

    times = [json.loads(line) for line in _estimate.timings_path().read_text().splitlines()]
    assert [(t["where"]["method"], t["steps"]) for t in times] == [("sft", 4)] and times[0]["train_s"] > 0, times
    later = _estimate.estimate(SimpleNamespace(**{**times[0]["where"], **times[0]["size"], "steps": 400}), 8)
    assert later is not None and later.same_size and later.seconds > later.step_s * 400


def test_quick_caps_every_stage_and_validate_shows_it():
    import yaml

    done = whileai("validate", "recipe=grpo_tooluse", "quick=true")
    assert done.returncode == 0, done.stderr
    shown = yaml.safe_load(done.stdout)
    assert shown["steps"] == 4 and all(stage["steps"] == 4 for stage in shown["stages"].values())
    assert set(shown["expect"].values()) == {None}
    bad = whileai("validate", "recipe=grpo_tooluse", "quick=maybe")
    assert bad.returncode == 2 and "quick='maybe' is not accepted; pass quick=true" in bad.stderr
