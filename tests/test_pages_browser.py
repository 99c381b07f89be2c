"""The run page in a real browser: headless Chromium against a real uvicorn server on loopback.

Chromium logs in through ``/login?key=...`` (the cookie it sets carries the
next request), renders the page under its Content-Security-Policy, and dumps
the DOM after any script would have run. What users logged cannot run as
script or markup, the loss curve is drawn, and the held-out result and cost
read as a person would read them. Skipped where no Chromium is installed
(.ci/run installs Debian's ``chromium``).
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from whileai.platform.server import serve_in_thread

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)
REQUIRED = os.environ.get("WHILEAI_REQUIRE_CHROMIUM") == "1"  # CI sets it: a missing browser fails, not skips
pytestmark = pytest.mark.skipif(CHROMIUM is None and not REQUIRED,
                                reason="no Chromium on this machine (apt-get install chromium)")


@pytest.fixture(autouse=True)
def _browser_present():
    if CHROMIUM is None:
        pytest.fail("WHILEAI_REQUIRE_CHROMIUM=1 but no chromium is installed; apt-get install chromium")

API = "/api/v1"
EVIL = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


def _chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}",
               "--window-size=1200,1600", "--virtual-time-budget=3000", *args, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture
def page_run(tmp_path):
    handle = serve_in_thread(store_url=f"sqlite:///{tmp_path / 'platform.db'}")
    key = handle.store.create_account("alice")[1]
    with httpx.Client(base_url=handle.base_url, headers={"Authorization": f"Bearer {key}"}) as api:
        run = api.post(f"{API}/runs", json={"name": f"sft {EVIL}", "config": {"method": "sft", "note": EVIL}}).json()
        api.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "b0", "points": [
            {"step": i, "metrics": {"loss": 2.0 / (i + 1), EVIL: 1.0}} for i in range(20)]})
        api.patch(f"{API}/runs/{run['id']}", json={"status": "done", "summary": {
            "holdout_before": 0.125, "holdout_after": 0.875, "comment": EVIL,
            "training": {"method": "sft", "metric": "pass_rate", "gpu": "A10G", "seconds": 3600}}})
    try:
        yield handle, key, run["id"]
    finally:
        handle.stop()


def test_the_run_page_renders_in_chromium_without_running_what_users_logged(page_run, tmp_path):
    handle, key, run_id = page_run
    login = f"{handle.base_url}/login?key={key}&next=/runs/{run_id}"
    dom = _chromium(tmp_path, login, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout
    assert "<title>pwned</title>" not in text and "pwned</title>" not in text  # no logged script or handler ran
    assert "<img" not in text and "<script" not in text  # logged markup stayed text
    assert html.escape("<img src=x") in text or "&lt;img src=x" in text
    assert "<svg" in text and "<polyline" in text  # the loss curve is drawn
    assert "held-out pass rate" in text and "0.125" in text and "0.875" in text
    assert "A10G" in text and "$1.10" in text  # the cost and its basis: one A10G hour at the list price


def test_the_run_page_paints(page_run, tmp_path):
    handle, key, run_id = page_run
    shot = tmp_path / "page.png"
    done = _chromium(tmp_path, f"{handle.base_url}/login?key={key}&next=/runs/{run_id}", f"--screenshot={shot}")
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000  # a painted page, not a blank one


def test_without_the_cookie_chromium_gets_the_login_answer_not_the_run(page_run, tmp_path):
    handle, _, run_id = page_run
    dom = _chromium(tmp_path, f"{handle.base_url}/runs/{run_id}", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "0.875" not in dom.stdout and "/login" in dom.stdout
