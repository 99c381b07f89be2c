"""Opening a run page: time until the first chart is drawn, for a run with 100,000 points per series.

    python benchmarks/pages_open.py                    # 100,000 points, 8 metrics each, 3 repeats
    python benchmarks/pages_open.py --points 20000 --repeat 1

A real uvicorn server on a loopback port (serve_in_thread) over a SQLite store
holds one run with ``--points`` points, each carrying 8 metrics (loss, eval
loss every 10 steps, learning rate, grad norm, reward, KL, completion length,
epoch). Headless Chromium (Debian's, driven by Playwright), already signed in,
opens ``/runs/{id}``; the time is from the navigation's start until the loss
chart is drawn (its element carries ``data-points``).

- cold: the server has not read this run since it started (its decoded series
  cache is emptied before each repeat), so the store is scanned and decoded;
- warm: the same page opened again (the cache holds the columns).

The baseline, measured in the same run, is fetching the same run's JSON the
way an API client does: ``GET /api/v1/runs/{id}`` with every point, read and
decoded (in Python with httpx, and in the same browser with fetch + json()).
The ratio says what the page costs against reading the data it draws.
Target: the cold page under 2 seconds on this machine.

The runs list is timed too, over ``--runs`` runs in the same store: one page of
it with a filter read from the config JSON (``/page-data/runs?method=sft``),
against the API's plain list of as many runs (``GET /api/v1/runs?limit=50``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 2.0
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def _seed(store, n: int) -> tuple[str, str, str]:
    account, key = store.create_account("bench")
    run = store.create_run(account, name="bench run", total_steps=n, config={"method": "sft"})
    batch = 20_000
    for start in range(0, n, batch):
        points = []
        for s in range(start, min(n, start + batch)):
            m = {"loss": 2.0 / (1 + s / 5000) + (s % 13) * 1e-3, "learning_rate": 1e-4 * (1 - s / n),
                 "grad_norm": 1.0 + (s % 7) / 10, "reward": s / n, "kl": (s % 11) / 100,
                 "completions/mean_length": 100 + s % 50, "epoch": s / n}
            if s % 10 == 0:
                m["eval_loss"] = 2.1 / (1 + s / 5000)
            points.append({"step": s, "metrics": m, "ts": 1_790_000_000.0 + s})
        store.add_points(account, run["id"], f"b{start}", points)
    store.update_run(account, run["id"], {"status": "done"})
    return account, key, run["id"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--runs", type=int, default=5000, help="runs in the store for the runs-list timing")
    p.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = p.parse_args(argv)

    import httpx
    from playwright.sync_api import sync_playwright

    from whileai.platform.pages import _series
    from whileai.platform.server import serve_in_thread

    folder = Path(tempfile.mkdtemp(prefix="whileai-bench-pages-"))
    handle = serve_in_thread(store_url=f"sqlite:///{folder / 'platform.db'}")
    try:
        started = time.perf_counter()
        _account, key, run_id = _seed(handle.store, args.points)
        print(f"seeded {args.points:,} points x 8 metrics in {time.perf_counter() - started:.1f} s")
        api = httpx.Client(base_url=handle.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
        fetch_py, fetch_browser, cold, warm = [], [], [], []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=FLAGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(handle.base_url + "/signin")
            page.fill("#key", key)
            page.click("button[type=submit]")
            page.wait_for_url("**/runs")
            for _ in range(args.repeat):
                t = time.perf_counter()
                body = api.get(f"/api/v1/runs/{run_id}").content
                decoded = json.loads(body)
                fetch_py.append(time.perf_counter() - t)
                assert len(decoded["series"]) == args.points
                fetch_browser.append(_browser_fetch(page, handle.base_url, run_id, key))
                for into in (cold, warm):
                    if into is cold:
                        _series._cache.clear()
                    t = time.perf_counter()
                    page.goto(f"{handle.base_url}/runs/{run_id}")
                    page.wait_for_selector("[data-chart=loss][data-points]", timeout=60_000)
                    into.append(time.perf_counter() - t)
            drawn = page.get_attribute("[data-chart=loss]", "data-points")
            browser.close()
        methods = ("sft", "grpo", "dpo", "rm")
        for i in range(args.runs):
            handle.store.create_run(_account, name=f"run {i}", dataset=f"ds_{i % 7}",
                                    config={"method": methods[i % 4], "runner": {"recipe": f"r{i % 5}"}})
        list_page, list_api = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            found = api.get("/page-data/runs", params={"method": "sft", "page": 3}).json()
            list_page.append(time.perf_counter() - t)
            t = time.perf_counter()
            api.get("/api/v1/runs", params={"limit": 50}).json()
            list_api.append(time.perf_counter() - t)
        assert found["total"] == -(-args.runs // 4) + 1 and len(found["runs"]) == 50  # + the bench run (sft)
        api.close()
    finally:
        handle.stop()
        shutil.rmtree(folder, ignore_errors=True)

    med = statistics.median
    print(f"points per series: {args.points:,}; loss chart drew {drawn} points (loss, eval_loss)")
    print(f"baseline  GET /api/v1/runs/{{id}} + decode, httpx:        {med(fetch_py):6.3f} s  (runs: "
          + ", ".join(f"{x:.3f}" for x in fetch_py) + ")")
    print(f"baseline  the same JSON fetched + parsed in the browser:   {med(fetch_browser):6.3f} s")
    print(f"page      first chart drawn, cold (series read from store): {med(cold):6.3f} s  (runs: "
          + ", ".join(f"{x:.3f}" for x in cold) + ")")
    print(f"page      first chart drawn, warm (series cached):          {med(warm):6.3f} s")
    print(f"ratio     cold page / httpx JSON fetch: {med(cold) / med(fetch_py):.2f}x; "
          f"/ browser JSON fetch: {med(cold) / med(fetch_browser):.2f}x; warm page / httpx: {med(warm) / med(fetch_py):.2f}x")
    print(f"runs list over {args.runs:,} runs: /page-data/runs?method=sft&page=3 {med(list_page) * 1000:.0f} ms "
          f"(filter, count, page, choices) against GET /api/v1/runs?limit=50 {med(list_api) * 1000:.0f} ms: "
          f"{med(list_page) / med(list_api):.2f}x")
    verdict = "meets" if med(cold) < TARGET_S else "misses"
    print(f"target    cold page under {TARGET_S:.0f} s: {verdict} ({med(cold):.2f} s)")
    return 0


def _browser_fetch(page, base_url: str, run_id: str, key: str) -> float:
    """Seconds for the browser to fetch and parse the run's full JSON (the API, with the bearer key)."""
    return page.evaluate(
        """async ([u, key]) => { const t = performance.now();
           const r = await fetch(u, {headers: {Authorization: 'Bearer ' + key}});
           const j = await r.json(); if (!j.series.length) throw new Error('empty');
           return (performance.now() - t) / 1000; }""", [f"{base_url}/api/v1/runs/{run_id}", key])


if __name__ == "__main__":
    sys.exit(main())
