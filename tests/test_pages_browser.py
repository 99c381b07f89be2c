"""The run pages in a real browser: Debian's Chromium driven by Playwright, a real uvicorn server on loopback.

One server and one browser serve the whole module (each test opens its own
browser context, so cookies never leak between tests). Seeded through the HTTP
API as a client would: a GRPO run with 5,000 points per series, a loss spike,
a HackMonitor alarm, a delta report and a config from the runner; two more
runs of its sweep; a failed SFT run; a run whose every logged string is a
script payload; and a second account's run. Every request URL the browser
makes and every console message are recorded: no API key may appear in a URL
and no page may break its Content-Security-Policy or throw. Skipped where no
Chromium is installed (.ci/run installs Debian's ``chromium`` and requires it).
"""

from __future__ import annotations

import hashlib

import httpx
import pytest

from _chromium import needs_chromium, require_chromium
from whileai.core.stats import group_lines, group_results
from whileai.platform.server import serve_in_thread, signin_link

pytestmark = needs_chromium
API = "/api/v1"
EVIL = "<img src=x onerror=\"window.__pwned=1;document.title='pwned'\"><script>window.__pwned=2</script>"
SPIKE_STEP, SPIKE = 3333, 50.0
N = 5000  # points per series on the GRPO run: more than CHART_MAX_POINTS, so it is downsampled

#: the held-out result per category (a BFCL mix) on the seeded GRPO run: 0.25 -> 0.5 over four prompts
BY_GROUP = group_results([1, 0, 0, 0], [1, 1, 0, 0], ["multiple", "multiple", "parallel", "parallel"], "category")

visited: list[str] = []  # every request URL any page made
console: list[str] = []  # every console error and uncaught page error


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    require_chromium()
    handle = serve_in_thread(store_url=f"sqlite:///{tmp_path_factory.mktemp('pages') / 'platform.db'}")
    yield handle
    handle.stop()


def _api(handle, key):
    return httpx.Client(base_url=handle.base_url + API, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _post_points(api, run_id, points, size=5000):
    for i in range(0, len(points), size):
        r = api.post(f"/runs/{run_id}/points", json={"batch_id": f"b{i}", "points": points[i:i + size]})
        assert r.status_code == 200, r.text


def _grpo_points(n):
    pts = []
    for s in range(n):
        m = {"loss": 2.0 / (1 + s / 500) + (s % 7) * 1e-3, "learning_rate": 1e-5, "grad_norm": 1.0 + (s % 5) / 10,
             "reward": 0.2 + s / n / 2, "kl": s / n / 10}
        if s == SPIKE_STEP:
            m["loss"] = SPIKE
        if s % 100 == 0:
            m["eval_loss"] = 2.1 / (1 + s / 500)
        if s % 500 == 0:
            m["monitor/proxy"] = 0.3 + s / n / 2
            m["monitor/gold"] = 0.3 + min(s, 2500) / n / 4
        pts.append({"step": s, "metrics": m, "ts": 1_790_000_000.0 + s})
    return pts


def _delta(before, after):
    def side(b, a):
        return {"before": {"value": b, "ci": [b - .1, b + .1], "rows": 80, "tasks": 20},
                "after": {"value": a, "ci": [a - .1, a + .1], "rows": 80, "tasks": 20},
                "delta": {"value": a - b, "ci": [a - b - .1, a - b + .1], "upper_one_sided": a - b + .08}}
    return {"verdict": "improved", "reason": "target pass rate +25.0 pts, 95% CI +15.0 pts to +35.0 pts is above zero",
            "target": side(before, after), "proxy": None, "paired": True,
            "by": {"key": "difficulty", "source": "row", "groups": [
                {"group": "easy", "target": side(.4, .7), "verdict": "improved", "reason": "above zero"},
                {"group": "hard", "target": side(.1, .3), "verdict": "inconclusive", "reason": "includes zero"}]}}


ALARM_TEXT = "the proxy-gold gap grew by +0.212 from the baseline window: the proxy pays for something gold does not"


def _config(beta, **extra):
    spec = {"method": "grpo", "beta": beta, "learning_rate": 1e-5, "steps": N, "seed": 0, "generations": 8}
    return {"spec": spec, "recipe": "grpo_tooluse", "overrides": [f"beta={beta}", "seed=0"],
            "command": f"python -m whileai run recipe=grpo_tooluse beta={beta}", "sweep": {"id": "sw_test"}, **extra}


#: a paired held-out result as a job keeps it (40 prompts: 10 passed before, 16 after)
COMPARED_STATS = __import__("whileai.core.stats", fromlist=["holdout_result"]).holdout_result(
    [1] * 10 + [0] * 30, [1] * 16 + [0] * 24)


@pytest.fixture(scope="module")
def seeded(platform):
    alice_id, alice = platform.store.create_account("alice")
    _, bob = platform.store.create_account("bob")
    ids = {"alice_id": alice_id, "alice": alice, "bob": bob}
    with _api(platform, alice) as api:
        g = api.post("/runs", json={"name": "grpo beta 0.04", "dataset": "ds_train", "config": _config(0.04),
                                    "kind": "hosted", "total_steps": N}).json()["id"]
        _post_points(api, g, _grpo_points(N))
        api.patch(f"/runs/{g}", json={"status": "done", "summary": {
            "holdout_before": 0.25, "holdout_after": 0.5, "delta": _delta(0.25, 0.5),
            "monitor": {"evaluations": 10, "alarms": [{"kind": "divergence", "step": 2500, "message": ALARM_TEXT}]},
            "selection": {"summary": "grpo: uses 80 of 100 rows (20 of 25 tasks)", "dropped": [
                {"class": "unanimous-pass", "rows": 20, "tasks": 5, "reason": "no advantage to learn from"}]},
            "training": {"method": "grpo", "metric": "pass_rate", "gpu": "A10G", "seconds": 3600,
                         "by_group": BY_GROUP}}})
        ids["grpo"] = g
        for name, beta, after in (("grpo beta 0.01", 0.01, 0.3), ("grpo beta 0.1", 0.1, 0.4)):
            r = api.post("/runs", json={"name": name, "dataset": "ds_train", "config": _config(beta),
                                        "kind": "hosted"}).json()["id"]
            _post_points(api, r, [{"step": s, "metrics": {"loss": 1.5 - s / 100}} for s in range(100)])
            summary = {"holdout_before": 0.25, "holdout_after": after}
            if beta == 0.1:  # a run with the job's paired result and its expect verdict, for the compare page
                summary["training"] = {"method": "grpo", "metric": "pass_rate", "stats": COMPARED_STATS}
                summary["expect"] = {"passed": False, "recipe": "grpo_tooluse", "lines": [
                    {"key": "holdout_gain_significant", "want": 0.05, "seen": "p = 0.03", "passed": False,
                     "where": "recipes/grpo_tooluse.yaml:40"}]}
            api.patch(f"/runs/{r}", json={"status": "done", "summary": summary})
            ids[name] = r
        f = api.post("/runs", json={"name": "sft that failed", "dataset": "ds_other", "kind": "hosted",
                                    "config": {"spec": {"method": "sft", "epochs": 1}, "recipe": "sft_tooluse"}}).json()
        api.patch(f"/runs/{f['id']}", json={"status": "failed", "error": "RuntimeError: out of memory at step 7"})
        ids["failed"] = f["id"]
        x = api.post("/runs", json={"name": f"evil {EVIL}", "dataset": "ds_evil", "kind": "hosted",
                                    "config": {"method": "sft", "note": EVIL, EVIL: 1}}).json()["id"]
        _post_points(api, x, [{"step": s, "metrics": {"loss": 1.0 / (s + 1), EVIL: float(s)}} for s in range(20)])
        api.patch(f"/runs/{x}", json={"status": "failed", "error": f"boom {EVIL}", "summary": {
            "comment": EVIL, "holdout_before": 0.1, "holdout_after": 0.2,
            "monitor": {"alarms": [{"kind": "feature", "step": 5, "message": f"pays for {EVIL}"}]}}})
        ids["evil"] = x
    with _api(platform, bob) as api:
        ids["bobs"] = api.post("/runs", json={"name": "bob's only run", "config": {"sweep": "sw_bob"}}).json()["id"]
    return ids


@pytest.fixture
def context(browser):
    contexts = []

    def make(**options):
        ctx = browser.new_context(viewport=options.pop("viewport", {"width": 1280, "height": 900}), **options)
        ctx.set_default_timeout(15_000)
        ctx.on("request", lambda request: visited.append(request.url))
        ctx.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
        ctx.on("page", lambda p: p.on("pageerror", lambda e: console.append(f"page error: {e}")))
        contexts.append(ctx)
        return ctx

    yield make
    for ctx in contexts:
        ctx.close()


def _sign_in(make, platform, key, **options):
    ctx = make(**options)
    page = ctx.new_page()
    page.goto(platform.base_url + "/signin")
    page.fill("#key", key)
    page.click("button[type=submit]")
    page.wait_for_url("**/runs")
    return ctx, page


def _open(page, platform, path):
    response = page.goto(platform.base_url + path)
    page.wait_for_selector("main h1")
    return response


# --------------------------------------------------------------------------- signing in


def test_sign_in_posts_the_key_once_and_the_cookie_holds_a_hashed_revocable_session(platform, seeded, context):
    from playwright.sync_api import expect

    ctx = context()
    page = ctx.new_page()
    page.goto(f"{platform.base_url}/runs/{seeded['grpo']}")
    assert "/signin?next=" in page.url  # not signed in: the form, and back to the run after
    page.fill("#key", "wai_not_a_key")
    page.click("button[type=submit]")
    expect(page.locator("#message")).to_contain_text("not valid")
    page.fill("#key", seeded["alice"])
    page.click("button[type=submit]")
    page.wait_for_url(f"**/runs/{seeded['grpo']}")
    expect(page.locator("#run-name")).to_have_text("grpo beta 0.04")

    cookies = {c["name"]: c for c in ctx.cookies()}
    session = cookies["whileai_session"]
    assert session["httpOnly"] and session["sameSite"] == "Lax"
    assert seeded["alice"] not in str(ctx.cookies())  # the cookie is a session token, not the key
    assert session["expires"] > 0  # it expires (SESSION_TTL_S)
    with platform.store.engine.connect() as conn:
        stored = [r[0] for r in conn.exec_driver_sql("SELECT token_hash FROM page_tokens")]
    assert hashlib.sha256(session["value"].encode()).hexdigest() in stored and session["value"] not in stored

    page.click("header form.signout button")
    expect(page.locator("#message")).to_have_text("Signed out.")
    assert "whileai_session" not in {c["name"] for c in ctx.cookies()}
    ctx.add_cookies([{"name": "whileai_session", "value": session["value"], "url": platform.base_url}])
    page.goto(f"{platform.base_url}/runs")
    assert "/signin" in page.url  # the old token was ended on the server, not only forgotten by the browser
    assert httpx.get(f"{platform.base_url}/page-data/runs", cookies={"whileai_session": session["value"]}).status_code == 401


def test_a_one_time_sign_in_link_opens_the_page_once(platform, seeded, context):
    from playwright.sync_api import expect

    link = signin_link(platform.store, seeded["alice_id"], platform.base_url, f"/runs/{seeded['grpo']}")
    assert seeded["alice"] not in link
    page = context().new_page()
    page.goto(link)
    page.wait_for_url(f"**/runs/{seeded['grpo']}")
    expect(page.locator("#run-name")).to_have_text("grpo beta 0.04")
    again = context().new_page()
    again.goto(link)
    expect(again.locator("#message")).to_contain_text("already used")


# --------------------------------------------------------------------------- the runs list


def test_the_runs_list_shows_the_seeded_runs_filters_them_and_ticks_runs_to_compare(platform, seeded, context):
    from playwright.sync_api import expect

    _, page = _sign_in(context, platform, seeded["alice"])
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(5)
    assert rows.first.get_attribute("data-run") == seeded["evil"]  # newest first
    expect(page.locator(f'#runs tr[data-run="{seeded["grpo"]}"]')).to_contain_text("0.250 → 0.500")
    expect(page.locator(f'#runs tr[data-run="{seeded["grpo"]}"]')).to_contain_text("$1.10")
    assert seeded["bobs"] not in page.content()
    for name, value, count in (("status", "failed", 2), ("method", "grpo", 3), ("recipe", "sft_tooluse", 1),
                               ("dataset", "ds_other", 1), ("sweep", "sw_test", 3)):
        page.select_option(f'select[name="{name}"]', value)
        expect(rows).to_have_count(count)
        assert f"{name}={value}" in page.url  # the filter is in the address
        page.click("text=Clear filters")
        expect(rows).to_have_count(5)
    page.select_option('select[name="sweep"]', "sw_test")
    expect(rows).to_have_count(3)
    assert page.locator("#compare").get_attribute("aria-disabled") == "true"
    page.check(f'tr[data-run="{seeded["grpo"]}"] input[type=checkbox]')
    page.check(f'tr[data-run="{seeded["grpo beta 0.1"]}"] input[type=checkbox]')
    page.click("#compare")
    page.wait_for_url("**/compare?runs=*")
    expect(page.locator("main h1")).to_have_text("Comparing 2 runs")
    # the compare page says how sure each result is (n, interval, paired p) and the expect verdict
    from whileai.core.stats import certainty_text

    compared = page.locator(f'#compare-runs tr[data-run="{seeded["grpo beta 0.1"]}"]')
    expect(compared.locator("td.certainty")).to_have_text(certainty_text(COMPARED_STATS))
    expect(compared).to_contain_text("expect failed")


def test_the_runs_list_is_paged_on_the_server(platform, seeded):
    with httpx.Client(base_url=platform.base_url, headers={"Authorization": f"Bearer {seeded['alice']}"}) as c:
        first = c.get("/page-data/runs", params={"per_page": 2}).json()
        second = c.get("/page-data/runs", params={"per_page": 2, "page": 2}).json()
        bad = c.get("/page-data/runs", params={"status": "finished"})
    assert first["total"] == 5 and first["pages"] == 3 and len(first["runs"]) == 2
    assert not {r["id"] for r in first["runs"]} & {r["id"] for r in second["runs"]}
    assert bad.status_code == 422 and "running, done, failed, stopped" in bad.json()["error"]["message"]


# --------------------------------------------------------------------------- a run


def test_the_run_page_shows_headline_delta_charts_alarms_and_config_in_order(platform, seeded, context):
    from playwright.sync_api import expect

    _, page = _sign_in(context, platform, seeded["alice"])
    _open(page, platform, f"/runs/{seeded['grpo']}")
    expect(page.locator("[data-chart=loss]")).to_have_attribute("data-downsampled", "true")
    headings = page.locator("main section > h2").all_inner_texts()
    expected = ["Did it work?", "Delta verdict", "Charts", "HackMonitor: proxy against gold",
                "Which rows it trained on", "Cost", "Config"]
    assert [h for h in headings if h in expected] == expected
    # one number format everywhere: the page prints the terminal's digits (whileai.core.stats.rate_text)
    from whileai.core.stats import change_text

    assert page.locator(".headline .big").inner_text().replace("\n", "") == "0.250 → 0.500" == change_text(0.25, 0.5, "→")
    expect(page.locator(".headline")).to_contain_text("higher is better")
    # per category, the terminal's lines with their n and paired p
    assert page.locator(".headline .groups").inner_text() == "\n".join(group_lines(BY_GROUP))
    expect(page.locator("#progress")).to_contain_text(f"step {N - 1} of {N}")

    expect(page.locator("#delta-reason")).to_contain_text("above zero")
    expect(page.locator("#delta-table tbody tr")).to_have_count(3)
    expect(page.locator("#delta-table")).to_contain_text("difficulty = hard")

    charts = page.locator("[data-chart]").evaluate_all("els => els.map(e => e.dataset.chart)")
    assert charts[:5] == ["loss", "lr", "grad_norm", "reward", "kl"] and "monitor" in charts  # loss first
    loss = page.locator("[data-chart=loss]")
    drawn = [int(n) for n in loss.get_attribute("data-points").split(",")]
    assert 1000 < drawn[0] <= 2000 and drawn[1] == N // 100  # loss in 1,000 min/max buckets; eval_loss in full
    assert loss.evaluate("e => e.wai.lines.map(l => l.label)") == ["loss", "eval_loss"]
    assert loss.evaluate("e => Math.max(...e.wai.u.data[1].filter(v => v != null))") == SPIKE  # the spike survives
    page.check(".controls input[type=checkbox]")  # the log-scale toggle redraws every chart on a log axis
    assert loss.evaluate("e => e.wai.u.scales.y.distr") == 3
    page.uncheck(".controls input[type=checkbox]")
    page.locator(".controls input[type=range]").fill("0.9")  # smoothing: an exponential moving average
    assert loss.evaluate("e => e.wai.u.data[1][1] !== e.wai.lines[0].y[1]")
    page.locator(".controls input[type=range]").fill("0")
    loss.evaluate("e => e.wai.u.setScale('x', {min: 3000, max: 3400})")  # zoom in: full resolution for the range
    expect(loss).to_have_attribute("data-zoom", "full")
    assert loss.get_attribute("data-points").split(",")[0] == "401"

    monitor = page.locator("[data-chart=monitor]")
    expect(monitor).to_have_attribute("data-alarms", "1")
    assert monitor.evaluate("e => e.wai.lines.map(l => l.label)") == ["monitor/proxy", "monitor/gold"]
    expect(page.locator('li.alarm[data-step="2500"]')).to_contain_text(ALARM_TEXT)
    # the alarm is said where the result is read, with what it means and a link to its chart
    notice = page.locator("#alarm-notice")
    expect(notice).to_contain_text("The HackMonitor raised 1 alarm: the held-out gain above may not be the task learned")
    from whileai.core.alarms import alarm_meaning

    kind = page.locator('li.alarm[data-step="2500"]').get_attribute("data-kind")
    expect(notice.locator("li")).to_contain_text(alarm_meaning(kind))
    assert notice.locator("a").get_attribute("href") == "#monitor" and page.locator("section#monitor").count() == 1

    expect(page.locator("#cost")).to_have_text("about $1.10")
    expect(page.locator("#cost-basis")).to_contain_text("A10G")
    expect(page.locator("#config")).to_contain_text('"beta": 0.04')
    expect(page.locator("#overrides")).to_have_text("beta=0.04 seed=0")
    expect(page.locator(".copyable pre").first).to_have_text("python -m whileai run recipe=grpo_tooluse beta=0.04")
    expect(page.locator(".copyable pre").nth(1)).to_have_text(f"python -m whileai reproduce {seeded['grpo']}")

    _open(page, platform, f"/runs/{seeded['failed']}")
    expect(page.locator("#error pre")).to_have_text("RuntimeError: out of memory at step 7")
    expect(page.locator(".run-head")).to_contain_text("This run failed")


def test_a_running_runs_page_takes_new_points_and_stops_polling_when_it_ends(platform, seeded, context):
    from playwright.sync_api import expect

    with _api(platform, seeded["alice"]) as api:
        rid = api.post("/runs", json={"name": "live", "total_steps": 100}).json()["id"]
        _post_points(api, rid, [{"step": s, "metrics": {"loss": 1.0 / (s + 1)}} for s in range(10)])
        _, page = _sign_in(context, platform, seeded["alice"])
        _open(page, platform, f"/runs/{rid}")
        loss = page.locator("[data-chart=loss]")
        expect(loss).to_have_attribute("data-points", "10")
        assert page.locator("body").get_attribute("data-live") == "polling"
        api.post(f"/runs/{rid}/points", json={"batch_id": "more", "points": [
            {"step": s, "metrics": {"loss": 1.0 / (s + 1)}} for s in range(10, 15)]})
        expect(loss).to_have_attribute("data-points", "15", timeout=10_000)
        expect(page.locator("#progress")).to_contain_text("step 14 of 100")
        assert any(f"/page-data/runs/{rid}/live?after=9" in url for url in visited)  # only what is new was asked for
        api.patch(f"/runs/{rid}", json={"status": "done", "summary": {"holdout_before": 0.1, "holdout_after": 0.3}})
        expect(page.locator("body")).to_have_attribute("data-live", "stopped", timeout=10_000)
        expect(page.locator(".headline .big")).to_contain_text("0.3")
        polls = sum(f"/page-data/runs/{rid}/live" in url for url in visited)
        page.wait_for_timeout(2500)
        assert sum(f"/page-data/runs/{rid}/live" in url for url in visited) == polls  # it stopped asking


def test_an_alarm_above_a_held_out_loss_is_read_as_a_loss_beside_the_reward_against_the_exact_judge(platform, seeded,
                                                                                                     context):
    """The alarm notice's words follow the direction the held-out figure moved (a fall is not 'a gain'), and the run's
    reward is shown beside the exact judge with which rose more."""
    from playwright.sync_api import expect

    with _api(platform, seeded["alice"]) as api:
        rid = api.post("/runs", json={"name": "grpo that fell", "kind": "hosted", "config": {"method": "grpo"}}).json()["id"]
        api.patch(f"/runs/{rid}", json={"status": "done", "summary": {
            "holdout_before": 0.5, "holdout_after": 0.25,
            "training": {"method": "grpo", "metric": "pass_rate", "reward_vs_exact": {
                "reward_before": 0.667, "reward_after": 0.802, "exact_before": 0.5, "exact_after": 0.25, "prompts": 40,
                "reward_rose_more": 28, "task_rose_more": 7, "p": 0.0004}},
            "monitor": {"alarms": [{"kind": "feature", "step": 20, "message": "pays for 'city'"}]}}})
    _, page = _sign_in(context, platform, seeded["alice"])
    _open(page, platform, f"/runs/{rid}")
    notice = page.locator("#alarm-notice")
    expect(notice).to_contain_text("the held-out loss above may be the policy learning what the reward pays for")
    assert "gain" not in notice.inner_text()
    # the run's own reward beside the exact judge, as the terminal's closing lines say it
    expect(page.locator("#reward-vs-exact")).to_have_text(
        "The run's reward 0.667 → 0.802 on the same 40 held-out prompts; the exact judge 0.500 → 0.250. The reward "
        "rose more on 28 prompts, the task on 7 (sign test p < 0.001): the reward rose more than the task: it may be "
        "paying for something else.")


# --------------------------------------------------------------------------- compare and sweep


def test_a_comparison_overlays_the_runs_and_puts_the_differing_keys_first(platform, seeded, context):
    from playwright.sync_api import expect

    _, page = _sign_in(context, platform, seeded["alice"])
    ids = [seeded["grpo"], seeded["grpo beta 0.01"], seeded["grpo beta 0.1"]]
    _open(page, platform, "/compare?runs=" + ",".join(ids))
    expect(page.locator("#compare-runs tbody tr")).to_have_count(3)
    expect(page.locator(f'#compare-runs tr[data-run="{ids[0]}"]')).to_contain_text("0.250 → 0.500")
    rows = page.locator("#config-table tbody tr")
    assert rows.first.get_attribute("data-key") == "beta" and "differs" in rows.first.get_attribute("class")
    assert [r.get_attribute("class") for r in rows.all()][1:] == ["same"] * (rows.count() - 1)
    page.check("#differences-only")
    expect(page.locator("#config-table tbody tr:visible")).to_have_count(1)
    loss = page.locator('[data-chart="m:loss"]')
    assert loss.evaluate("e => e.wai.lines.length") == 3  # one line per run, one colour each
    assert len(set(loss.evaluate("e => e.wai.lines.map(l => l.color)"))) == 3


def test_the_sweep_page_has_the_swept_knob_as_a_sortable_column_and_a_chart(platform, seeded, context):
    from playwright.sync_api import expect

    _, page = _sign_in(context, platform, seeded["alice"])
    _open(page, platform, "/sweeps/sw_test")
    expect(page.locator("th.knob")).to_have_text(["beta"])
    rows = page.locator("#sweep-table tbody tr")
    expect(rows).to_have_count(3)
    page.click("#sweep-table th >> text=held-out after")
    assert rows.first.get_attribute("data-run") == seeded["grpo beta 0.01"]  # 0.3, the lowest, first
    page.click("#sweep-table th >> text=held-out after")
    assert rows.first.get_attribute("data-run") == seeded["grpo"]  # 0.5 first when sorted the other way
    expect(rows.first).to_contain_text("0.500")  # the terminal's digits (core.stats.rate_text), not "0.5"
    expect(rows.first).to_contain_text("0.250")
    chart = page.locator('[data-chart="knob:beta"]')
    expect(chart).to_have_attribute("data-points", "3")
    assert chart.evaluate("e => e.wai.lines[0].x") == [0.01, 0.04, 0.1]


# --------------------------------------------------------------------------- what users logged, and accounts


def test_a_reward_model_run_shows_its_held_out_pairs_by_failure_kind_as_text(platform, seeded, context):
    from playwright.sync_api import expect

    kinds = {"before": {"wrong_argument": {"right": 14, "pairs": 25}, EVIL: {"right": 1, "pairs": 2}},
             "after": {"wrong_argument": {"right": 22, "pairs": 25}, EVIL: {"right": 2, "pairs": 2},
                       "wrong_tool": {"right": 15, "pairs": 15}}}
    with _api(platform, seeded["alice"]) as api:
        run_id = api.post("/runs", json={"name": "rm near misses", "dataset": "ds_train", "kind": "hosted",
                                         "config": {"spec": {"method": "rm", "near_misses": 3}}}).json()["id"]
        api.patch(f"/runs/{run_id}", json={"status": "done", "summary": {
            "holdout_before": 0.565, "holdout_after": 0.957,
            "training": {"method": "rm", "metric": "pair_accuracy", "pairs_by_failure": kinds}}})
    _, page = _sign_in(context, platform, seeded["alice"])
    _open(page, platform, f"/runs/{run_id}")
    headings = page.locator("main section > h2").all_inner_texts()
    assert headings.index("Held-out pairs by failure kind") == headings.index("Did it work?") + 1
    table = page.locator("#failure-kinds tbody tr")
    expect(table).to_have_count(3)
    assert table.nth(0).locator("td").all_inner_texts() == ["wrong_argument", "14 of 25", "22 of 25"]
    assert table.nth(2).locator("td").all_inner_texts() == ["wrong_tool", "–", "15 of 15"]  # not measured before
    assert table.nth(1).locator("td").first.inner_text() == EVIL  # a logged kind is shown as text
    assert page.evaluate("window.__pwned") is None and page.locator("main img, main script").count() == 0
    # a run without the breakdown has no such section
    _open(page, platform, f"/runs/{seeded['grpo']}")
    expect(page.locator("#failure-kinds-section")).to_have_count(0)


def test_logged_markup_stays_text_on_every_page(platform, seeded, context):
    _, page = _sign_in(context, platform, seeded["alice"])
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for path, where in ((f"/runs/{seeded['evil']}", "run page"), ("/runs", "runs list"),
                        (f"/compare?runs={seeded['evil']},{seeded['grpo']}", "comparison")):
        _open(page, platform, path)
        page.wait_for_timeout(300)
        assert page.evaluate("window.__pwned") is None, where
        assert page.title() != "pwned", where  # the name is in the title, as text
        assert page.locator("main img, main script, main iframe").count() == 0, where
        assert "<img src=x onerror=" in page.locator("main").inner_text(), where  # shown, as text
    _open(page, platform, f"/runs/{seeded['evil']}")
    text = page.locator("main").inner_text()
    for shown in (f"evil {EVIL}", f"boom {EVIL}", f"pays for {EVIL}", EVIL):  # name, error, alarm, metric/note/config
        assert shown in text
    names = page.locator("[data-chart]").evaluate_all("els => els.map(e => e.dataset.chart)")
    assert f"m:{EVIL}" in names  # the metric's chart, named as logged
    assert dialogs == []


def test_one_accounts_session_cannot_open_anothers_run_or_its_data(platform, seeded, context):
    ctx, page = _sign_in(context, platform, seeded["bob"])
    grpo = seeded["grpo"]
    assert "grpo beta" not in page.locator("main").inner_text()  # bob's list has only bob's run
    for path in (f"/runs/{grpo}", f"/compare?runs={grpo},{seeded['bobs']}", "/sweeps/sw_test"):
        response = page.goto(platform.base_url + path)
        assert response.status == 404, path
        page.wait_for_selector("main h1")
        assert page.locator("main h1").inner_text() == "Not found in this account"
        assert "grpo beta" not in page.content()
    for path in (f"/page-data/runs/{grpo}", f"/page-data/runs/{grpo}?metrics=loss&start=0&end=10",
                 f"/page-data/runs/{grpo}/live?after=0", f"/page-data/compare?runs={grpo},{seeded['bobs']}",
                 "/page-data/sweeps/sw_test", "/page-data/runs?sweep=sw_test"):
        status, body = page.evaluate("async u => { const r = await fetch(u); return [r.status, await r.text()]; }", path)
        assert (status, "grpo beta" in body) in ((404, False), (200, False)), path
        assert status == 404 or '"runs":[]' in body, path
    headers = {"Authorization": f"Bearer {seeded['bob']}"}
    assert httpx.get(f"{platform.base_url}/page-data/runs/{grpo}", headers=headers).status_code == 404
    mine = {"Authorization": f"Bearer {seeded['alice']}"}  # scripts still open pages with the bearer header
    assert httpx.get(f"{platform.base_url}/runs/{grpo}", headers=mine).status_code == 200
    assert httpx.get(f"{platform.base_url}/page-data/runs/{grpo}", headers=mine).json()["run"]["id"] == grpo


# --------------------------------------------------------------------------- widths and colour schemes


@pytest.mark.parametrize("width,scheme", [(1280, "light"), (390, "dark")])
def test_the_run_page_fits_the_width_and_follows_the_colour_scheme(platform, seeded, context, tmp_path, width, scheme):
    from playwright.sync_api import expect

    _, page = _sign_in(context, platform, seeded["alice"], viewport={"width": width, "height": 800},
                       color_scheme=scheme)
    _open(page, platform, f"/runs/{seeded['grpo']}")
    expect(page.locator("[data-chart=loss]")).to_have_attribute("data-downsampled", "true")
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scrolling of the page
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert (background == "rgb(17, 20, 26)") == (scheme == "dark"), background
    shot = tmp_path / f"run-{width}-{scheme}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


# --------------------------------------------------------------------------- what every page above did


def test_no_key_in_any_url_and_no_policy_violation_or_script_error(seeded):
    assert len(visited) > 50  # the tests above ran and their requests were seen
    for key in (seeded["alice"], seeded["bob"]):
        assert not [url for url in visited if key in url]
    assert not [m for m in console if "Content Security Policy" in m or "page error" in m], console
