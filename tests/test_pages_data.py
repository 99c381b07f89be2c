"""What the run pages compute without a browser: downsampling, the series cache, the runs-list SQL, sessions."""

from __future__ import annotations


import numpy as np
import pytest

from whileai.platform.store import sessions
from whileai.platform import defaults as platform_defaults
from whileai.platform import defaults
from whileai.platform.pages import _list, _series, _views
from _stores import postgres_store, sqlite_store

from whileai.platform.store import InvalidError


@pytest.fixture
def store(tmp_path):
    yield from sqlite_store(tmp_path)


# --------------------------------------------------------------------------- downsampling


def test_downsampling_keeps_each_buckets_min_and_max_so_a_spike_survives():
    x = np.arange(100_000, dtype=float)
    y = np.sin(x / 1000)
    y[54_321] = 99.0
    y[77_777] = -99.0
    dx, dy = _series.downsample(x, y, 1000)
    assert len(dx) <= 2000 and np.all(np.diff(dx) > 0)  # at most two points a bucket, in step order
    assert 99.0 in dy and -99.0 in dy and dx[list(dy).index(99.0)] == 54_321
    small_x, small_y = _series.downsample(x[:2000], y[:2000], 1000)
    assert len(small_x) == 2000  # CHART_MAX_POINTS or fewer: sent in full


def test_chart_series_sends_full_resolution_for_a_zoomed_range_and_the_store_keeps_every_point(store):
    acct, _ = store.create_account()
    run = store.create_run(acct)
    store.add_points(acct, run["id"], "b", [{"step": s, "metrics": {"loss": 1.0 / (s + 1), "lr": 0.1}}
                                            for s in range(10_000)])
    cols = _series.columns(store, run["id"])
    whole = _series.chart_series(cols, ["loss"])["loss"]
    assert whole["points"] == 10_000 and whole["downsampled"] and len(whole["x"]) <= defaults.CHART_MAX_POINTS
    zoom = _series.chart_series(cols, ["loss"], start=2000, end=2999)["loss"]
    assert zoom["x"] == list(range(2000, 3000)) and not zoom["downsampled"]
    assert len(store.get_run(acct, run["id"])["series"]) == 10_000


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_series_cache_reads_only_new_rows_and_live_points_are_those_past_the_step(store, backend):
    store = store if backend == "sqlite" else postgres_store()
    acct, _ = store.create_account()
    run = store.create_run(acct)
    store.add_points(acct, run["id"], "a", [{"step": s, "metrics": {"loss": float(s)}} for s in range(5)])
    first = _series.columns(store, run["id"])
    store.add_points(acct, run["id"], "b", [{"step": s, "metrics": {"loss": float(s), "kl": 0.1}} for s in range(5, 8)])
    second = _series.columns(store, run["id"])
    assert first.count == 5 and second.count == 8 and second.max_pk > first.max_pk
    assert second.xy("kl")[0].tolist() == [5.0, 6.0, 7.0]  # a metric that appears later starts where it was logged
    live = _series.points_after(second, 5)
    assert live["loss"]["x"] == [6, 7] and live["kl"]["x"] == [6, 7]
    store.add_points(acct, run["id"], "c", [{"metrics": {"loss": 1.0}}])
    assert _series.unstepped(_series.columns(store, run["id"])) == 1  # kept, counted, not drawn on a step axis


# --------------------------------------------------------------------------- reading records


def test_charts_put_loss_first_then_lr_grad_norm_rewards_kl_and_lengths():
    names = ["zeta", "kl", "eval_loss", "loss", "reward", "rewards/judge/mean", "grad_norm", "learning_rate",
             "completions/mean_length", "monitor/proxy", "monitor/gold", "epoch"]
    groups = _views.chart_groups(names)
    assert [g["id"] for g in groups] == ["loss", "lr", "grad_norm", "reward", "kl", "lengths", "m:epoch", "m:zeta"]
    assert groups[0]["metrics"] == ["loss", "eval_loss"]  # train and eval loss on one chart


def test_a_comparison_lists_the_keys_that_differ_first():
    runs = [{"id": "a", "config": {"spec": {"method": "grpo", "beta": 0.01, "seed": 0}}},
            {"id": "b", "config": {"spec": {"method": "grpo", "beta": 0.1, "seed": 0, "extra": 1}}}]
    rows = _views.compare_config(runs)
    assert [r["key"] for r in rows] == ["beta", "extra", "method", "seed"]
    assert [r["differs"] for r in rows] == [True, True, False, False]
    assert rows[1]["present"] == [False, True]


def test_sweep_knobs_come_from_the_sweep_the_overrides_or_the_differing_spec_keys():
    named = [{"config": {"sweep": {"id": "s", "knobs": ["beta"]}}}]
    assert _views.sweep_knobs(named) == ["beta"]
    typed = [{"config": {"spec": {"beta": b, "seed": s}, "overrides": [f"beta={b}", f"seed={s}", "steps=5"]}}
             for b in (0.01, 0.1) for s in (0, 1)]
    assert _views.sweep_knobs(typed) == ["beta", "seed"]
    bare = [{"config": {"beta": b, "command": f"run {b}", "lr": 1}} for b in (1, 2)]
    assert _views.sweep_knobs(bare) == ["beta"]  # how a run was made (its command) is not a knob


def test_reproduce_commands_follow_what_the_run_recorded():
    runner = {"id": "run_1", "kind": "hosted", "config": {"spec": {"beta": 0.04}, "recipe": "grpo_tooluse",
                                                          "overrides": ["beta=0.04"], "command": "python -m whileai run recipe=grpo_tooluse beta=0.04"}}
    assert [c["text"] for c in _views.reproduce_commands(runner)] == [
        "python -m whileai run recipe=grpo_tooluse beta=0.04", "python -m whileai reproduce run_1"]
    hosted = {"id": "run_2", "kind": "hosted", "dataset": "ds_1", "config": {"method": "sft", "epochs": 2, "x": None}}
    (call,) = _views.reproduce_commands(hosted)
    assert 'wai.train("ds_1", method="sft", epochs=2, wait=True)' in call["text"]


# --------------------------------------------------------------------------- the runs list in SQL


def _seed_list(store):
    acct, _ = store.create_account()
    other, _ = store.create_account()
    made = []
    for i in range(7):
        cfg = {"spec": {"method": "grpo" if i % 2 else "sft"}, "recipe": f"r{i % 3}", "sweep": {"id": "sw"} if i < 3 else None}
        made.append(store.create_run(acct, name=f"run {i}", dataset=f"ds{i % 2}", config=cfg,
                                     status="failed" if i == 6 else "done")["id"])
    store.create_run(acct, name="plain", config={"method": "dpo", "sweep_id": "sw2"})
    store.create_run(other, name="not mine", config={"method": "grpo"})
    return acct, made


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_runs_list_filters_and_pages_in_sql(store, backend):
    s = store if backend == "sqlite" else postgres_store()
    acct, made = _seed_list(s)
    page = _list.list_page(s, acct, {}, 1, 3)
    assert page["total"] == 8 and page["pages"] == 3 and [r["name"] for r in page["records"]] == ["plain", "run 6", "run 5"]
    count = lambda **f: _list.list_page(s, acct, f, 1, 50)["total"]  # noqa: E731
    assert count(method="grpo") == 3 and count(method="dpo") == 1 and count(status="failed") == 1
    assert count(recipe="r1") == 2 and count(dataset="ds0") == 4 and count(sweep="sw") == 3 and count(sweep="sw2") == 1
    assert count(method="grpo", dataset="ds1") == 3
    assert page["choices"]["method"] == ["dpo", "grpo", "sft"] and page["choices"]["sweep"] == ["sw", "sw2"]
    assert [r["id"] for r in _list.sweep_records(s, acct, "sw")] == made[:3]
    with pytest.raises(InvalidError, match="running, done, failed, stopped"):
        _list.list_page(s, acct, {"status": "finished"}, 1, 10)
    if backend == "postgres":
        s.close()


# --------------------------------------------------------------------------- sessions and sign-in links


def test_sessions_are_stored_hashed_expire_and_end(store, monkeypatch):
    acct, _ = store.create_account()
    token = sessions.create_session(store, acct)
    assert sessions.account_for_session(store, token) == acct
    with store.engine.connect() as conn:
        assert token not in str(conn.exec_driver_sql("SELECT * FROM page_tokens").all())
    later = sessions.time.time() + platform_defaults.SESSION_TTL_S + 1
    monkeypatch.setattr(sessions.time, "time", lambda: later)
    assert sessions.account_for_session(store, token) is None  # expired
    monkeypatch.undo()
    assert sessions.end_session(store, token) in (True, False)
    again = sessions.create_session(store, acct)
    assert sessions.end_session(store, again) and sessions.account_for_session(store, again) is None
    kept = sessions.create_session(store, acct)
    assert sessions.revoke_sessions(store, acct) >= 1 and sessions.account_for_session(store, kept) is None
    assert sessions.account_for_session(store, "x" * 10_000) is None


def test_revoking_a_key_ends_every_session_of_its_account(store):
    acct, key = store.create_account()
    other_key = store.issue_api_key(acct)
    with_key = sessions.create_session(store, acct, key)
    by_link = sessions.create_session(store, acct)
    assert sessions.account_for_session(store, with_key) == acct
    assert store.revoke_api_key(acct, key)
    assert sessions.account_for_session(store, with_key) is None  # the key is gone, so is its session
    assert sessions.account_for_session(store, by_link) is None, "a one-time link's session ends with it too"
    assert sessions.account_for_session(store, sessions.create_session(store, acct, other_key)) == acct


def test_a_signin_link_works_once_and_expires(store, monkeypatch):
    acct, _ = store.create_account()
    link = sessions.create_signin_link(store, acct)
    assert sessions.account_for_session(store, link) is None  # a link is not a session
    assert sessions.redeem_signin_link(store, link) == acct
    assert sessions.redeem_signin_link(store, link) is None  # spent
    late = sessions.create_signin_link(store, acct)
    later = sessions.time.time() + platform_defaults.SIGNIN_LINK_TTL_S + 1
    monkeypatch.setattr(sessions.time, "time", lambda: later)
    assert sessions.redeem_signin_link(store, late) is None


# --------------------------------------------------------------------------- python -m whileai open


def test_open_prints_a_one_time_link_to_the_run_on_a_running_server(home, capsys):
    import httpx

    from whileai.platform.server import open_main, serve_in_thread
    from whileai.platform.store import ensure_local_account

    handle = serve_in_thread()  # the store under this test's data root, as `python -m whileai platform` uses
    try:
        account, key = ensure_local_account(handle.store)
        run = handle.store.create_run(account, name="mine")
        assert open_main(["--no-browser", "--port", str(handle.port), run["id"]]) == 0
        said = capsys.readouterr()
        assert f"A platform already answers at {handle.base_url}: reusing it" in said.err, "open says it reuses it"
        link = said.out.split()[-1]
        assert link.startswith(f"{handle.base_url}/signin/once?token=") and key not in link
        with httpx.Client(follow_redirects=True) as browser:
            page = browser.get(link)
            assert page.status_code == 200 and page.url.path == f"/runs/{run['id']}"
            assert browser.get(f"{handle.base_url}/page-data/runs/{run['id']}").json()["run"]["name"] == "mine"
        assert open_main(["--no-browser", "--port", str(handle.port), "run_0000000000000000"]) == 2
        assert "no run 'run_0000000000000000'" in capsys.readouterr().err
    finally:
        handle.stop()


def test_static_files_are_a_fixed_set_served_from_the_package(store):
    from fastapi.testclient import TestClient

    from whileai.platform.api import create_app

    with TestClient(create_app(store)) as client:
        js = client.get("/static/vendor/uPlot.iife.min.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert js.headers["x-content-type-options"] == "nosniff" and len(js.content) > 40_000
        for name in ("../routes.py", "..%2Froutes.py", "vendor/VENDORED.md", "/etc/passwd"):
            assert client.get(f"/static/{name}").status_code == 404, name
        assert client.get("/page-data/runs").status_code == 401  # no session, no bearer: no data
        assert client.get("/runs", follow_redirects=False).headers["location"] == "/signin?next=%2Fruns"


def test_the_pages_show_n_the_interval_the_paired_p_and_the_expect_verdict():
    from whileai.core.stats import holdout_result

    stats = holdout_result([0] * 40, [1] * 39 + [0])
    expect = {"passed": False, "recipe": "sft_tooluse", "lines": [
        {"key": "status", "want": "done", "seen": "status done", "passed": True, "where": "recipes/sft_tooluse.yaml:22"},
        {"key": "holdout_after_min", "want": 0.99, "seen": "held-out after 0.975", "passed": False,
         "where": "command line"}]}
    record = {"id": "run_1", "status": "done", "config": {}, "created_at": 1.0, "finished_at": 2.0, "summary": {
        "holdout_before": 0.0, "holdout_after": 0.975, "expect": expect,
        "training": {"metric": "pass_rate", "before": 0.0, "after": 0.975, "stats": stats, "holdout_prompts": 40}}}
    head = _views.headline(record["summary"])[0]
    assert head["n"] == 40 and head["certainty"] == "39/40; 95% CI 0.87-1.00; paired p < 0.001"
    facts = _views.facts(record)
    assert facts["status_text"] == "done · expect failed"
    assert facts["expect"]["failed"] == 1 and facts["expect"]["lines"][1]["where"] == "command line"
    row = _views.list_row(record)
    assert row["expect"] == {"passed": False, "failed": 1} and row["holdout"]["n"] == 40
    assert _views.facts({**record, "summary": {}})["expect"] is None
    assert head["groups"] == []  # rows without a category: no per-category lines


def test_the_page_shows_each_expect_line_as_the_runner_wrote_it():
    """The page's ``ExpectLineView`` is the stored JSON view of the runner's ``ExpectLine``: the same keys in the same
    order, and each line of a verdict shown as the runner wrote it."""
    from whileai.platform.pages._shapes import ExpectLineView
    from whileai.runner.expect import ExpectLine, verdict

    assert list(ExpectLineView.__annotations__) == list(ExpectLine.__annotations__)
    checked = verdict({"status": "done", "holdout_after_min": 0.9}, {"status": "done", "after": 0.5},
                      {"status": "recipes/sft_tooluse.yaml:22"})
    shown = _views.expect_view(checked)
    assert shown is not None and shown["failed"] == 1
    assert [list(line.items()) for line in shown["lines"]] == [list(line.items()) for line in checked["lines"]]


def test_the_run_page_shows_the_held_out_figure_per_category():
    from whileai.core.stats import group_results, holdout_result

    before, after = [0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 0]
    groups = ["multiple"] * 3 + ["irrelevance"] * 3
    training = {"metric": "pass_rate", "before": 0.5, "after": 5 / 6, "stats": holdout_result(before, after),
                "by_group": group_results(before, after, groups, "category")}
    head = _views.headline({"training": training})[0]
    assert head["groups"] == [
        "per category (2):",
        "  irrelevance  n=3    1.000 -> 0.667, no significant change (2/3; 95% CI 0.21-0.94; paired p = 1.000)",
        "  multiple     n=3    0.000 -> 1.000, no significant change (3/3; 95% CI 0.44-1.00; paired p = 0.250)"]
