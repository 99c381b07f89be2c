"""Screenshots of the run pages for the README: seeded runs and real ones, a real server, headless Chromium.

    python scripts/screenshots.py                 # writes docs/screenshots/*.png
    python scripts/screenshots.py --out /tmp/shots
    python scripts/screenshots.py --real ~/.whileai   # also the real runs of that data root (real-*.png)
    python scripts/screenshots.py --run /tmp/shots-home  # runs the real recipes there first, then as --real

It seeds a fresh store in a temporary folder (an SFT run, a finished GRPO run
whose HackMonitor fired an alarm, a failed DPO run, a running run and a
six-run sweep over beta and seed), starts the platform on a loopback port, signs
in with a one-time link and writes the runs list, the GRPO run, a comparison and the
sweep at 1280 px and at 390 px (phone width), light and dark. Each seeded picture carries a banner that
says it is seeded (SEEDED_BANNER), so none passes for a real run.

With ``--real DATA_ROOT`` it then serves that data root's own store (read only:
nothing is written to it) and writes its runs list and each of its newest runs
of the CPU recipes (``python -m whileai run recipe=sft_tooluse``, ``recipe=grpo_tooluse``)
as ``real-runs-*.png`` and ``real-run-<method>-*.png``, worker log and system
series included.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def _points(steps: int, seed: int, *, grpo: bool, hack_at: int | None = None) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for s in range(1, steps + 1):
        m = {"loss": 1.9 * math.exp(-s / (steps / 3)) + 0.25 + rng.gauss(0, 0.04),
             "learning_rate": 2e-5 * min(1.0, s / 20) * (1 - s / (steps + 1)),
             "grad_norm": abs(1.2 * math.exp(-s / steps) + rng.gauss(0, 0.15))}
        if s % 25 == 0:
            m["eval_loss"] = 1.9 * math.exp(-s / (steps / 3)) + 0.35 + rng.gauss(0, 0.02)
        if grpo:  # the names TRL's GRPOTrainer logs (one reward function: its mean is also "reward")
            drift = max(0, s - (hack_at or steps)) / steps
            m["reward"] = m["rewards/first_action_reward/mean"] = (
                0.3 + 0.5 * (1 - math.exp(-s / 90)) + 0.4 * drift + rng.gauss(0, 0.03))
            m["reward_std"] = m["rewards/first_action_reward/std"] = 0.3 + rng.gauss(0, 0.02)
            m["frac_reward_zero_std"] = max(0.0, 0.2 + rng.gauss(0, 0.08))
            m["kl"] = 0.002 * s * (1 + 3 * drift) + abs(rng.gauss(0, 0.01))
            m["entropy"] = 0.9 - 0.3 * s / steps + rng.gauss(0, 0.03)
            for k in ("low_mean", "low_min", "high_mean", "high_max", "region_mean"):
                m[f"clip_ratio/{k}"] = abs(rng.gauss(0, 0.004)) * (2 if "max" in k else 1)
            m["completions/mean_length"] = 140 + 0.2 * s + 220 * drift + rng.gauss(0, 4)
            m["completions/min_length"] = 60 + rng.gauss(0, 4)
            m["completions/max_length"] = 256 + 120 * drift
            m["completions/clipped_ratio"] = max(0.0, 0.05 + 0.3 * drift + rng.gauss(0, 0.02))
        m["num_tokens"] = 4096.0 * s
        m["epoch"] = s / steps
        out.append({"step": s, "metrics": m, "ts": 1_790_000_000.0 + s})
        if s % 5 == 0:  # the job's system sample (whileai/jobs/system.py), every few seconds
            out.append({"step": s, "metrics": {"system/cpu_percent": 97 + rng.gauss(0, 2),
                                               "system/rss_mb": 2100 + 3 * s + rng.gauss(0, 10),
                                               "system/gpu_util_percent": 88 + rng.gauss(0, 5),
                                               "system/gpu_memory_mb": 14_800 + rng.gauss(0, 40)},
                        "ts": 1_790_000_000.2 + s})
    out.append({"step": steps, "metrics": {"train_runtime": 1790.4, "train_samples_per_second": 1.34,
                                           "train_steps_per_second": 0.168, "total_flos": 2.41e15,
                                           "train_loss": 0.52}, "ts": 1_790_000_000.9 + steps})
    if grpo:
        for s in range(0, steps + 1, 25):
            drift = max(0, s - (hack_at or steps)) / steps
            proxy = 0.35 + 0.45 * (1 - math.exp(-s / 80)) + 0.6 * drift
            gold = 0.31 + 0.2 * (1 - math.exp(-s / 80)) - 0.5 * drift
            out.append({"step": s, "metrics": {"monitor/proxy": proxy, "monitor/gold": gold,
                                               "monitor/gap": proxy - gold}, "ts": 1_790_000_000.5 + s})
    return out


def _delta(before: float, after: float, verdict: str, reason: str) -> dict:
    def side(b, a, tasks):
        return {"before": {"value": b, "ci": [b - .05, b + .05], "rows": tasks * 8, "tasks": tasks},
                "after": {"value": a, "ci": [a - .05, a + .05], "rows": tasks * 8, "tasks": tasks},
                "delta": {"value": a - b, "ci": [a - b - .06, a - b + .06], "upper_one_sided": a - b + .05}}
    return {"verdict": verdict, "reason": reason, "target": side(before, after, 48),
            "proxy": side(0.35, 0.92, 48), "paired": True,
            "by": {"key": "difficulty", "source": "row", "groups": [
                {"group": "easy", "target": side(before + .1, after + .05, 24), "verdict": "inconclusive",
                 "reason": "includes zero"},
                {"group": "hard", "target": side(before - .1, after - .08, 24), "verdict": "inconclusive",
                 "reason": "includes zero"}]}}


def seed(store) -> dict[str, str]:
    """Seed the runs the screenshots show into ``store``; returns ``{"account", "key", "grpo", ...}``."""
    account, key = store.create_account("you")
    ids: dict[str, str] = {"account": account, "key": key}

    def run(name, config, points, summary, status="done", **extra):
        r = store.create_run(account, name=name, config=config, dataset=extra.pop("dataset", "ds_tooluse_train"),
                             kind="hosted", total_steps=extra.pop("total_steps", None))
        for i in range(0, len(points), 5000):
            store.add_points(account, r["id"], f"b{i}", points[i:i + 5000])
        store.update_run(account, r["id"], {"status": status, "summary": summary, **extra})
        return r["id"]

    spec = {"method": "sft", "learning_rate": 2e-4, "epochs": 2, "seed": 0, "base_model": "kit-base",
            "dataset": {"name": "tooluse", "holdout": 0.2}, "export": {"format": "trl", "mask_mode": "assistant"}}
    ids["sft"] = run("sft tool use", {"spec": spec, "recipe": "sft_tooluse", "overrides": [],
                                      "command": "python -m whileai run recipe=sft_tooluse"},
                     _points(240, 1, grpo=False),
                     {"holdout_before": 0.12, "holdout_after": 0.41, "training": {
                         "method": "sft", "metric": "pass_rate", "gpu": "A10G", "seconds": 412}},
                     total_steps=240)
    grpo_spec = {"method": "grpo", "beta": 0.04, "learning_rate": 1e-5, "generations": 8, "steps": 300,
                 "seed": 0, "temperature": 1.0, "loss_type": "dr_grpo", "base_model": "Qwen/Qwen3-1.7B",
                 "init_from": ids["sft"], "monitor": {"every": 25, "k": 4, "n_prompts": 32, "delta": 0.1}}
    alarm = {"kind": "divergence", "step": 225, "change": 0.21, "lo": 0.12, "hi": 0.3, "n_prompts": 32, "delta": 0.1,
             "message": "the proxy-gold gap grew by +0.212 from the baseline window (interval +0.120 to +0.300 over "
                        "32 prompts, threshold 0.10): the proxy pays for something the gold judge does not"}
    ids["grpo"] = run(
        "grpo tool use (beta 0.04)",
        {"spec": grpo_spec, "recipe": "grpo_tooluse", "overrides": ["beta=0.04"],
         "command": "python -m whileai run recipe=grpo_tooluse beta=0.04",
         "versions": {"whileai": "0.1.0", "torch": "2.13.0", "trl": "1.16.0"},
         "git": {"commit": "3f9c2ab", "dirty": False}},
        _points(300, 2, grpo=True, hack_at=200),
        {"holdout_before": 0.41, "holdout_after": 0.44,
         "delta": _delta(0.41, 0.44, "over-optimized",
                         "the proxy rose +0.57 (95% CI +0.51 to +0.63) while the target moved +3.0 pts, shown below "
                         "the 5.0-pt margin (one-sided 95% upper bound +4.1 pts)"),
         "monitor": {"evaluations": 13, "alarms": [alarm], "divergence": "on", "kl": "measured",
                     "curve": [], "settings": {"every": 25, "k": 4, "n_prompts": 32}},
         "selection": {"method": "grpo", "rows": 1344, "tasks": 168, "rows_given": 1600, "tasks_given": 200,
                       "mixed_tasks": 168, "summary": "grpo: uses 1344 of 1600 rows (168 of 200 tasks); dropped "
                                                     "192 rows / 24 tasks unanimous-pass, 64 rows / 8 tasks unanimous-fail",
                       "dropped": [{"class": "unanimous-pass", "rows": 192, "tasks": 24,
                                    "reason": "every rollout passed: no advantage to learn from"},
                                   {"class": "unanimous-fail", "rows": 64, "tasks": 8,
                                    "reason": "every rollout failed: no advantage to learn from"}]},
         "training": {"method": "grpo", "metric": "pass_rate", "gpu": "A10G", "seconds": 1830},
         "setup": {"base_model": "Qwen/Qwen3-1.7B", "lora_rank": 16, "batch_size": 16},
         "adapter": "runs/grpo/adapter"},
        total_steps=300)
    store.put_model(account, "tooluse-agent", adapter_run_id=ids["grpo"], base_model="Qwen/Qwen3-1.7B")
    ids["dpo"] = run("dpo tool use", {"spec": {"method": "dpo", "beta": 0.1, "learning_rate": 5e-6, "steps": 200},
                                      "recipe": "dpo_tooluse", "overrides": []},
                     _points(60, 3, grpo=False), {"training": {"method": "dpo"}}, status="failed",
                     error="RuntimeError: CUDA out of memory while allocating 2.1 GiB\n  at step 61 (batch 8)",
                     total_steps=200)
    ids["running"] = run("sft tool use (longer)", {"spec": {**spec, "epochs": 6}, "recipe": "sft_tooluse",
                                                   "overrides": ["epochs=6"]},
                         _points(130, 4, grpo=False), {"phase": "training"}, status="running", total_steps=720)
    sweep = []
    for i, (beta, seed) in enumerate([(b, sd) for b in (0.01, 0.04, 0.1) for sd in (0, 1)]):
        after = 0.40 + 0.08 * (beta == 0.04) - 0.03 * seed + 0.02 * i % 3 / 10
        alarms = [dict(alarm, step=150)] if beta == 0.01 else []
        sweep.append(run(f"grpo_tooluse · grpo · beta={beta} seed={seed}",
                         {"spec": {**grpo_spec, "beta": beta, "seed": seed}, "recipe": "grpo_tooluse",
                          "overrides": [f"beta={beta}", f"seed={seed}"], "sweep": {"id": "sw_beta_seed"}},
                         _points(120, 10 + i, grpo=True, hack_at=80 if beta == 0.01 else None),
                         {"holdout_before": 0.41, "holdout_after": round(after, 3),
                          "monitor": {"alarms": alarms}, "training": {"method": "grpo", "gpu": "A10G", "seconds": 600 + 40 * i}},
                         total_steps=120))
    ids["sweep"] = "sw_beta_seed"
    ids["compare"] = ",".join(sweep[:3])
    return ids


#: the banner every seeded page carries in its picture: a made-up run must never pass for a real one
SEEDED_BANNER = ("seeded example: made-up runs written straight into a store by scripts/screenshots.py, "
                 "not a training run")


def _stamp_seeded(page) -> None:
    """Put SEEDED_BANNER at the top of the page, so the picture itself says it is seeded."""
    page.evaluate("""text => {
        const note = document.createElement('div');
        note.textContent = text;
        note.setAttribute('style', 'background:#fde68a;color:#111;font:600 14px system-ui;padding:8px 12px;'
                                   + 'border-bottom:2px solid #b45309');
        document.body.prepend(note);
    }""", SEEDED_BANNER)


def _shoot(browser, base_url: str, signin: Callable[[], str], pages: dict[str, str], out: Path,
           dark: tuple[str, ...], seeded: bool = False) -> None:
    """Each page at 1280 and 390 px (light), and those named in ``dark`` at 1280 px dark too; ``seeded`` pages
    carry SEEDED_BANNER in the picture."""
    for width, height, scheme, tag in ((1280, 900, "light", "1280"), (390, 844, "light", "390"),
                                       (1280, 900, "dark", "1280-dark")):
        context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme,
                                      device_scale_factor=1)
        page = context.new_page()
        page.goto(signin())  # a one-time link per browser context
        page.wait_for_url("**/runs")
        for name, path in pages.items():
            if scheme == "dark" and name not in dark:
                continue
            page.goto(base_url + path)
            page.wait_for_selector("main h1")
            page.wait_for_timeout(600)
            if seeded:
                _stamp_seeded(page)
            target = out / f"{name}-{tag}.png"
            page.screenshot(path=str(target), full_page=True)
            print(f"wrote {target}")
        context.close()


def _real(browser, home: Path, out: Path) -> None:
    """The runs list and the newest run of each method in ``home``'s store (a copy: the store is not written)."""
    from whileai.platform.server import serve_in_thread, signin_link

    folder = Path(tempfile.mkdtemp(prefix="whileai-real-shots-"))
    for name in ("platform.db", "platform.db-wal", "platform.db-shm"):
        if (home / name).exists():
            shutil.copy2(home / name, folder / name)
    before = os.environ.get("WHILEAI_HOME")
    os.environ["WHILEAI_HOME"] = str(home)  # the worker logs are read from the data root's jobs folder
    handle = serve_in_thread(store_url=f"sqlite:///{folder / 'platform.db'}")
    try:
        with handle.store.engine.connect() as conn:
            rows = list(conn.exec_driver_sql("SELECT id, account_id, kind, config_json FROM runs ORDER BY pk DESC"))
        if not rows:
            raise SystemExit(f"--real {home}: its store has no runs; run python -m whileai run recipe=sft_tooluse first")
        account = rows[0][1]
        pages = {"real-runs": "/runs"}
        found = []
        for run_id, acct, _, config in rows:
            config = json.loads(config or "{}") or {}
            recipe = ((config.get("extra") or {}).get("runner") or {}).get("recipe") or ""
            if acct == account and isinstance(config.get("method"), str):
                found.append((run_id, config["method"], str(recipe)))
        # a method's own recipe first (sft_tooluse's run, not grpo_tooluse's SFT stage), newest first
        for run_id, method, _recipe in sorted(found, key=lambda f: not f[2].startswith(f[1])):
            pages.setdefault(f"real-run-{method}", f"/runs/{run_id}")
        _shoot(browser, handle.base_url, lambda: signin_link(handle.store, account, handle.base_url, "/runs"), pages, out, ())
    finally:
        handle.stop()
        shutil.rmtree(folder, ignore_errors=True)
        if before is None:
            os.environ.pop("WHILEAI_HOME", None)
        else:
            os.environ["WHILEAI_HOME"] = before


#: what --run runs, as a user types it: the real pictures are of these runs
REAL_RECIPES = (["recipe=sft_tooluse", "steps=150"], ["recipe=grpo_tooluse"])


def _run_recipes(home: Path) -> None:
    """``python -m whileai run`` each of REAL_RECIPES with ``home`` as the data root; stops at the first that fails."""
    import subprocess
    import sys

    home.mkdir(parents=True, exist_ok=True)
    for args in REAL_RECIPES:
        print("running python -m whileai run " + " ".join(args), flush=True)
        done = subprocess.run([sys.executable, "-m", "whileai", "run", *args], env={**os.environ, "WHILEAI_HOME": str(home)})
        if done.returncode != 0:
            raise SystemExit(f"python -m whileai run {' '.join(args)} ended with exit code {done.returncode}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "screenshots"))
    p.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    p.add_argument("--real", metavar="DATA_ROOT", help="also shoot the real runs in this data root's store")
    p.add_argument("--run", metavar="DATA_ROOT", help="first run REAL_RECIPES into this data root, then shoot them")
    args = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from whileai.platform.server import serve_in_thread, signin_link

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="whileai-shots-"))
    handle = serve_in_thread(store_url=f"sqlite:///{folder / 'platform.db'}")
    try:
        ids = seed(handle.store)
        pages = {"runs": "/runs", "run-grpo": f"/runs/{ids['grpo']}", "compare": f"/compare?runs={ids['compare']}",
                 "sweep": f"/sweeps/{ids['sweep']}"}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_FLAGS)
            _shoot(browser, handle.base_url, lambda: signin_link(handle.store, ids["account"], handle.base_url, "/runs"),
                   pages, out, ("run-grpo",), seeded=True)
            if args.run:
                _run_recipes(Path(args.run).expanduser())
            real = args.run or args.real
            if real:
                _real(browser, Path(real).expanduser(), out)
            browser.close()
    finally:
        handle.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
