"""Screenshots of the run pages for the README: seeded runs, a real server, headless Chromium.

    python scripts/screenshots.py                 # writes docs/screenshots/*.png
    python scripts/screenshots.py --out /tmp/shots

It seeds a fresh store in a temporary folder (an SFT run, a finished GRPO run
whose HackMonitor fired an alarm, a failed DPO run, a running run and a
six-run sweep), starts the platform on a loopback port, signs in through the
form and writes the runs list, the GRPO run, a comparison and the sweep at
1280 px and at 390 px (phone width), light and dark.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import tempfile
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
        if grpo:
            drift = max(0, s - (hack_at or steps)) / steps
            m["reward"] = 0.3 + 0.5 * (1 - math.exp(-s / 90)) + 0.4 * drift + rng.gauss(0, 0.03)
            m["reward_std"] = 0.3 + rng.gauss(0, 0.02)
            m["kl"] = 0.002 * s * (1 + 3 * drift) + abs(rng.gauss(0, 0.01))
            m["completions/mean_length"] = 140 + 0.2 * s + 220 * drift + rng.gauss(0, 4)
        out.append({"step": s, "metrics": m, "ts": 1_790_000_000.0 + s})
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
    for i, (beta, lr) in enumerate([(b, lr) for b in (0.01, 0.04, 0.1) for lr in (1e-5, 3e-5)]):
        after = 0.40 + 0.08 * (beta == 0.04) - 0.05 * (lr == 3e-5) + 0.02 * i % 3 / 10
        alarms = [dict(alarm, step=150)] if beta == 0.01 else []
        sweep.append(run(f"grpo sweep beta={beta} learning_rate={lr}",
                         {"spec": {**grpo_spec, "beta": beta, "learning_rate": lr}, "recipe": "grpo_tooluse",
                          "overrides": [f"beta={beta}", f"learning_rate={lr}"], "sweep": {"id": "sw_beta_lr"}},
                         _points(120, 10 + i, grpo=True, hack_at=80 if beta == 0.01 else None),
                         {"holdout_before": 0.41, "holdout_after": round(after, 3),
                          "monitor": {"alarms": alarms}, "training": {"method": "grpo", "gpu": "A10G", "seconds": 600 + 40 * i}},
                         total_steps=120))
    ids["sweep"] = "sw_beta_lr"
    ids["compare"] = ",".join(sweep[:3])
    return ids


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "screenshots"))
    p.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = p.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from whileai.platform.server import serve_in_thread

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
            for width, height, scheme, tag in ((1280, 900, "light", "1280"), (390, 844, "light", "390"),
                                               (1280, 900, "dark", "1280-dark")):
                context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme,
                                              device_scale_factor=1)
                page = context.new_page()
                page.goto(handle.base_url + "/signin")
                page.fill("#key", ids["key"])
                page.click("button[type=submit]")
                page.wait_for_url("**/runs")
                for name, path in pages.items():
                    if scheme == "dark" and name not in ("run-grpo",):
                        continue
                    page.goto(handle.base_url + path)
                    page.wait_for_selector("main h1")
                    page.wait_for_timeout(400)
                    target = out / f"{name}-{tag}.png"
                    page.screenshot(path=str(target), full_page=True)
                    print(f"wrote {target}")
                context.close()
            browser.close()
    finally:
        handle.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
