"""How the run pages lay a run out, in a real browser (Debian's Chromium, Playwright, a real uvicorn server).

Seeded through the HTTP API the way a job logs: a GRPO run with TRL's own series
names (two reward series that repeat each other, five ``clip_ratio/*``, the
completion lengths, the job's ``system/*`` samples, the trainer's end-of-run
totals), a worker log written where the local launcher writes it, an SFT run
and a GRPO stage started from it, and a sweep over seeds. Checked: the charts
under their headings with the rarely read ones collapsed, duplicates drawn once,
the totals as a table, y-axis labels inside their axis, the base model, LoRA rank
and batch size beside the result, the worker's log as text and tailing while
live, an added runs-list column kept in the address, the stage nested under its
start, the seed sweep on a categorical axis and the 390 px layout. The log
route's account scoping is checked over HTTP.
"""

from __future__ import annotations

import math

import httpx
import pytest

from _chromium import needs_chromium, page_opener, require_chromium
from whileai.platform.launcher.jobs import job_log
from whileai.platform.server import serve_in_thread, signin_link

pytestmark = needs_chromium
API = "/api/v1"
STEPS = 40
EVIL_LINE = "<script>window.__pwned=1</script> step 12 <b>not bold</b>"
TOTALS = {"train_runtime": 812.5, "train_samples_per_second": 3.94, "train_steps_per_second": 0.049,
          "total_flos": 1.234e12, "train_loss": 0.61}


def _grpo_points() -> list[dict]:
    pts = []
    for s in range(1, STEPS + 1):
        reward = 0.3 + 0.4 * (1 - math.exp(-s / 15))
        m = {"loss": 0.05 / s, "learning_rate": 1e-4 * (1 - s / (STEPS + 1)), "grad_norm": 0.5 + (s % 4) / 10,
             "reward": reward, "rewards/first_action/mean": reward, "reward_std": 0.2,
             "rewards/first_action/std": 0.2, "frac_reward_zero_std": 0.25, "kl": 1e-4 * s, "entropy": 1.1 - s / 100,
             "clip_ratio/low_mean": 0.0, "clip_ratio/low_min": 0.0, "clip_ratio/high_mean": 0.01,
             "clip_ratio/high_max": 0.02, "clip_ratio/region_mean": 0.01,
             "completions/mean_length": 30 + s, "completions/min_length": 10, "completions/max_length": 60 + s,
             "completions/clipped_ratio": 0.1, "num_tokens": 1500.0 * s, "epoch": s / STEPS}
        if s % 10 == 0:
            m["eval_loss"] = 0.07 / s
        pts.append({"step": s, "metrics": m})
        if s % 5 == 0:
            pts.append({"step": s, "metrics": {"system/cpu_percent": 95.0 + s % 3, "system/rss_mb": 900.0 + 30 * s}})
    pts.append({"step": STEPS, "metrics": TOTALS})
    return pts


def _runner_config(method: str, **extra) -> dict:
    spec = {"name": f"{method}_tooluse", "method": method, "base_model": None, "lora_rank": None, "batch_size": None,
            "steps": STEPS, "learning_rate": 1e-4}
    return {"method": method, "base_model": "whileai/tiny-tooluse-base", "lora_rank": 16, "batch_size": 8,
            "extra": {"runner": {"spec": spec, "recipe": "grpo_tooluse", "overrides": ["recipe=grpo_tooluse"],
                                 "command": "python -m whileai run recipe=grpo_tooluse steps=40 seed=0 "
                                            "a_long_override_that_reaches_the_edge_of_a_phone=1",
                                 **extra}}}


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    require_chromium()
    mp = pytest.MonkeyPatch()
    home = tmp_path_factory.mktemp("layout_home")
    mp.setenv("WHILEAI_HOME", str(home))  # the launcher's data root: where job_log(job id) is
    handle = serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}")
    yield handle
    handle.stop()
    mp.undo()


def _api(handle, key):
    return httpx.Client(base_url=handle.base_url + API, headers={"Authorization": f"Bearer {key}"}, timeout=60)


@pytest.fixture(scope="module")
def seeded(platform):
    store = platform.store
    alice_id, alice = store.create_account("alice")
    bob_id, bob = store.create_account("bob")
    ids = {"alice_id": alice_id, "alice": alice, "bob_id": bob_id, "bob": bob}
    with _api(platform, alice) as api:
        sft = api.post("/runs", json={"name": "sft stage", "dataset": "ds_t", "kind": "hosted",
                                      "config": _runner_config("sft")}).json()["id"]
        api.post(f"/runs/{sft}/points", json={"batch_id": "a", "points": [
            {"step": s, "metrics": {"loss": 2.0 / s, "learning_rate": 3e-3}} for s in range(1, 21)]})
        api.patch(f"/runs/{sft}", json={"status": "done", "summary": {
            "holdout_before": 0.0, "holdout_after": 0.125, "training": {"method": "sft", "metric": "pass_rate"}}})
        grpo = api.post("/runs", json={"name": "grpo stage", "dataset": "ds_t", "kind": "hosted", "total_steps": STEPS,
                                       "config": {**_runner_config("grpo", previous_run=sft), "init_from": sft}}).json()["id"]
        pts = _grpo_points()
        api.post(f"/runs/{grpo}/points", json={"batch_id": "g", "points": pts})
        api.patch(f"/runs/{grpo}", json={"status": "done", "summary": {
            "holdout_before": 0.125, "holdout_after": 0.25,
            "setup": {"base_model": "whileai/tiny-tooluse-base", "lora_rank": 16, "batch_size": 32},
            "training": {"method": "grpo", "metric": "pass_rate", "init_from": sft}}})
        rm = api.post("/runs", json={"name": "reward model", "dataset": "ds_p", "kind": "hosted",
                                     "config": {"method": "rm", "beta": 0.5}}).json()["id"]
        api.patch(f"/runs/{rm}", json={"status": "done", "summary": {
            "holdout_before": 0.5, "holdout_after": 1, "training": {"method": "rm", "metric": "pair_accuracy"}}})
        sweep = []
        for seed, after in ((0, 0.2), (1, 0.3), (2, 0.25)):
            r = api.post("/runs", json={"name": f"seed {seed}", "dataset": "ds_t", "kind": "hosted", "config": {
                "spec": {"method": "sft", "seed": seed}, "overrides": [f"seed={seed}"], "sweep": {"id": "sw_seeds"}}}).json()["id"]
            api.patch(f"/runs/{r}", json={"status": "done", "summary": {"holdout_before": 0.0, "holdout_after": after}})
            sweep.append(r)
    job = store.create_job(alice_id, run_id=grpo, kind="grpo", target="local", status="done", spec={})
    path = job_log(job["id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("whileai job: grpo\n[    0.0 s] loading whileai/tiny-tooluse-base\n" + EVIL_LINE + "\n")
    ids.update(sft=sft, grpo=grpo, rm=rm, sweep=sweep, job=job["id"], log=path)
    return ids


@pytest.fixture
def page_for(browser, platform, seeded):
    make, close = page_opener(browser, lambda path: signin_link(platform.store, seeded["alice_id"],
                                                                platform.base_url, path))
    yield make
    close()


def test_the_run_page_groups_its_charts_draws_duplicates_once_and_tables_the_totals(seeded, page_for):
    from playwright.sync_api import expect

    page = page_for(f"/runs/{seeded['grpo']}")
    expect(page.locator("[data-chart=loss]")).to_be_visible()
    sections = page.locator("[data-section]").evaluate_all("els => els.map(e => [e.dataset.section, e.tagName])")
    assert sections == [["training", "DIV"], ["rewards", "DIV"], ["policy", "DIV"], ["completions", "DETAILS"],
                        ["system", "DETAILS"], ["other", "DETAILS"]]
    assert page.locator("details.chart-section[open]").count() == 0  # the rarely read ones start closed
    charts = page.locator("[data-section=training] [data-chart]").evaluate_all("els => els.map(e => e.dataset.chart)")
    assert charts[:3] == ["loss", "lr", "grad_norm"]
    loss = page.locator("[data-chart=loss]")
    expect(loss.locator("h3")).to_have_text("Loss (train and eval)")
    assert loss.evaluate("e => e.wai.lines.map(l => l.label)") == ["loss", "eval_loss"]
    reward = page.locator("[data-section=rewards] [data-chart=reward]")
    assert reward.evaluate("e => e.wai.lines.map(l => l.label)") == ["reward"]  # its twin is not drawn again
    expect(reward.locator("h3")).to_contain_text("also logged as rewards/first_action/mean")
    assert page.locator("[data-chart='m:rewards/first_action/mean']").count() == 0
    clip = page.locator("[data-section=policy] [data-chart=clip_ratio]")
    assert clip.evaluate("e => e.wai.lines.length") == 5  # five clip_ratio/* on one chart
    system = page.locator("[data-section=system] [data-chart]").evaluate_all("els => els.map(e => e.dataset.chart)")
    assert system == ["system_cpu", "system_rss"]
    for name in TOTALS:  # end-of-run totals: a table, no one-dot charts
        assert page.locator(f"[data-chart='m:{name}']").count() == 0
        expect(page.locator(f"#scalars tr[data-key='{name}']")).to_be_visible()
    expect(page.locator("#scalars tr[data-key=total_flos] td")).to_have_text("1.23T")
    expect(page.locator("#scalars tr[data-key=train_runtime] td")).to_contain_text("13 min 33 s")

    page.click("details[data-section=other] summary")  # opened: its charts take their width, labels fit
    expect(page.locator("[data-chart='m:num_tokens']")).to_be_visible()
    page.wait_for_timeout(200)
    fits = page.locator("[data-chart]").evaluate_all("""els => els.filter(e => e.wai && e.offsetWidth).map(e => {
        const u = e.wai.u, a = u.axes[1], ctx = u.ctx;
        ctx.font = "11px system-ui, sans-serif";
        const widest = Math.max(...(a._values || []).map(t => ctx.measureText(String(t)).width));
        return [e.dataset.chart, widest < a._size - 8, (a._values || []).join(" ")];
    })""")
    assert fits and all(ok for _, ok, _ in fits), fits
    tokens = next(v for c, _, v in fits if c == "m:num_tokens")
    assert "k" in tokens and "e+" not in tokens, tokens  # compact SI labels (60k), not 6.00e+4


def test_the_run_page_shows_the_setup_beside_the_result_and_the_worker_log_as_text(platform, seeded, page_for):
    from playwright.sync_api import expect

    page = page_for(f"/runs/{seeded['grpo']}")
    setup = page.locator("#setup")
    expect(setup.locator("[data-key=base_model] dd")).to_have_text("whileai/tiny-tooluse-base (job default)")
    expect(setup.locator("[data-key=lora_rank] dd")).to_have_text("16 (job default)")
    # the trainer ran 32 (GRPO: generations x prompts), not the 8 the config resolved, and the spec left it unset
    expect(setup.locator("[data-key=batch_size] dd")).to_have_text("32 (job default)")
    log = page.locator("#worker-log")
    expect(log).to_contain_text(EVIL_LINE)  # shown as text
    assert page.locator("#worker-log script, #worker-log b").count() == 0
    assert page.evaluate("window.__pwned") is None

    with _api(platform, seeded["alice"]) as api:  # a live run's log is tailed while it runs
        live = api.post("/runs", json={"name": "live", "kind": "hosted", "total_steps": 10,
                                       "config": {"method": "sft"}}).json()["id"]
        api.post(f"/runs/{live}/points", json={"batch_id": "x", "points": [{"step": 1, "metrics": {"loss": 1.0}},
                                                                         {"step": 2, "metrics": {"loss": 0.9}}]})
        job = platform.store.create_job(seeded["alice_id"], run_id=live, kind="sft", target="local", status="queued")
        path = job_log(job["id"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("first line\n")
        page = page_for(f"/runs/{live}")
        expect(page.locator("#worker-log")).to_have_text("first line\n")
        with open(path, "a") as f:
            f.write("[   12.0 s] training sft on 753 rows\n")
        expect(page.locator("#worker-log")).to_contain_text("training sft on 753 rows", timeout=10_000)
        expect(page.locator("#setup [data-key=lora_rank] dd")).to_have_text("16 (job default)")
        api.patch(f"/runs/{live}", json={"status": "done"})


def test_the_log_route_reads_only_the_readers_own_runs_job_log(platform, seeded):
    base = platform.base_url + "/page-data/runs"
    alice = {"Authorization": f"Bearer {seeded['alice']}"}
    bob = {"Authorization": f"Bearer {seeded['bob']}"}
    mine = httpx.get(f"{base}/{seeded['grpo']}/log", headers=alice)
    assert mine.status_code == 200 and mine.json()["job"] == seeded["job"]
    assert EVIL_LINE in mine.json()["text"]
    size = mine.json()["size"]
    later = httpx.get(f"{base}/{seeded['grpo']}/log", params={"offset": size}, headers=alice).json()
    assert later["text"] == "" and later["offset"] == size  # a tail asks only for what is new
    theirs = httpx.get(f"{base}/{seeded['grpo']}/log", headers=bob)
    assert theirs.status_code == 404 and EVIL_LINE not in theirs.text  # another account's run: as if missing
    assert httpx.get(f"{base}/{seeded['grpo']}/log").status_code == 401
    # a job row of bob's naming alice's run id is not alice's log, and bob's own run finds only bob's jobs
    with _api(platform, seeded["bob"]) as api:
        bobs = api.post("/runs", json={"name": "bob's", "kind": "hosted"}).json()["id"]
    answer = httpx.get(f"{base}/{bobs}/log", headers=bob).json()
    assert answer["job"] is None and answer["text"] == "" and "no job" in answer["note"]
    for bad in ("-1", "x", "../../etc/passwd"):
        assert httpx.get(f"{base}/{seeded['grpo']}/log", params={"offset": bad}, headers=alice).status_code == 422
    assert httpx.get(f"{base}/..%2F..%2Fetc%2Fpasswd/log", headers=alice).status_code == 404


def test_the_runs_list_adds_columns_kept_in_the_address_and_nests_a_stage_under_its_start(platform, seeded, page_for):
    from playwright.sync_api import expect

    page = page_for("/runs")
    rows = page.locator("#runs tbody tr")
    ids = rows.evaluate_all("els => els.map(e => e.dataset.run)")
    assert ids[ids.index(seeded["sft"]) + 1] == seeded["grpo"]  # the stage right under the run it started from
    child = page.locator(f"#runs tr[data-run='{seeded['grpo']}']")
    expect(child).to_have_class("stage-child")
    assert child.get_attribute("data-parent") == seeded["sft"]
    # held-out: each cell names its metric (pass rate and pair accuracy are both on the page), fixed decimals
    expect(page.locator(f"#runs tr[data-run='{seeded['rm']}'] td[data-label=held-out]")).to_have_text(
        "pair accuracy 0.500 → 1.000")
    expect(child.locator("td[data-label=held-out]")).to_have_text("pass rate 0.125 → 0.250")

    page.fill("#add-column", "config.beta")
    page.press("#add-column", "Enter")
    expect(page.locator("th[data-col='config.beta']")).to_have_count(1)
    page.fill("#add-column", "metric.train_runtime")
    page.press("#add-column", "Enter")
    expect(page.locator("th[data-col='metric.train_runtime']")).to_have_count(1)
    assert "cols=config.beta%2Cmetric.train_runtime" in page.url
    expect(page.locator(f"tr[data-run='{seeded['rm']}'] td[data-col='config.beta']")).to_have_text("0.5")
    expect(page.locator(f"tr[data-run='{seeded['grpo']}'] td[data-col='metric.train_runtime']")).to_have_text("812.5")
    shared = page_for("/runs?" + page.url.split("?", 1)[1])  # the address, opened elsewhere, shows the same view
    expect(shared.locator("th.added")).to_have_text(["config.beta", "metric.train_runtime"])
    shared.click("[aria-label='remove column config.beta']")
    expect(shared.locator("th.added")).to_have_text(["metric.train_runtime"])
    assert "config.beta" not in shared.url
    bad = httpx.get(f"{platform.base_url}/page-data/runs", params={"cols": "beta"},
                    headers={"Authorization": f"Bearer {seeded['alice']}"})
    assert bad.status_code == 422 and "config.<key>" in bad.json()["error"]["message"]


def test_a_seed_sweep_is_drawn_on_a_categorical_axis(seeded, page_for):
    from playwright.sync_api import expect

    page = page_for("/sweeps/sw_seeds")
    chart = page.locator('[data-chart="knob:seed"]')
    expect(chart).to_have_attribute("data-axis", "categorical")
    expect(chart).to_have_attribute("data-points", "3")
    assert chart.evaluate("e => e.wai.u.axes[0]._values") == ["0", "1", "2"]  # one tick per seed, no 0.2, 0.4


def test_at_390_px_the_copy_button_sits_beside_the_command_and_nothing_scrolls_sideways(seeded, page_for):
    page = page_for(f"/runs/{seeded['grpo']}", width=390)
    page.wait_for_selector(".copyable pre")
    for box in page.locator(".copyable").all():
        pre, button = box.locator("pre").bounding_box(), box.locator("button.copy").bounding_box()
        assert button["x"] >= pre["x"] + pre["width"], (pre, button)  # beside, not over
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page = page_for("/runs?cols=config.beta", width=390)
    page.wait_for_selector("#runs")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
