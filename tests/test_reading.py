"""What a person reads in the terminal and on the pages: the words beside a result, the errors, the lines.

Fast tests call the formatting functions with real records (a held-out result from
``whileai.core.stats.holdout_result``, a run record as the platform returns it); a few go through
the real command line where that is cheap.
"""

from __future__ import annotations

from typing import Any

import pytest

from whileai.core.stats import holdout_result
from whileai.runner._facts import RunFacts


def _record(before: list[int], after: list[int]) -> dict[str, Any]:
    stats = holdout_result(before, after)
    training = {"method": "sft", "metric": "pass_rate", "before": sum(before) / len(before),
                "after": sum(after) / len(after), "stats": stats, "holdout_prompts": len(after)}
    return {"id": "run_1", "name": "one", "status": "done", "config": {"method": "sft"},
            "summary": {"training": training}, "url": "http://x/runs/run_1"}


# a gain of 0.2 on 10 prompts (2 improved, 0 worsened): p = 0.5, not significant
_SMALL = ([0] * 10, [1, 1] + [0] * 8)
_BIG = ([0] * 40, [1] * 39 + [0])
_LOSS = ([1] * 40, [0] * 39 + [1])


def test_the_closing_summary_words_the_paired_test_beside_the_figure():
    from whileai.runner._closing import human_lines, summary

    for (before, after), word in ((_SMALL, "no significant change"), (_BIG, "significant gain"),
                                  (_LOSS, "significant loss")):
        training = _record(before, after)["summary"]["training"]
        outcome = {"status": "done", "metric": "pass_rate", "before": training["before"], "after": training["after"],
                   "stats": training["stats"], "verdict": None}
        lines = human_lines(summary(RunFacts(status="done", exit_code=0), outcome=outcome))
        held = next(line for line in lines if line.startswith("held-out"))
        assert held.startswith(f"held-out   pass_rate {training['before']:.3f} -> {training['after']:.3f}, {word} (")


def test_the_runs_list_and_show_and_the_run_page_say_the_same_word():
    from whileai.platform.pages._views import headline
    from whileai.runner.runs import row_cells, show_lines

    record = _record(*_SMALL)
    head = headline(record["summary"])[0]
    assert head["significance"] == "no significant change"
    cells = row_cells({"id": "run_1", "status": "done", "holdout": head})
    assert cells[4] == "pass_rate 0.000 -> 0.200, no significant change (n=10)"
    shown = "\n".join(show_lines(record))
    assert "held-out   pass_rate 0.000 -> 0.200, no significant change (2/10;" in shown
    assert headline(_record(*_BIG)["summary"])[0]["significance"] == "significant gain"


def test_a_group_knob_typed_at_the_root_gets_its_group_spelled_back():
    from _runner_helpers import whileai

    done = whileai("validate", "recipe=sft_tooluse", "processes=2")
    assert done.returncode == 2
    assert "processes: not a key of the spec; did you mean target.processes=2? (processes lives in the target group)" \
        in done.stderr


def test_a_run_of_more_than_one_process_says_so_in_its_name():
    from whileai.runner.cli import _scale_words
    from whileai.runner.schema import Target

    assert _scale_words(Target(processes=2, nodes=1), ["beta=0.04"]) == ["processes=2"]
    assert _scale_words(Target(processes=1, nodes=1), []) == []
    assert _scale_words(Target(processes=2), ["target.processes=2"]) == []  # a sweep's word already says it


def _sample(n: int) -> list[dict[str, Any]]:
    import json

    from whileai.kit import load_sample

    return json.loads(json.dumps(load_sample()[:n]))


def test_held_out_rows_without_gold_or_tools_are_warned_of_by_their_cause_not_told_to_grow():
    from whileai.core.spec import SFTSpec
    from whileai.runner._power import power_note

    rows = _sample(8)
    fine_text, fine = power_note(rows, SFTSpec())
    assert fine is None or "gold" not in fine
    no_gold = [{k: v for k, v in r.items() if k != "gold"} for r in rows]
    text, warning = power_note(no_gold, SFTSpec())
    assert text.startswith("0 held-out prompt(s)")
    assert warning is not None and warning.startswith("none of the 8 held-out rows carries a gold")
    assert "larger dataset.holdout share" not in warning and "add gold to the rows" in warning
    no_tools = [{k: v for k, v in r.items() if k != "tools"} for r in rows]
    _, warning = power_note(no_tools, SFTSpec())
    assert warning is not None and "offers no tools" in warning and "dataset.tools=FILE" in warning
    _, warning = power_note([], SFTSpec())
    assert warning is not None and warning.startswith("the held-out side has no rows")


def test_a_rows_file_with_no_gold_at_all_is_refused_before_anything_trains(tmp_path):
    import json

    from _runner_helpers import whileai

    path = tmp_path / "nogold.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "gold"}) + "\n" for r in _sample(12)))
    done = whileai("validate", "dataset=jsonl", f"dataset.path={path}", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"dataset.path: {path}: none of its 12 rows carries a gold" in done.stderr
    assert "add gold to the rows and run again" in done.stderr


class _Run:
    def __init__(self, status: str = "stopped", step: int | None = 0, **config: Any):
        self.id, self.status, self.step, self.config = "run_1", status, step, config


def test_the_ctrl_c_line_is_true_to_save_steps():
    from whileai.runner._progress import interrupted_line

    said = interrupted_line(_Run(step=130, save_steps=50, steps=300))
    assert said == ("- run_1 is stopped; `python -m whileai resume run_1` continues it from its last checkpoint "
                    "(step 100; save_steps=50)")
    off = interrupted_line(_Run(step=130, save_steps=0, steps=300))
    assert "continues" not in off and "it saved no checkpoint (save_steps=0: checkpoints off)" in off
    assert off.endswith("nothing to resume: `python -m whileai reproduce run_1` runs it again from the start")
    early = interrupted_line(_Run(step=20, save_steps=50, target="modal"))
    assert early.endswith("before its first checkpoint (save_steps=50), so `python -m whileai resume run_1` "
                          "restarts the job from the start")
    assert interrupted_line(_Run(status="running")) == "- run_1 is running"


def test_the_progress_bar_never_goes_back_when_a_resumed_job_reports_from_its_checkpoint():
    import io

    from whileai.runner._progress import Progress

    class Step:
        def __init__(self, step: int):
            self.step, self.total_steps, self.summary = step, 300, {}

    stream = io.StringIO()
    bar = Progress(stream, tty=True).training("sft")
    shown = []
    for step in (120, 130, 101, 102, 131, 140):
        bar.update(Step(step))
        shown.append(bar.bar.n)
    bar.close()
    assert shown == [120, 130, 130, 130, 131, 140]
    plain = io.StringIO()
    lines = Progress(plain, tty=False).training("sft")
    for step in (130, 101, 300):
        lines.update(Step(step))
    assert "step 101/300" not in plain.getvalue() and "step 300/300" in plain.getvalue()


def test_a_new_store_is_made_without_alembics_lines_unless_asked(tmp_path, caplog, monkeypatch):
    import io
    import logging

    from whileai.platform.store import Store
    from whileai.platform.store.migrate import MIGRATION_LOG_ENV

    monkeypatch.delenv(MIGRATION_LOG_ENV, raising=False)
    own = io.StringIO()  # the runner's Hydra logging gives alembic a handler of its own ([whileai store])
    handler = logging.StreamHandler(own)
    logging.getLogger("alembic").addHandler(handler)
    try:
        with caplog.at_level(logging.INFO):
            Store(f"sqlite:///{tmp_path / 'quiet.db'}")
    finally:
        logging.getLogger("alembic").removeHandler(handler)
    assert not [r for r in caplog.records if r.name.startswith("alembic")] and own.getvalue() == ""
    caplog.clear()
    monkeypatch.setenv(MIGRATION_LOG_ENV, "1")
    logging.getLogger("alembic").addHandler(handler)  # an earlier runner test may have left alembic unpropagated
    try:
        with caplog.at_level(logging.INFO, logger="alembic"):
            Store(f"sqlite:///{tmp_path / 'asked.db'}")
    finally:
        logging.getLogger("alembic").removeHandler(handler)
    asked = [r.getMessage() for r in caplog.records if r.name.startswith("alembic")] + own.getvalue().splitlines()
    assert any("Running upgrade" in line for line in asked), asked


def _closing_lines(**outcome: Any) -> list[str]:
    from whileai.runner._closing import human_lines, summary

    base = {"status": "done", "metric": "pass_rate", "before": 0.0, "after": 0.5, "stats": None, "verdict": None}
    return human_lines(summary(RunFacts(status="done", exit_code=0), outcome={**base, **outcome}))


def test_no_delta_line_when_nothing_asked_for_a_delta_report():
    assert not [line for line in _closing_lines() if line.startswith("delta")]
    assert "delta      improved" in _closing_lines(verdict="improved")


def _hand_run(name: str = "long") -> str:
    import whileai.simulations as wai

    run = wai.training_run(config={"method": "sft", "note": "y" * 200_000}, name=name)  # past a pipe's buffer
    run.finish("done")
    return run.id


def test_a_platform_refusal_reads_in_the_command_lines_words_not_http(home):
    from _runner_helpers import whileai

    run_id = _hand_run()
    done = whileai("resume", run_id)
    assert done.returncode == 2
    assert done.stderr.startswith(f"python -m whileai resume: {run_id} is done: nothing to resume;"), done.stderr
    words = done.stderr.replace(run_id, "RUN")  # a random run id may hold the digits 409
    assert "POST" not in words and "409" not in words and "/api/v1" not in words, words
    missing = whileai("diff", run_id, "run_0000")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "python -m whileai diff: no run 'run_0000' on this platform" in missing.stderr


def test_a_closed_pipe_ends_quietly(home):
    import os
    import subprocess
    import sys

    run_id = _hand_run()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for args in (["show", run_id], ["show", run_id, "--json"], ["runs"]):
        reader = subprocess.Popen([sys.executable, "-m", "whileai", *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        assert reader.stdout is not None and reader.stderr is not None
        reader.stdout.read(10)  # `| head -c 10`
        reader.stdout.close()
        err = reader.stderr.read().decode()
        assert reader.wait(timeout=120) == 0, err
        assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_wait_help_prints_usage_not_a_missing_sweep():
    from _runner_helpers import whileai

    done = whileai("wait", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m whileai wait")
    assert "SWEEP" in done.stdout and "no sweep" not in done.stderr


def test_the_closing_summary_says_where_a_mirrored_copy_went():
    from whileai.runner._closing import human_lines, summary

    class Mirrored:
        id, url = "run_1", "http://x/runs/run_1"
        summary = {"mirrors": {"mlflow": {"to": "sqlite:////data/mirrors/acct/mlflow.db", "status": "closed",
                                          "points": 41, "errors": 0},
                               "wandb": {"to": "https://wandb.ai/team/proj/runs/run_1", "status": "closed",
                                         "points": 41, "errors": 0}}}

    closing = summary(RunFacts(status="done", exit_code=0), run=Mirrored())
    assert closing["mirrors"]["wandb"]["to"] == "https://wandb.ai/team/proj/runs/run_1"
    [line] = [line for line in human_lines(closing) if line.startswith("mirrored")]
    assert line == ("mirrored   mlflow (closed, 41 points) at sqlite:////data/mirrors/acct/mlflow.db, "
                    "wandb (closed, 41 points) at https://wandb.ai/team/proj/runs/run_1")


def test_a_broken_jsonl_line_is_named_by_file_line_and_column_of_the_file(tmp_path):
    import json

    import pytest

    from _runner_helpers import whileai
    from whileai.core.errors import RowFormatError
    from whileai.domain.rows.jsonl import read_jsonl

    lines = [json.dumps(r) for r in _sample(8)]
    lines[5] = lines[5][:40]  # cut short inside a string
    lines[6] = '{"messages": [],'  # cut short after a comma: json would say "line 2 column 1" with the newline
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RowFormatError) as read:
        read_jsonl(path)
    assert str(read.value).startswith(f"{str(path)!r}: 2 bad lines")
    assert "line 7: not valid JSON (Expecting property name enclosed in double quotes at column 17; the line ends " \
           "there: it is cut short, or one row was split over two lines)" in str(read.value)
    done = whileai("validate", "dataset=jsonl", f"dataset.path={path}", cwd=tmp_path)
    assert done.returncode == 2
    assert f"dataset.path: {path}, line 6: not valid JSON (Unterminated string starting at column " in done.stderr
    assert f"dataset.path: {path}, line 7: not valid JSON (Expecting property name enclosed in double quotes at " \
           "column 17; the line ends there" in done.stderr
    assert "line 2 column 1" not in done.stderr


def test_the_run_page_and_the_runs_page_say_the_word_and_only_a_significant_gain_is_green(tmp_path):
    import shutil

    import httpx
    import pytest

    from whileai.platform.server import serve_in_thread

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    handle = serve_in_thread(store_url=f"sqlite:///{tmp_path / 'platform.db'}")
    try:
        _, key = handle.store.create_account("reader")
        ids = {}
        with httpx.Client(base_url=handle.base_url + "/api/v1", headers={"Authorization": f"Bearer {key}"},
                          timeout=60) as api:
            for name, (before, after) in (("small", _SMALL), ("big", _BIG)):
                summary = _record(before, after)["summary"]
                ids[name] = api.post("/runs", json={"name": name, "config": {"method": "sft"}}).json()["id"]
                assert api.patch(f"/runs/{ids[name]}", json={"status": "done", "summary": summary}).status_code == 200
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
            page = browser.new_context().new_page()
            page.set_default_timeout(15_000)
            page.goto(handle.base_url + "/signin")
            page.fill("#key", key)
            page.click("button[type=submit]")
            page.wait_for_url("**/runs")
            small = page.locator(".holdout").filter(has_text="0.200")
            assert "no significant change" in small.inner_text()
            page.goto(f"{handle.base_url}/runs/{ids['small']}")
            change = page.locator(".headline .change")
            assert "no significant change" in change.inner_text()
            assert "good" not in (change.get_attribute("class") or "")  # +0.200 with p = 0.5 is not a green win
            page.goto(f"{handle.base_url}/runs/{ids['big']}")
            change = page.locator(".headline .change")
            assert "significant gain" in change.inner_text() and "good" in (change.get_attribute("class") or "")
            browser.close()
    finally:
        handle.stop()


def test_the_closing_summary_ends_quietly_on_a_closed_pipe():
    import os

    from whileai.runner._closing import emit, summary

    read, write = os.pipe()
    os.close(read)  # `python -m whileai run ... | head` after head has exited
    with os.fdopen(write, "w") as stream:
        emit(summary(RunFacts(status="done", exit_code=0)), as_json=False, stream=stream)  # no BrokenPipeError
        stream.write("x" * 100_000)
        stream.flush()  # the descriptor now leads to /dev/null


def test_a_run_that_judged_nothing_says_so_instead_of_dashes():
    [held] = [line for line in _closing_lines(before=None, after=None) if line.startswith("held-out")]
    assert held == ("held-out   pass_rate not measured: no held-out prompt was judged (the warning before training "
                    "names why)")


def test_the_export_line_names_a_tool_convention_only_when_a_row_has_tools(tmp_path):
    import whileai.simulations as wai
    from whileai.runner.pipeline import _exported

    rows = [{"messages": [{"role": "user", "content": f"hi {i}"}, {"role": "assistant", "content": "hello"}]}
            for i in range(3)]
    with pytest.warns(UserWarning, match="no tools"):
        report = wai.export_dataset(rows, tmp_path / "plain.jsonl", format="trl")
    assert report["rows_without_tools"] == 3
    template = {"chat_template": "t.jinja", "tool_format": {"used": "hermes"}}
    line = _exported({**report, **template})
    assert "no row has tools" in line and "convention" not in line
    with_tools = _exported({**report, "rows_without_tools": 1, **template})
    assert "tools in the hermes convention" in with_tools


def test_building_a_kit_model_on_a_fresh_data_root_prints_no_library_chatter(tmp_path):
    """transformers draws a ``Writing model shards`` bar when it saves; a base built on the user's terminal (the
    kit's models, an imported GGUF file) says what it did in whileai's own lines only."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "WHILEAI_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", "from whileai.kit._base import tiny_model_dir; print(tiny_model_dir())"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "tiny-random-s0-" in done.stdout
    assert done.stderr == "", done.stderr


def test_the_quiet_block_gives_the_bars_and_the_log_level_back():
    from transformers.utils import logging as hf_logging

    from whileai.kit.quiet import quiet_libraries

    level = hf_logging.get_verbosity()
    with quiet_libraries():
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == level
