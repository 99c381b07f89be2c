"""Faults: a server killed mid-request, keys guessed on the pages, inputs at the edges of their types, specs that
name what they should not, what a deletion leaves, what a client loads, and a store shared by two server versions.

Each test reproduces one failure against real parts: a real uvicorn server on loopback (in a thread, or as its
own ``python -m whileai platform`` process where the process is killed), real SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from whileai.platform import defaults
from whileai.kit import defaults as kit_defaults
from whileai.platform.launcher import jobs as launcher_jobs
from whileai.platform.server import serve_in_thread
from whileai.platform.store import Store
from _platform_server import free_port, platform_process

API = "/api/v1"
ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _url(backend: str, home: Path, pg_database) -> str:
    return f"sqlite:///{home / 'platform.db'}" if backend == "sqlite" else pg_database()


def _client(base_url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _stopped_run_with_a_checkpoint(store: Store, acct: str) -> str:
    """A run whose one local job was stopped after saving a checkpoint: what ``resume`` continues."""
    run = store.create_run(acct, name="to resume", status="running", config={"method": "sft"})
    rows, _ = store.create_dataset(acct, [{"task_id": "t", "passed": True, "messages": []}], name="rows")
    job = store.create_job(acct, run_id=run["id"], kind="sft", target="local", status="running",
                           spec={"method": "sft", "steps": 4, "save_steps": 2, "dataset": rows["id"],
                                 "base_model": kit_defaults.KIT_BASE_NAME})
    store.update_job(acct, job["id"], {"status": "stopped", "error": "stopped on request"})
    store.update_run(acct, run["id"], {"status": "stopped", "error": "stopped on request"})
    saved = launcher_jobs.checkpoint_dir(run["id"]) / "checkpoint-2"
    saved.mkdir(parents=True)
    (saved / "trainer_state.json").write_text("{}")
    return run["id"]


def _stop(client: httpx.Client, run_id: str) -> None:
    """Stop the run's worker (a resumed job starts a real one) so that no process outlives the test."""
    client.post(f"{API}/runs/{run_id}/stop")


# --------------------------------------------------------------------------- 1. a resume cut short by a crash


def _resume_killed_at(point: str, url: str, home: Path, log: Path) -> tuple[Store, str, str, str]:
    """A stopped run with a checkpoint whose resume kills the server (SIGKILL) at fault ``point``: ``(store,
    account, key, run id)``, the store open on what the killed server left."""
    store = Store(url)
    acct, key = store.create_account("a")
    run_id = _stopped_run_with_a_checkpoint(store, acct)
    with platform_process(home, log, "--store-url", url, env={defaults.FAULT_AT_ENV: point}) as (proc, base):
        with _client(base, key) as a, pytest.raises(httpx.HTTPError):
            a.post(f"{API}/runs/{run_id}/resume")
        assert proc.wait(30) == -signal.SIGKILL
    return store, acct, key, run_id


def _resumes(url: str, key: str, run_id: str) -> dict:
    """Resume ``run_id`` on a fresh server over ``url``'s store (201, running), stop its worker; the run record."""
    with serve_in_thread(store_url=url) as handle, _client(handle.base_url, key) as a:
        resumed = a.post(f"{API}/runs/{run_id}/resume")
        try:
            assert resumed.status_code == 201, resumed.text
            assert resumed.json()["run"]["status"] == "running"
            return resumed.json()["run"]
        finally:
            _stop(a, run_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_resume_killed_before_its_job_exists_leaves_the_run_as_it_was(backend, home, tmp_path, pg_database):
    """The server is killed (SIGKILL, at a fault point) after the resume's status write and before its job
    exists: the run was left ``running`` for good, with every job finished. Now it stays ``stopped``, and a
    resume on the next server starts its job."""
    url = _url(backend, home, pg_database)
    store, acct, key, run_id = _resume_killed_at("after_reopen", url, home, tmp_path / "server.log")
    run = store.get_run(acct, run_id, series=False)
    assert run["status"] == "stopped" and run["error"] == "stopped on request", run
    assert [j["status"] for j in store.list_jobs(acct, run_id=run_id)] == ["stopped"]
    store.close()
    assert _resumes(url, key, run_id)["summary"]["resumed"]["from_step"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_resume_killed_after_its_job_row_before_its_worker_is_settled_and_resumes(backend, home, tmp_path,
                                                                                    pg_database):
    """The other point between the status write and the launch: the server is killed once the job row (and with
    it the run's ``running``) is written and before any worker starts. The queued job with no process is settled
    once JOB_START_GRACE_S has passed, the run ends ``failed`` naming why, and a resume starts its job."""
    url = _url(backend, home, pg_database)
    store, acct, key, run_id = _resume_killed_at("after_job_row", url, home, tmp_path / "server.log")
    queued = [j for j in store.list_jobs(acct, run_id=run_id) if j["status"] == "queued"]
    assert len(queued) == 1 and not queued[0].get("pid"), store.list_jobs(acct, run_id=run_id)
    assert store.get_run(acct, run_id, series=False)["status"] == "running"
    long_ago = time.time() - defaults.JOB_START_GRACE_S - 60
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE jobs SET created_at = :t WHERE id = :id"), {"t": long_ago, "id": queued[0]["id"]})
    store.close()
    with serve_in_thread(store_url=url) as handle, _client(handle.base_url, key) as a:
        run = a.get(f"{API}/runs/{run_id}").json()
    assert run["status"] == "failed" and "the job never started" in run["error"], run
    _resumes(url, key, run_id)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_resumes_of_one_run_never_start_two_jobs(backend, home, pg_database):
    """The run turns running with its job now, so a second resume asked while the first's job is starting is
    refused (it found the run still stopped, and would have started a second worker)."""
    from whileai.platform.store.values import InvalidError

    store = Store(_url(backend, home, pg_database))
    acct, _key = store.create_account("a")
    run_id = _stopped_run_with_a_checkpoint(store, acct)
    store.reopen_run(acct, run_id, {"resumed": {"n": 1}})
    with pytest.raises(InvalidError, match="is being resumed already"):
        store.reopen_run(acct, run_id, {"resumed": {"n": 2}})
    assert store.get_run(acct, run_id, series=False)["status"] == "stopped"
    store.create_job(acct, run_id=run_id, kind="sft", target="local")
    run = store.get_run(acct, run_id, series=False)
    assert run["status"] == "running" and run["summary"]["resumed"] == {"n": 1} and run["error"] is None
    with pytest.raises(InvalidError, match="is running"):
        store.reopen_run(acct, run_id, {"resumed": {"n": 3}})
    store.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_running_run_whose_jobs_all_ended_is_settled_crashed(backend, home, pg_database):
    """What such a crash left before: a ``running`` run, every job finished, silent past RUN_STALE_S. It read
    ``running`` for good, ``resume`` answered 409 "still running" and ``stop`` said "it had no job"; it reads
    ``crashed`` now, naming what happened, and resumes."""
    url = _url(backend, home, pg_database)
    with serve_in_thread(store_url=url) as handle:
        acct, key = handle.store.create_account("a")
        run_id = _stopped_run_with_a_checkpoint(handle.store, acct)
        (job,) = handle.store.list_jobs(acct, run_id=run_id)
        long_ago = time.time() - defaults.RUN_STALE_S - 60
        with handle.store.engine.begin() as conn:
            conn.execute(sa.text("UPDATE runs SET status = 'running', error = NULL, updated_at = :t WHERE id = :id"),
                         {"t": long_ago, "id": run_id})
        with _client(handle.base_url, key) as a:
            run = a.get(f"{API}/runs/{run_id}").json()
            assert run["status"] == "crashed", run
            assert f"every job of it had ended (the last, {job['id']}, ended stopped)" in run["error"]
            assert "resume it again" in run["error"]
            stopped = a.post(f"{API}/runs/{run_id}/stop").json()
            assert stopped["stopped"] is False and "already ended crashed" in stopped["detail"], stopped
            assert "a run logged by hand" not in stopped["detail"]
            resumed = a.post(f"{API}/runs/{run_id}/resume")
            try:
                assert resumed.status_code == 201, resumed.text
                assert resumed.json()["run"]["status"] == "running"
            finally:
                _stop(a, run_id)


# --------------------------------------------------------------------------- 2. keys guessed on the pages


def test_wrong_keys_on_the_pages_count_toward_the_one_limit_of_wrong_keys(home):
    """Wrong bearer keys on the page routes were answered 401 or 303 for ever and counted nowhere; they count now,
    toward the API's limit too, and past it every route answers 429 while a correct key still reads."""
    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}") as handle:
        acct, key = handle.store.create_account("a")
        run = handle.store.create_run(acct, name="r")
        paths = ["/page-data/runs", f"/page-data/runs/{run['id']}", f"/page-data/runs/{run['id']}/live",
                 "/page-data/compare", "/page-data/sweeps/s", f"/runs/{run['id']}", "/runs", "/compare", "/sweeps/s"]
        answers = []
        with httpx.Client(base_url=handle.base_url, timeout=30, follow_redirects=False) as anyone:
            for i in range(defaults.API_KEY_MAX_FAILURES + 10):
                wrong = {"Authorization": f"Bearer wai_{i:04d}" + "x" * 40}
                answers.append(anyone.get(paths[i % len(paths)], headers=wrong).status_code)
            assert set(answers[:defaults.API_KEY_MAX_FAILURES]) <= {401, 303}, answers
            assert 429 in answers[defaults.API_KEY_MAX_FAILURES:], answers
            refused = anyone.get(f"{API}/runs", headers={"Authorization": "Bearer wai_elsewhere" + "y" * 40})
            assert refused.status_code == 429 and "Retry-After" in refused.headers, refused.text
            page = anyone.get(f"/page-data/runs/{run['id']}", headers={"Authorization": "Bearer wai_more" + "z" * 40})
            assert page.status_code == 429 and "API_KEY_MAX_FAILURES" in page.text, page.text
            for path in paths[:3]:  # the owner's key is never refused
                assert anyone.get(path, headers={"Authorization": f"Bearer {key}"}).status_code == 200


# --------------------------------------------------------------------------- 3. numbers at the edges of their types


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_number_past_its_bound_in_a_query_is_refused_naming_the_bound(backend, home, pg_database):
    """``page=99999999999999999999`` overflowed SQLite's OFFSET (a 500); every number in a query is bounded."""
    with serve_in_thread(store_url=_url(backend, home, pg_database)) as handle:
        acct, key = handle.store.create_account("a")
        handle.store.create_run(acct, name="r")
        with _client(handle.base_url, key) as a:
            for query in ({"page": "99999999999999999999"}, {"page": "1e999"}, {"per_page": "-99999999999999999999"}):
                refused = a.get("/page-data/runs", params=query)
                assert refused.status_code == 422, refused.text
                message = refused.json()["error"]["message"]
                assert f"{next(iter(query))}=" in message and "PLATFORM_QUERY_NUMBER_MAX" in message
            listed = a.get("/page-data/runs", params={"page": str(defaults.PLATFORM_QUERY_NUMBER_MAX)})
            assert listed.status_code == 200 and listed.json()["runs"] == [], listed.text
            assert a.get(f"{API}/runs", params={"limit": "1" + "0" * 30}).status_code == 422
            assert a.get("/page-data/runs", params={"dataset": "nan"}).status_code == 200  # a word is a name


@pytest.mark.slow
def test_a_temperature_too_small_to_sample_decodes_greedily(home, monkeypatch):
    """A chat completion with ``temperature`` 5e-324 or 1e-300 was a 500 ("probability tensor contains inf, nan");
    below SERVING_MIN_TEMPERATURE it decodes as temperature 0 does. A seed outside SERVING_MAX_SEED's range is a
    400 naming it."""
    from whileai.kit._base import tiny_model_dir
    from whileai.simulations.serving import serve

    base = tiny_model_dir()
    monkeypatch.setenv(defaults.SERVE_DIRS_ENV, str(Path(base).parent))
    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}") as handle:
        _acct, key = handle.store.create_account("a")
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", key)
        serve(None, "bare", base_model=str(base))
        with _client(handle.base_url, key) as a:
            ask = {"model": "bare", "messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 4}
            greedy = a.post("/v1/chat/completions", json={**ask, "temperature": 0})
            assert greedy.status_code == 200, greedy.text
            for tiny in (5e-324, 1e-300, defaults.SERVING_MIN_TEMPERATURE / 2):
                reply = a.post("/v1/chat/completions", json={**ask, "temperature": tiny})
                assert reply.status_code == 200, reply.text
                assert reply.json()["choices"][0]["message"] == greedy.json()["choices"][0]["message"]
            refused = a.post("/v1/chat/completions", json={**ask, "seed": -1})
            assert refused.status_code == 400 and "seed" in refused.text, refused.text


# --------------------------------------------------------------------------- 4. launch specs the platform refuses


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_launch_refuses_loose_types_unknown_gpus_foreign_run_ids_and_data_folders_as_bases(backend, home,
                                                                                           pg_database):
    """Each of these was answered 201 and handed to a worker; each is a 422 naming the field now, before any job."""
    from whileai.core.spec import SFTSpec

    kit = kit_defaults.KIT_BASE_NAME
    with serve_in_thread(store_url=_url(backend, home, pg_database)) as handle:
        _a, key_a = handle.store.create_account("a")
        acct_b, _key_b = handle.store.create_account("b")
        theirs = handle.store.create_run(acct_b, name="b's", status="done", config={"method": "sft"})
        launcher_jobs.adapter_dir(theirs["id"]).mkdir(parents=True)
        with _client(handle.base_url, key_a) as a:
            ds = a.post(f"{API}/datasets", json={"name": "rows", "rows": [{"messages": []}]}).json()
            spec = {**SFTSpec(base_model=kit).knobs(), "method": "sft", "base_model": kit, "dataset": ds["id"]}
            cases = {
                "dataset": (None, "spec dataset=None is not a dataset id"),
                "steps": (True, "spec steps=True is a bool where a number goes"),
                "max_tool_output_chars": (True, "spec max_tool_output_chars=True is a bool"),
                "gpu": ("a fast one", "spec gpu='a fast one' is not a GPU jobs run on"),
                "run_id": ("../../adapters/x", "spec run_id='../../adapters/x' is not this launch's run_id"),
                "base_model": (f"adapters/{theirs['id']}", "names a folder of the platform's own data"),
            }
            for field, (value, said) in cases.items():
                run = a.post(f"{API}/runs", json={"name": field, "config": {"method": "sft"}}).json()
                refused = a.post(f"{API}/jobs/launch", json={"run_id": run["id"], "kind": "sft",
                                                            "spec": {**spec, field: value}})
                assert refused.status_code == 422, (field, refused.text)
                assert said in refused.json()["error"]["message"], (field, refused.text)
                assert a.get(f"{API}/jobs", params={"run_id": run["id"]}).json()["jobs"] == []
            for gpu in ("H100", "A10G:2"):  # the price table's names, with or without a count, pass (refused for steps)
                run = a.post(f"{API}/runs", json={"name": gpu, "config": {"method": "sft"}}).json()
                answer = a.post(f"{API}/jobs/launch", json={"run_id": run["id"], "kind": "sft",
                                                           "spec": {**spec, "gpu": gpu, "steps": False}})
                assert answer.status_code == 422 and "steps=False" in answer.text, answer.text
                assert "gpu" not in answer.json()["error"]["message"], answer.text


# --------------------------------------------------------------------------- 5. what a deletion leaves


def test_sqlite_overwrites_what_is_deleted(home):
    """``secure_delete`` is on for every connection, so a deleted run's name is not left in the file's free pages."""
    path = home / "platform.db"
    store = Store(f"sqlite:///{path}")
    acct, _key = store.create_account("a")
    marker = "deleted-name-" + "q" * 40
    run = store.create_run(acct, name=marker, config={"note": marker})
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("PRAGMA secure_delete")).scalar() == 1
    store.delete_run(acct, run["id"])
    with store.engine.connect() as conn:
        conn.execute(sa.text("PRAGMA wal_checkpoint(TRUNCATE)"))
    store.close()
    assert marker.encode() not in path.read_bytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_spooled_records_of_a_deleted_run_or_account_are_dropped_with_one_line(backend, home, pg_database):
    """A spool holding a deleted run's id was retried for ever (409), and so was a deleted account's (401); both
    are dropped now, saying so in one line, while a live run's record lands."""
    from whileai.core.errors import TrackingWarning
    from whileai.core.ids import new_id
    from whileai.domain.client import Client
    from whileai.domain.tracking import _spool

    with serve_in_thread(store_url=_url(backend, home, pg_database)) as handle:
        acct_a, key_a = handle.store.create_account("a")
        acct_b, key_b = handle.store.create_account("b")
        deleted = handle.store.create_run(acct_a, name="deleted")
        handle.store.delete_run(acct_a, deleted["id"])
        handle.store.delete_account(acct_b)
        live = new_id("run")
        target = {"base_url": handle.base_url}
        _spool.write([
            {"kind": "create", "run_id": deleted["id"], "body": {"id": deleted["id"], "name": "again"},
             "target": {**target, "key_id": "a"}},
            {"kind": "create", "run_id": new_id("run"), "body": {"name": "b's"}, "target": {**target, "key_id": "b"}},
            {"kind": "create", "run_id": live, "body": {"id": live, "name": "live"}, "target": {**target, "key_id": "a"}},
        ])
        clients = {"a": Client(handle.base_url, key_a), "b": Client(handle.base_url, key_b)}
        with pytest.warns(TrackingWarning) as said:
            report = _spool.deliver(lambda t: clients[t["key_id"]])
        assert report.runs == 1 and report.left == 0 and report.dropped == 2, report
        (line,) = [str(w.message) for w in said if "can never store" in str(w.message)]
        assert "1 because its run was deleted" in line and "1 because its account was deleted" in line, line
        assert _spool.pending_files() == []
        assert handle.store.get_run(acct_a, live, series=False)["name"] == "live"
        refused = httpx.get(f"{handle.base_url}{API}/runs", headers={"Authorization": f"Bearer {key_b}"})
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "account_deleted"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deleted_dataset_is_no_longer_named_as_its_siblings_sibling(backend, home, pg_database):
    with serve_in_thread(store_url=_url(backend, home, pg_database)) as handle:
        _acct, key = handle.store.create_account("a")
        with _client(handle.base_url, key) as a:
            train = a.post(f"{API}/datasets", json={"name": "train", "rows": [{"messages": [], "n": 1}]}).json()
            held = a.post(f"{API}/datasets", json={"name": "held", "rows": [{"messages": [], "n": 2}]}).json()
            a.patch(f"{API}/datasets/{train['id']}", json={"split": "train", "sibling": held["id"]}).raise_for_status()
            a.patch(f"{API}/datasets/{held['id']}", json={"split": "holdout", "sibling": train["id"]}).raise_for_status()
            a.delete(f"{API}/datasets/{held['id']}").raise_for_status()
            assert a.get(f"{API}/datasets/{train['id']}").json()["sibling"] is None


# --------------------------------------------------------------------------- 6. what a client loads


def _fake_adapter(run_id: str) -> Path:
    """A folder where the platform keeps ``run_id``'s adapter, shaped like a PEFT save (config and weights)."""
    folder = launcher_jobs.adapter_dir(run_id)
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    return folder


@pytest.mark.parametrize("backend", BACKENDS)
def test_export_and_reward_model_load_what_the_platform_resolves_not_a_summary(backend, home, tmp_path, monkeypatch,
                                                                               pg_database, capsys):
    """A's done run whose summary names B's adapter folder was merged by ``export`` and loaded by
    ``wai.reward_model``; both refuse it now, and A's own run loads the folder its job saved."""
    import whileai.simulations as wai
    from whileai.runner.export_model import export_main

    kit = kit_defaults.KIT_BASE_NAME
    with serve_in_thread(store_url=_url(backend, home, pg_database)) as handle:
        acct_a, key_a = handle.store.create_account("a")
        acct_b, _key_b = handle.store.create_account("b")
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", key_a)
        theirs = handle.store.create_run(acct_b, name="b's", status="done", config={"method": "rm", "base_model": kit})
        b_adapter = _fake_adapter(theirs["id"])
        forged = {method: handle.store.create_run(acct_a, name=f"forged {method}", status="done",
                                                  config={"method": method, "base_model": kit},
                                                  summary={"adapter": str(b_adapter), "training": {"threshold": 0.0}})
                  for method in ("rm", "sft")}
        with pytest.raises(ValueError, match="has no adapter this platform loads"):
            wai.reward_model(forged["rm"]["id"])
        merged = tmp_path / "merged"
        assert export_main([forged["sft"]["id"], "--merged", str(merged)]) == 2
        said = capsys.readouterr().err
        assert "has no adapter this platform loads" in said and str(b_adapter) not in said, said
        assert not merged.exists()
        own = handle.store.create_run(acct_a, name="own rm", status="done", config={"method": "rm", "base_model": kit},
                                      summary={"adapter": str(b_adapter), "training": {"threshold": 0.25}})
        folder = _fake_adapter(own["id"])
        judge = wai.reward_model(own["id"])
        assert (judge.adapter, judge.base_model, judge.threshold) == (str(folder), kit, 0.25)
        with _client(handle.base_url, key_a) as a:
            assert a.get(f"{API}/runs/{theirs['id']}/adapter").status_code == 404  # B's run is not A's


# --------------------------------------------------------------------------- export says only its own lines


@pytest.mark.slow
def test_export_prints_only_its_own_lines(home, tmp_path):
    """``python -m whileai export`` printed transformers' FutureWarning and weight-loading progress bars between
    its own lines; it prints its own lines alone now."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from whileai.kit._base import tiny_model_dir

    base = str(tiny_model_dir())
    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}") as handle:
        acct, key = handle.store.create_account("a")
        run = handle.store.create_run(acct, name="sft", status="done", config={"method": "sft", "base_model": base})
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                               LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
        model.save_pretrained(launcher_jobs.adapter_dir(run["id"]))
        AutoTokenizer.from_pretrained(base).save_pretrained(launcher_jobs.adapter_dir(run["id"]))
        out = tmp_path / "merged"
        env = {**os.environ, "WHILEAI_BASE_URL": handle.base_url, "WHILEAI_API_KEY": key, "WHILEAI_HOME": str(home)}
        done = subprocess.run([sys.executable, "-m", "whileai", "export", run["id"], "--merged", str(out)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"merging the adapter of {run['id']} into {base} ..."], done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == ["merged", "load", "tool"], done.stdout


# --------------------------------------------------------------------------- 7. one schema, one server generation


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_server_stops_writing_to_a_store_a_newer_whileai_upgraded_and_none_starts_on_it(backend, home, tmp_path,
                                                                                       pg_database, monkeypatch):
    """A store whose revision moved past the server's (a newer whileai upgraded it) took the old server's writes;
    its writes are refused now, naming both revisions and the fix, and a server will not start on it."""
    from whileai.platform.store import migrate

    monkeypatch.setattr(defaults, "STORE_SCHEMA_CHECK_S", 0.0)  # checked before every write, not every 5 s
    url = _url(backend, home, pg_database)
    newer = "0099_from_a_newer_whileai"
    with serve_in_thread(store_url=url) as handle:
        _acct, key = handle.store.create_account("a")
        with _client(handle.base_url, key) as a:
            assert a.post(f"{API}/runs", json={"name": "before"}).status_code == 201
            with handle.store.engine.begin() as conn:
                conn.execute(sa.text("UPDATE alembic_version SET version_num = :v"), {"v": newer})
            refused = a.post(f"{API}/runs", json={"name": "after"})
            assert refused.status_code == 503, refused.text
            message = refused.json()["error"]["message"]
            assert newer in message and migrate.HEAD_REVISION in message and "Stop this server" in message
            assert [r["name"] for r in a.get(f"{API}/runs").json()["runs"]] == ["before"]
    done = subprocess.run([sys.executable, "-m", "whileai", "platform", "--port", str(free_port()), "--store-url",
                           url], cwd=ROOT, env={**os.environ, "WHILEAI_HOME": str(home)}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert newer in done.stderr and migrate.HEAD_REVISION in done.stderr and "pip install -U whileai" in done.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_upgrade_names_a_live_server_of_the_older_revision_instead_of_upgrading_under_it(backend, home, tmp_path,
                                                                                           pg_database):
    """An upgrade ran under a live older server (which then wrote the old schema into the new one); it names the
    server to stop now, and upgrades once that server is gone. A server registers itself and leaves on stop."""
    import secrets

    from alembic import command

    from whileai.platform.store import migrate
    from whileai.platform.store._writers import mark_writers

    url = _url(backend, home, pg_database)
    older = migrate.revisions()[-2]
    engine = sa.create_engine(url)
    mark_writers(engine, older)  # writes as that revision's code does: from 0005 on the store refuses others
    config = migrate.alembic_config()
    older_server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # stands in for its pid
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, older)
            conn.execute(sa.text("INSERT INTO settings (key, value) VALUES (:k, :v)"), {
                "k": f"server:{secrets.token_hex(8)}",
                "v": json.dumps({"revision": older, "host": socket.gethostname(), "pid": older_server.pid,
                                 "beat": time.time()})})
        with pytest.raises(migrate.StoreVersionError) as refused:
            Store(url)
        message = str(refused.value)
        assert f"pid {older_server.pid}" in message and repr(older) in message and "stop it first" in message
        done = subprocess.run([sys.executable, "-m", "whileai", "platform", "upgrade", "--store-url", url], cwd=ROOT,
                              env={**os.environ, "WHILEAI_HOME": str(home)}, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 1 and f"pid {older_server.pid}" in done.stderr, done.stdout + done.stderr
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == older
    finally:
        older_server.kill()
        older_server.wait()
    engine.dispose()
    with serve_in_thread(store_url=url) as handle:  # the older server gone: the store upgrades as it opens
        assert migrate.store_revision(handle.store) == migrate.HEAD_REVISION
        with handle.store.engine.connect() as conn:
            live = [row for row in conn.execute(sa.text("SELECT key, value FROM settings WHERE key LIKE 'server:%'"))
                    if json.loads(row[1])["pid"] == os.getpid()]
        assert [json.loads(v)["revision"] for _k, v in live] == [migrate.HEAD_REVISION]
        store = handle.store
    with store.engine.connect() as conn:
        assert not [r for r in conn.execute(sa.text("SELECT value FROM settings WHERE key LIKE 'server:%'"))
                    if json.loads(r[0])["pid"] == os.getpid()]
