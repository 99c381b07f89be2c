"""Run tracking against the real platform: a uvicorn server on a loopback port, real SQLite, real trainers.

Covers what a fake cannot: a server stopped and restarted mid-run, 500s and
lost replies injected by a loopback proxy in front of the real server, a
process that exits while the platform is down and ``python -m whileai sync``,
two processes writing one embedded SQLite store, and TrainerCallback on a
real transformers Trainer and a real TRL SFTTrainer with the kit's tiny model.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from whileai.platform.server import serve_in_thread
from whileai.platform.store import Store, ensure_local_account, store_url
from whileai.domain.tracking import _run, _tracker
from whileai.domain import defaults
from whileai.core import defaults as core_defaults
from whileai.domain.client import get_client
from whileai.core.errors import NotFoundError
from whileai.simulations.training import delete_run, get_run, list_runs, training_run
from _job_helpers import wait_for

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fast_retries(monkeypatch):
    monkeypatch.setattr(defaults, "FLUSH_INTERVAL_S", 0.05)
    monkeypatch.setattr(defaults, "RETRY_BACKOFF_S", 0.05)
    monkeypatch.setattr(defaults, "RETRY_BACKOFF_MAX_S", 0.2)
    monkeypatch.setattr(defaults, "TRACKING_TIMEOUT_S", 2.0)
    _tracker._FLUSHER.wake.set()  # pick up the short interval now


@pytest.fixture
def server(home, monkeypatch):
    """A real platform server on a free loopback port, its store under the test's data root."""
    handle = serve_in_thread("127.0.0.1", 0, store_url())
    account_id, key = ensure_local_account(handle.store)
    monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
    monkeypatch.setenv("WHILEAI_API_KEY", key)
    state = {"handle": handle, "account": account_id, "key": key, "port": handle.port}
    before = set(_tracker._FLUSHER.trackers)
    yield state
    state["handle"].stop()
    with _tracker._FLUSHER.lock:  # runs on this stopped server are of no use to the rest of the session
        _tracker._FLUSHER.trackers &= before


def _count(run_id: str, account: str) -> int:
    store = Store(store_url())
    try:
        return store.count_points(account, run_id)
    finally:
        store.close()


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHILEAI_")}
    env.update(WHILEAI_HOME=str(home), PYTHONPATH=str(ROOT), **extra)
    return env


# --------------------------------------------------------------------------- the server goes away


def test_server_stopped_and_restarted_mid_run_stores_every_point_once(server, fast_retries):
    run = training_run(name="restart", config={"lr": 1e-3})
    assert run.url == f"{server['handle'].base_url}/runs/{run.id}"
    for step in range(300):
        run.log(step=step, loss=1.0 / (step + 1), learning_rate=1e-3)
        if step == 100:
            # the background thread has been sending
            wait_for(lambda: _count(run.id, server["account"]) > 0, 10, "the first points to arrive", every=0.02)
            server["handle"].stop()
        if step == 200:
            wait_for(lambda: run.errors > 0, 10, "a failed send", every=0.02)  # sends fail while the loop goes on logging
            server["handle"] = serve_in_thread("127.0.0.1", server["port"], store_url())
        time.sleep(0.001)
    run.note(outage="simulated")
    assert run.finish() is True
    record = get_run(run.id)
    assert [p["step"] for p in record["series"]] == list(range(300))
    assert _count(run.id, server["account"]) == 300
    assert record["status"] == "done" and record["summary"]["outage"] == "simulated"
    assert run.errors > 0


class _Proxy:
    """A loopback HTTP proxy in front of the real server that fails point uploads on cue.

    ``actions`` is consumed one per points upload: "500" answers 500 without
    forwarding; "lost" forwards (the server stores the batch) and then holds
    the reply past the client's deadline; anything else passes through.
    """

    def __init__(self, upstream_port: int, hold_s: float):
        self.actions: list[str] = []
        self.uploads = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                action = None
                if self.path.endswith("/points"):
                    proxy.uploads += 1
                    action = proxy.actions.pop(0) if proxy.actions else None
                if action == "500":
                    payload = b'{"error": {"message": "injected", "type": "internal"}}'
                    self.send_response(500)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                payload = answer.read()
                conn.close()
                if action == "lost":
                    time.sleep(hold_s)
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

            do_GET = do_POST = do_PATCH = do_DELETE = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_injected_500s_and_timeouts_are_counted_and_lose_nothing(server, monkeypatch):
    monkeypatch.setattr(defaults, "TRACKING_TIMEOUT_S", 0.5)
    monkeypatch.setattr(_tracker._FLUSHER, "flush_due", lambda: None)  # this test drives every send itself
    proxy = _Proxy(server["port"], hold_s=1.5)
    try:
        run = training_run(name="flaky", api_key=server["key"])
        run._tracker.client = get_client(api_key=server["key"], base_url=proxy.base_url)
        proxy.actions = ["500", "lost", "ok", "500", "lost", "lost", "ok"]
        results = []
        for step in range(70):
            run.log(step=step, loss=float(step))
            if step % 10 == 9:
                results.append(run.flush())
        while not run.flush():
            pass
        # 500 | lost | ok (a duplicate, stored once), 500 | lost | lost | ok (a duplicate), then clean sends
        assert results == [False] * 5 + [True] * 2
        assert run.errors == 5
        assert _count(run.id, server["account"]) == 70
        assert [p["step"] for p in get_run(run.id)["series"]] == list(range(70))
    finally:
        proxy.close()


# --------------------------------------------------------------------------- the spool and sync

_SPOOLING_SCRIPT = textwrap.dedent(
    """
    import sys
    import whileai.simulations as wai

    run = wai.training_run(name="spooled")
    print(run.id, flush=True)
    sys.stdin.readline()                       # the platform is stopped now
    for step in range(500):
        run.log(step=step, loss=1.0 / (step + 1))
    run.note(where="spool")
    ok = run.finish()
    print("finished", ok, run.errors, flush=True)
    """
)


@pytest.mark.slow
def test_a_process_that_exits_while_the_server_is_down_leaves_a_spool_that_sync_delivers(server, home):
    env = _env(home, WHILEAI_BASE_URL=server["handle"].base_url, WHILEAI_API_KEY=server["key"])
    child = subprocess.Popen(
        [sys.executable, "-c", _SPOOLING_SCRIPT], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    run_id = child.stdout.readline().strip()
    assert run_id.startswith("run_"), child.stderr.read()
    server["handle"].stop()
    out, err = child.communicate("go\n", timeout=60)
    assert child.returncode == 0, err
    assert "finished False" in out
    assert "python -m whileai sync" in err  # it says where the points went
    spooled = list((home / "spool").glob("*.jsonl"))
    assert spooled and "wai_" not in "".join(p.read_text() for p in spooled)

    sync = [sys.executable, "-m", "whileai", "sync"]
    down = subprocess.run(sync, env=env, capture_output=True, text=True, timeout=60)
    assert down.returncode == 1 and "still spooled" in down.stdout and "cannot reach" in down.stdout

    server["handle"] = serve_in_thread("127.0.0.1", server["port"], store_url())
    up = subprocess.run(sync, env=env, capture_output=True, text=True, timeout=60)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "delivered 500 points and 1 run updates" in up.stdout
    record = get_run(run_id)
    assert [p["step"] for p in record["series"]] == list(range(500))
    assert record["status"] == "done" and record["summary"] == {"where": "spool"}
    again = subprocess.run(sync, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "nothing to sync" in again.stdout
    assert not list((home / "spool").glob("*.jsonl"))


_EMBEDDED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    import whileai.simulations as wai

    run = wai.training_run(name=sys.argv[1])
    print(run.id, flush=True)
    while not os.path.exists(sys.argv[2]):   # start logging together
        time.sleep(0.01)
    for step in range(1000):
        run.log(step=step, loss=1.0, tokens=step)
        if step % 100 == 99:
            run.flush()
    assert run.finish(), run.errors
    """
)


@pytest.mark.slow
def test_two_processes_logging_to_one_embedded_store_lose_no_point(home):
    go = home / "go"
    env = _env(home)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _EMBEDDED_WRITER, f"writer-{i}", str(go)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    ids = [child.stdout.readline().strip() for child in children]
    go.touch()
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    store = Store(store_url())
    account = store.local_account_id()
    assert [store.count_points(account, run_id) for run_id in ids] == [1000, 1000]
    store.close()
    runs = list_runs(status="done")
    assert sorted(r["name"] for r in runs) == ["writer-0", "writer-1"]


_UNFINISHED = textwrap.dedent(
    """
    import sys
    import whileai.simulations as wai

    run = wai.training_run(name=sys.argv[1])
    print(run.id, flush=True)
    for step in range(50):
        run.log(step=step, loss=1.0)
    if sys.argv[1] == "crash":
        raise RuntimeError("the loss went to the moon")
    """
)


@pytest.mark.slow
def test_a_run_the_process_never_finishes_is_not_left_running(home):
    children = {
        name: subprocess.Popen([sys.executable, "-c", _UNFINISHED, name], env=_env(home), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        for name in ("forgot", "crash")
    }
    ids = {}
    for name, child in children.items():
        out, err = child.communicate(timeout=120)
        ids[name] = out.strip()
        assert child.returncode == (1 if name == "crash" else 0), err
    forgot, crash = get_run(ids["forgot"]), get_run(ids["crash"])
    assert len(forgot["series"]) == 50 and len(crash["series"]) == 50  # the points logged before exit landed
    assert forgot["status"] == "stopped" and "finish()" in forgot["error"]
    assert crash["status"] == "failed" and crash["error"] == "RuntimeError: the loss went to the moon"


# --------------------------------------------------------------------------- records, pages, printing


def test_get_list_delete_and_the_printed_line_with_cost(server):
    run = training_run(dataset="ds_0123456789abcdef", config={"lr": 2e-4, "cmd": ["python", "train.py"]}, name="priced")
    run.log(step=1, loss=0.5)
    run.note(gpu="A10G", seconds=56)
    run.finish()
    run.refresh()
    assert run.cost_usd == 0.02
    assert f"{run.id} (priced), done, step 1" in str(run)
    assert "about $0.02 (A10G, 56 s, estimate)" in str(run)
    record = get_run(run)
    assert record["config"] == {"lr": 2e-4, "cmd": ["python", "train.py"]}
    assert record["cost_basis"]["read_on"] == core_defaults.GPU_PRICE_READ_ON
    assert [r["id"] for r in list_runs(dataset="ds_0123456789abcdef")] == [run.id]
    newer = training_run(name="newer")
    assert [r["id"] for r in list_runs(limit=2)] == [newer.id, run.id]
    with pytest.raises(ValueError, match="status='finished'"):
        list_runs(status="finished")
    assert delete_run(run.id) == {"id": run.id, "deleted": True, "jobs": [], "models": []}  # what the deletion removed
    with pytest.raises(NotFoundError, match=run.id):
        get_run(run.id)


def test_embedded_run_url_is_the_servers_address_and_says_how_to_see_it(home, monkeypatch, capsys):
    monkeypatch.setattr(_run, "_HINTED", False)
    run = training_run(name="embedded")
    assert run.url == f"http://127.0.0.1:{core_defaults.PLATFORM_PORT}/runs/{run.id}"
    print(run)
    err = capsys.readouterr().err
    assert err.count(f"python -m whileai open {run.id}") == 1 and run.url in err


# --------------------------------------------------------------------------- TrainerCallback on real trainers


@pytest.fixture(scope="module")
def tiny():
    import torch

    from whileai.kit import build_tokenizer, tiny_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small gains nothing from a second thread on a shared machine
    tokenizer = build_tokenizer()
    model_kwargs = dict(hidden_size=32, num_hidden_layers=2, intermediate_size=64, num_attention_heads=2, num_key_value_heads=2)
    yield tokenizer, lambda: tiny_model(tokenizer, seed=0, **model_kwargs)
    torch.set_num_threads(threads)


def _texts(n: int = 24) -> list[str]:
    return [f"the weather in city {i} is {10 + i % 7} degrees and the sky is clear" for i in range(n)]


def _series_by_step(run_id: str) -> dict[int, dict[str, float]]:
    merged: dict[int, dict[str, float]] = {}
    for point in get_run(run_id)["series"]:
        merged.setdefault(point["step"], {}).update(point["metrics"])
    return merged


@pytest.mark.slow
def test_trainer_callback_on_a_transformers_trainer(home, tiny, tmp_path):
    import torch
    import transformers
    from transformers import DataCollatorForSeq2Seq, Trainer, TrainingArguments

    import whileai.simulations as wai

    tokenizer, make_model = tiny
    rows = [tokenizer(t, truncation=True, max_length=32) for t in _texts()]
    for row in rows:
        row["labels"] = list(row["input_ids"])
    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=6, per_device_train_batch_size=4, logging_steps=2,
        eval_strategy="steps", eval_steps=3, per_device_eval_batch_size=4, learning_rate=1e-3,
        report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
    )
    torch.manual_seed(0)
    run = wai.training_run(name="trainer", config={"max_steps": 6, "logging_steps": 2})
    run.note(model="kit tiny", rows=len(rows))
    callback = wai.TrainerCallback(run)
    assert isinstance(callback, transformers.TrainerCallback)
    trainer = Trainer(
        model=make_model(), args=args, train_dataset=rows, eval_dataset=rows[:8],
        data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True),
    )
    trainer.add_callback(callback)
    trainer.train()

    assert run.status == "done"
    record = get_run(run.id)
    assert record["status"] == "done" and record["total_steps"] == 6 and record["step"] == 6
    assert record["summary"] == {"model": "kit tiny", "rows": 24}
    by_step = _series_by_step(run.id)
    for step in (2, 4, 6):
        assert {"loss", "learning_rate", "grad_norm", "epoch"} <= set(by_step[step]), by_step[step]
    for step in (3, 6):
        assert "eval_loss" in by_step[step]
    assert "train_runtime" in by_step[6]  # every numeric key the trainer logs, end-of-train figures too
    assert set(by_step) == {2, 3, 4, 6}
    assert run.errors == 0 and run.skipped == 0


@pytest.mark.slow
def test_trainer_callback_on_a_trl_sft_trainer_keeps_notes(home, tiny, tmp_path):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    import whileai.simulations as wai

    tokenizer, make_model = tiny
    config = SFTConfig(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=4, logging_steps=1,
        learning_rate=1e-3, report_to=[], save_strategy="no", use_cpu=True, max_length=32,
        disable_tqdm=True, dataset_text_field="text",
    )
    with wai.training_run(name="sft", config={"max_steps": 4}) as run:
        run.note(method="sft")
        trainer = SFTTrainer(
            model=make_model(), args=config, train_dataset=Dataset.from_dict({"text": _texts()}),
            processing_class=tokenizer,
        )
        trainer.add_callback(wai.TrainerCallback(run))
        trainer.train()
        run.holdout(before=0.0, after=0.25)
    record = get_run(run.id)
    assert record["status"] == "done" and record["total_steps"] == 4
    assert record["summary"] == {"method": "sft", "holdout_before": 0.0, "holdout_after": 0.25}
    by_step = _series_by_step(run.id)
    assert set(by_step) == {1, 2, 3, 4}
    for step in range(1, 5):
        assert {"loss", "learning_rate", "grad_norm", "mean_token_accuracy", "num_tokens"} <= set(by_step[step])


def test_trainer_callback_drops_metrics_a_trainer_reports_as_none(home):
    """TRL's GRPO logs clip_ratio/low_min=None when nothing was clipped: absent, not a bad value."""
    import types
    import warnings

    import whileai.simulations as wai

    run = wai.training_run(name="nones")
    callback = wai.TrainerCallback(run)
    state = types.SimpleNamespace(is_world_process_zero=True, global_step=3, max_steps=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        callback.on_log(None, state, None, logs={"loss": 0.5, "clip_ratio/low_min": None})
    run.finish()
    assert run.skipped == 0
    assert _series_by_step(run.id) == {3: {"loss": 0.5}}
