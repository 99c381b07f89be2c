"""The platform as a team server: what one account holder can and cannot reach, and where keys never appear.

The route walk iterates the app's own route table, so a route added later is
walked too (and one with a path parameter or a body the walk does not know
fails here until it is taught). Everything runs against a real uvicorn server
on loopback; the no-key check starts ``python -m whileai platform`` as a
process and greps everything it wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx
import pytest
from test_store import postgres_url  # noqa: F401  (fixture: a fresh PostgreSQL database)

from whileai.platform.api import create_app
from whileai.platform.server import serve_in_thread
from whileai.platform.store import Store, ensure_local_account, local_key_name, local_key_path
from whileai.platform import defaults
from whileai.kit import defaults as kit_defaults
from _platform_server import platform_process

API = "/api/v1"
MARK = "alpha-private-7f3"  # in every name and value of account A's; never in a reply to B
KIT = kit_defaults.KIT_BASE_NAME
SWEEP = "sweep-of-a"  # A's sweep id: B must send it to ask
MODEL = "a-served"  # A's model name: B must send it to ask, so a 404 may name it back


def route_table(app) -> list[tuple[str, str]]:
    """(method, path template) for every route the app answers, included routers flattened."""
    out = []
    for route in app.routes:
        contexts = route.effective_route_contexts() if hasattr(route, "effective_route_contexts") else [route]
        for r in contexts:
            for method in sorted(getattr(r, "methods", None) or ()):
                if method != "HEAD":
                    out.append((method, r.path))
    return out


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A real server with two accounts; A owns a run with points, a dataset, a served model and a job."""
    db = tmp_path_factory.mktemp("team") / "platform.db"
    handle = serve_in_thread(store_url=f"sqlite:///{db}")
    acct_a, key_a = handle.store.create_account(f"a-{MARK}")
    acct_b, key_b = handle.store.create_account("b")
    a = httpx.Client(base_url=handle.base_url, headers={"Authorization": f"Bearer {key_a}"}, timeout=60)
    b = httpx.Client(base_url=handle.base_url, headers={"Authorization": f"Bearer {key_b}"},
                     cookies={"whileai_key": key_b}, timeout=60)
    config = {"note": MARK, "base_model": KIT, "sweep_id": SWEEP}
    run = a.post(f"{API}/runs", json={"name": MARK, "config": config}).json()
    run2 = a.post(f"{API}/runs", json={"name": MARK, "config": config}).json()
    a.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "p0", "points": [
        {"step": i, "metrics": {"loss": 1.0}} for i in range(4)]}).raise_for_status()
    ds = a.post(f"{API}/datasets", json={"name": MARK, "rows": [{"secret": MARK}]}).json()
    a.post(f"{API}/models", json={"name": MODEL, "baseModel": KIT, "adapterRunId": run["id"]}).raise_for_status()
    job = handle.store.create_job(acct_a, run_id=run["id"], kind="sft", target="local",
                                  spec={"dataset": ds["id"], "note": MARK})
    job_key = handle.store.issue_job_key(acct_a, job["id"])
    yield {"handle": handle, "a": a, "b": b, "acct_a": acct_a, "acct_b": acct_b, "key_a": key_a, "key_b": key_b,
           "run": run, "run2": run2, "ds": ds, "job": job, "job_key": job_key}
    a.close()
    b.close()
    handle.stop()


# Bodies that pass validation, so that only the account scoping can refuse them: A's ids are filled in.
# (method, path) -> body builder; a write route missing here fails the walk until one is added.
BODIES = {
    ("POST", "/api/v1/models"): lambda t: {"name": "stolen", "baseModel": KIT, "adapterRunId": t["run"]["id"]},
    ("POST", "/api/v1/runs"): lambda t: {"name": "b's own"},
    ("PATCH", "/api/v1/runs/{run_id}"): lambda t: {"status": "failed", "summary": {"x": 1}},
    ("POST", "/api/v1/runs/{run_id}/points"): lambda t: {"batch_id": "evil", "points": [{"step": 9, "metrics": {"x": 1.0}}]},
    ("POST", "/api/v1/datasets"): lambda t: {"rows": [{"y": 1}], "sibling": t["ds"]["id"]},
    ("PATCH", "/api/v1/datasets/{dataset_id}"): lambda t: {"split": "train"},
    ("PATCH", "/api/v1/jobs/{job_id}"): lambda t: {"heartbeat_at": 1.0},
    ("POST", "/v1/chat/completions"): lambda t: {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
    ("POST", "/api/v1/jobs/launch"): lambda t: {"run_id": t["run"]["id"], "kind": "sft", "spec": {}},
    ("POST", "/api/v1/jobs/{job_id}/end"): lambda t: {"status": "failed", "error": "x"},
    ("POST", "/api/v1/runs/{run_id}/stop"): lambda t: None,
    ("POST", "/api/v1/runs/{run_id}/resume"): lambda t: None,
}
BODIES[("POST", "/signin")] = lambda t: None  # a form post without A's key: it signs nobody in as A
BODIES[("POST", "/signout")] = lambda t: None
# routes that take A's ids in the query string
QUERIES = {
    ("GET", "/compare"): lambda t: {"runs": f"{t['run']['id']},{t['run2']['id']}"},
    ("GET", "/page-data/compare"): lambda t: {"runs": f"{t['run']['id']},{t['run2']['id']}"},
}
# routes B may call and succeed on, without any of A's ids in the request
OWN = {("POST", "/api/v1/runs"), ("POST", "/signin"), ("POST", "/signout")}
PUBLIC = {("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/docs/oauth2-redirect"), ("GET", "/redoc"),
          ("GET", "/"), ("GET", "/favicon.ico"), ("GET", "/static/{name:path}"), ("GET", "/signin"),
          ("GET", "/signin/once")}


def _fill(path: str, t: dict) -> str:
    ids = {"run_id": t["run"]["id"], "job_id": t["job"]["id"], "dataset_id": t["ds"]["id"], "sweep": SWEEP,
           "name": "pages.css" if path.startswith("/static/") else MODEL}

    def one(match: re.Match) -> str:
        name = match.group(1).split(":")[0]
        assert name in ids, f"the walk does not know the path parameter {name!r} of {path}; teach it A's value"
        return ids[name]

    return re.sub(r"\{([^}]+)\}", one, path)


def test_account_b_reaches_nothing_of_account_a_on_any_route(team):
    t = team
    table = route_table(t["handle"].app)
    assert len(table) >= 30 and ("GET", "/api/v1/runs/{run_id}") in table
    walked = []
    for method, template in table:
        path = _fill(template, t)
        if method in ("POST", "PATCH", "PUT"):
            assert (method, template) in BODIES, f"{method} {template} is new: add a body to BODIES for the walk"
            body = BODIES[(method, template)](t)
        else:
            body = None
        query = QUERIES[(method, template)](t) if (method, template) in QUERIES else None
        r = t["b"].request(method, path, json=body, params=query, follow_redirects=False)
        walked.append((method, template, r.status_code))
        assert MARK not in r.text, (method, template, r.text[:300])
        assert t["key_a"] not in r.text and t["job_key"] not in r.text
        names_a = "{" in template or (method, template) in QUERIES or (
            (method, template) in BODIES and (method, template) not in OWN)
        if names_a and (method, template) not in PUBLIC:
            assert r.status_code == 404, (method, template, r.status_code, r.text[:300])
        else:
            assert r.status_code < 500, (method, template, r.status_code, r.text[:300])
    assert {(m, p) for m, p, _ in walked} == set(table), "every route in the table was walked"

    # A's things are as A left them
    a = t["a"]
    run = a.get(f"{API}/runs/{t['run']['id']}").json()
    assert run["status"] == "running" and run["summary"] == {} and len(run["series"]) == 4
    assert a.get(f"{API}/datasets/{t['ds']['id']}").json()["split"] is None
    assert a.get(f"{API}/models/{MODEL}").json()["version"] == 1
    job = a.get(f"{API}/jobs/{t['job']['id']}").json()
    assert job["status"] == "queued" and job["heartbeat_at"] is None
    assert t["b"].get(f"{API}/runs").json()["runs"][0]["name"] == "b's own"  # only B's own


def test_no_route_takes_a_job_field_or_a_path_of_the_callers_choosing(team, tmp_path):
    """No request body carries pid, host, log or key hashes; a spec that names one, or a server path, is refused."""
    schema = create_app(team["handle"].store).openapi()
    fields: set[str] = set()

    def props(node):
        if isinstance(node, dict):
            fields.update((node.get("properties") or {}).keys())
            for value in node.values():
                props(value)
        elif isinstance(node, list):
            for value in node:
                props(value)

    props(schema.get("components", {}))
    assert not fields & {"pid", "host", "log", "key_hash", "call_id", "pulled"}, fields
    b = team["b"]
    own = b.post(f"{API}/runs", json={"name": "b-run"}).json()
    for spec in ({"log": "/etc/passwd"}, {"key_hash": "x"}, {"host": "elsewhere"}, {"base_model": "/etc"}):
        assert b.post(f"{API}/jobs/launch", json={"run_id": own["id"], "kind": "sft", "spec": spec}).status_code == 422
    for body in ({"name": "m", "baseModel": "/etc", "adapterRunId": own["id"]},
                 {"name": "m", "baseModel": KIT, "adapter": str(tmp_path), "adapterRunId": own["id"]},
                 {"name": "m", "baseModel": KIT, "adapter": str(team["handle"].store.url), "adapterRunId": own["id"]}):
        r = b.post(f"{API}/models", json=body)
        assert r.status_code == 422 and "exist" not in r.text, r.text

    # A job row an older platform wrote with a log path of its own: settling it reads only the platform's log
    job = team["handle"].store.create_job(team["acct_b"], run_id=own["id"], kind="sft", target="local",
                                          status="running", pid=2**22 + 7, spec={"log": "/etc/passwd", "host": None})
    settled = b.get(f"{API}/jobs/{job['id']}").json()
    assert settled["status"] == "failed" and "root:" not in (settled["error"] or "")
    assert "/etc/passwd" not in (settled["error"] or "")


def test_a_failure_answers_an_error_id_and_logs_the_details(team, caplog):
    from fastapi.testclient import TestClient

    app = create_app(team["handle"].store)

    @app.get("/api/v1/boom")
    def boom():
        raise RuntimeError(f"internal detail {team['key_a']}")

    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get("/api/v1/boom")
    assert r.status_code == 500
    message = r.json()["error"]["message"]
    error_id = r.headers["X-Error-Id"]
    assert error_id in message and "internal detail" not in r.text and "RuntimeError" not in r.text
    assert team["key_a"] not in r.text
    logged = [rec for rec in caplog.records if error_id in rec.getMessage()]
    assert logged and logged[0].exc_info is not None, "the traceback is in the server log under that id"


# --------------------------------------------------------------------------- keys never in output


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "whileai", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_no_key_in_any_output_of_a_real_server_process(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "WHILEAI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("WHILEAI_STORE_URL", None)
    out_path = tmp_path / "server.out"
    replies: list[str] = []
    with platform_process(home, out_path) as (_, base):
        key_a = (home / "local_key").read_text().strip()

        added = _cli(env, "accounts", "add", "bob")
        assert added.returncode == 0, added.stderr
        key_b = added.stdout.strip()
        assert added.stdout == key_b + "\n" and key_b.startswith("wai_"), "the key alone on stdout"
        assert key_b not in added.stderr
        listed = _cli(env, "accounts", "list")
        assert "bob" in listed.stdout and "(local)" in listed.stdout and "wai_" not in listed.stdout
        assert _cli(env, "accounts", "add", "bob").returncode == 1  # one bob

        bad = "wai_" + "Z" * 43
        with httpx.Client(base_url=base, timeout=30) as c:
            for method, path, key, body in [
                ("GET", f"/login?key={key_a}&next=/runs", None, None),
                ("GET", f"/login?key={bad}", None, None),
                ("GET", f"{API}/runs?token={key_a}", key_b, None),
                ("GET", f"{API}/runs", bad, None),
                ("GET", f"{API}/runs", key_b, None),
                ("GET", f"{API}/runs/run_0123456789abcdef", key_b, None),
                ("POST", f"{API}/models", key_b, {"name": "m", "baseModel": "/etc"}),
                ("POST", "/v1/chat/completions", key_b, {"model": "nope", "messages": []}),
                ("GET", "/runs", None, None),
            ]:
                headers = {"Authorization": f"Bearer {key}"} if key else {}
                r = c.request(method, path, headers=headers, json=body, follow_redirects=False)
                replies.append(r.text)
                replies.extend(v for k, v in r.headers.items() if k.lower() != "set-cookie")
            for key in (key_b, bad):  # the page sign-in form, good key and bad
                r = c.post("/signin", data={"key": key, "next": "/runs"}, follow_redirects=False)
                assert r.status_code in (303, 401), r.text[:200]
                replies.append(r.text)
                replies.extend(r.headers.values())

        rotated = _cli(env, "accounts", "rotate", "bob")
        assert rotated.returncode == 0, rotated.stderr
        key_b2 = rotated.stdout.strip()
        assert key_b2 != key_b and rotated.stdout == key_b2 + "\n"
        assert httpx.get(f"{base}{API}/me", headers={"Authorization": f"Bearer {key_b}"}).status_code == 401
        assert httpx.get(f"{base}{API}/me", headers={"Authorization": f"Bearer {key_b2}"}).json()["name"] == "bob"
    output = out_path.read_text()
    assert output.count(key_a) == 1, "the local key appears once, in the first-start message, and never after"
    first_start = output.index(key_a)
    for key in (key_a, key_b, key_b2, bad):
        assert key not in output[first_start + len(key_a):]
        assert key[: defaults.API_KEY_PREFIX_CHARS + 4] not in output[first_start + len(key_a):]
        for reply in replies:
            assert key not in reply and key[4:16] not in reply, reply[:300]
    assert "/login?key=" not in output and "GET /" not in output, "no access log"


# --------------------------------------------------------------------------- accounts and the local key


def test_a_data_root_without_a_live_key_makes_its_own_and_revokes_none(home, capsys):
    store = Store()
    account, first = ensure_local_account(store)
    assert ensure_local_account(store) == (account, first)
    assert "made a key" not in capsys.readouterr().err, "the first key is said by the platform's first start"
    local_key_path().unlink()
    _, second = ensure_local_account(store)
    assert second != first and store.account_for_key(first) == account, "only `accounts rotate` revokes a key"
    err = capsys.readouterr().err
    assert "made a key of the store's local account for this data root" in err and str(local_key_path()) in err
    assert second not in err and first not in err, "the key itself is never printed here"
    local_key_path().write_text("wai_not-this-one\n")
    _, third = ensure_local_account(store)
    assert store.account_for_key(second) == account == store.account_for_key(third)
    assert [k["name"] for k in store.list_keys(account)] == [local_key_name()] * 3
    assert local_key_name().startswith("local: ") and str(home) in local_key_name()
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_accounts_commands_work_on_a_store_url_and_rotating_local_rewrites_its_file(backend, home, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'team.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    env = {**os.environ, "WHILEAI_HOME": str(home)}
    added = _cli(env, "accounts", "--store-url", url, "add", "carol")
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip()
    store = Store(url)
    try:
        carol = store.account_for_key(key)
        assert carol is not None and store.get_account(carol)["name"] == "carol"
        missing = _cli(env, "accounts", "--store-url", url, "rotate", "dave")
        assert missing.returncode == 1 and "no account named 'dave'" in missing.stderr and "carol" in missing.stderr
        rotated = _cli(env, "accounts", "--store-url", url, "rotate", carol).stdout.strip()  # by id too
        assert store.account_for_key(key) is None and store.account_for_key(rotated) == carol
        if backend == "sqlite":  # the shared PostgreSQL database of the session keeps no local account
            local, local_key = ensure_local_account(store)
            new_local = _cli(env, "accounts", "--store-url", url, "rotate", "local").stdout.strip()
            assert local_key_path().read_text().strip() == new_local, "the embedded SDK's file follows the rotation"
            assert store.account_for_key(local_key) is None and store.account_for_key(new_local) == local
            rows = {a["name"]: a for a in store.list_accounts()}
            assert rows["carol"]["keys"] == 1 and rows["local"]["keys"] == 1 and rows["local"]["local"]
    finally:
        store.close()


def test_the_accounts_command_is_listed():
    out = subprocess.run([sys.executable, "-m", "whileai", "--help"], capture_output=True, text=True, timeout=60)
    assert "accounts" in out.stdout
