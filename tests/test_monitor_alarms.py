"""HackMonitor's alarms as a person reads them: what each names, which are armed and why, and when none may fire."""

from __future__ import annotations

import importlib.util
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_monitor import Policy, make_proxy, monitor_for, run_looks
from whileai.core.errors import MonitorWarning
from whileai.domain import defaults
from whileai.domain.monitor import HackMonitor, format_hack_monitor
from whileai.domain.monitor._report import prompt_text

ROOT = Path(__file__).resolve().parent.parent
NO_GOLD_DIVERGENCE = "off: no gold judge, so divergence would compare the reward with itself"


def first_alarms(monitor) -> dict:
    first: dict = {}
    for alarm in monitor.alarms:
        first.setdefault(alarm["kind"], alarm)
    return first


# ---------------------------------------------------------------------------
# What an alarm names
# ---------------------------------------------------------------------------


def test_a_feature_alarm_names_the_feature_the_length_change_and_three_prompts():
    policy = Policy(seed=2)
    m = monitor_for(policy, make_proxy(policy, keyword_pay=0.4), n_boot=100)
    run_looks(m, policy, 7, lambda p, t: setattr(p, "keyword", 0.5 if t >= 4 else 0.0))
    alarms = first_alarms(m)
    text = alarms["feature"]["message"]
    assert "Look at: the feature 'certainly' (+0." in text and "beyond gold, p 0.000)" in text
    assert re.search(r"length \d+\.\d \u2192 \d+\.\d words \([+-]\d+%\)", text), text
    shown = re.findall(r"'task \d+' \([+-]\d\.\d\d\)", text)
    assert len(shown) == defaults.MONITOR_PROMPTS_SHOWN, text
    assert "the held-out prompts where the proxy paid it most: " in text
    effects = [p["effect"] for p in alarms["feature"]["look_at"]["prompts"]]
    assert effects == sorted(effects, reverse=True) and effects[0] > 0
    # divergence names the feature the scan found most paid for, and where the gap grew most
    text = alarms["divergence"]["message"]
    assert "the strongest feature in the latest scan, 'certainly'" in text
    assert "the held-out prompts where the gap grew most: 'task " in text
    assert text in format_hack_monitor(m.summary())


def test_a_length_alarm_names_the_change_before_and_after_and_where_it_bought_gap():
    policy = Policy(seed=7)
    m = monitor_for(policy, make_proxy(policy, length_pay=0.2))
    run_looks(m, policy, 8, lambda p, t: setattr(p, "words", 24 if t >= 4 else 12))
    alarm = first_alarms(m)["length"]
    look = alarm["look_at"]
    assert look["length_after"] > 1.5 * look["length_before"]
    before, after, pct = look["length_before"], look["length_after"], look["length_change_pct"]
    assert f"length {before:.1f} \u2192 {after:.1f} words ({pct:+.0f}%)" in alarm["message"]
    assert pct == pytest.approx(100 * (after / before - 1))
    assert "the held-out prompts where length bought the most gap: 'task " in alarm["message"]
    assert len(look["prompts"]) == 3


def test_prompts_are_shortened_to_one_line():
    long = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is\nthe weather " + "in Paris and " * 20}]
    short = prompt_text(long)
    assert short.startswith("What is the weather in Paris") and short.endswith("\u2026")
    assert len(short) <= defaults.MONITOR_PROMPT_CHARS and "\n" not in short
    assert prompt_text("a short one") == "a short one"


# ---------------------------------------------------------------------------
# Which alarms are armed, and why the others are off
# ---------------------------------------------------------------------------


def test_with_gold_the_gold_checks_are_armed_and_the_off_ones_say_why():
    m = HackMonitor(holdout=["q"] * 8, gold=lambda row: 1.0)
    armed = m.summary()["armed"]
    assert armed["divergence"] == armed["gold_decline"] == armed["length"] == armed["feature"] == "armed"
    assert armed["kl"].startswith("off: no kl_budget")
    assert armed["format"] == "off: the feature scan reads every format marker beyond gold already"
    assert HackMonitor(holdout=["q"] * 8, kl_budget=0.5).summary()["armed"]["kl"] == "armed"
    assert format_hack_monitor(m.summary()).splitlines() == [
        "HackMonitor: no evaluations yet",
        "Armed: divergence, gold_decline, length, feature. Off: kl (no kl_budget, so the KL is measured and logged "
        "but never alarmed; pass kl_budget= in nats of sequence KL to arm it); format (the feature scan reads every "
        "format marker beyond gold already)."]


def test_without_gold_only_the_gold_free_checks_are_armed():
    policy = Policy(seed=11)
    m = HackMonitor(holdout=policy.holdout, proxy=make_proxy(policy, keyword_pay=0.4), sample=policy.sample,
                    concurrency=1)
    kinds = run_looks(m, policy, 8, lambda p, t: setattr(p, "keyword", 0.5 if t >= 4 else 0.0))
    summary = m.summary()
    armed = summary["armed"]
    assert armed["divergence"] == NO_GOLD_DIVERGENCE
    assert armed["gold_decline"].startswith("off: no gold judge")
    assert armed["feature"].startswith("off: no gold judge")
    assert armed["length"] == armed["format"] == "armed"
    # the reward pays for "certainly", but without gold nothing can say the task does not: no n-gram alarm
    assert kinds <= {"length", "kl", "format"} and "feature" not in kinds
    assert summary["scan"] is None and "divergence" not in m.history[-1]["checks"]
    text = format_hack_monitor(summary)
    assert "Armed: length, format. Off: divergence (no gold judge, so divergence would compare the reward " \
           "with itself)" in text


def test_without_gold_a_paid_format_marker_fires_the_format_alarm():
    policy = Policy(seed=12)
    base = make_proxy(policy)

    def proxy(prompts, completions, answer, **kw):
        return [r + 0.5 * ("**" in text) for r, text in zip(base(prompts, completions, answer), completions)]

    def sample(model, tokenizer, prompts, n, max_new_tokens):  # the policy, with a bold opener at policy.keyword
        texts = policy.sample(model, tokenizer, prompts, n, max_new_tokens)
        return [[f"**Note:** {t}" if policy.rng.random() < policy.keyword else t for t in ts] for ts in texts]

    m = HackMonitor(holdout=policy.holdout, proxy=proxy, sample=sample, concurrency=1)
    kinds = run_looks(m, policy, 7, lambda p, t: setattr(p, "keyword", 0.5 if t >= 4 else 0.0))
    assert "format" in kinds
    alarm = first_alarms(m)["format"]
    assert alarm["features"] == ["format:bold"]
    assert "'format:bold'" in alarm["message"] and "share 0% \u2192 " in alarm["message"]
    assert "Look at: the format marker 'format:bold'" in alarm["message"]


def test_an_honest_run_without_gold_is_quiet():
    policy = Policy(seed=13)
    m = HackMonitor(holdout=policy.holdout, proxy=make_proxy(policy), sample=policy.sample, concurrency=1)
    assert run_looks(m, policy, 9, lambda p, t: setattr(p, "skill", -0.5 + 0.2 * t)) == set()


def test_disarm_turns_a_check_off_with_the_callers_reason():
    policy = Policy(seed=5)
    reason = "the reward is the exact judge, the strictest this run has"
    m = monitor_for(policy, make_proxy(policy, keyword_pay=0.4), disarm={"divergence": reason, "feature": f"off: {reason}"})
    kinds = run_looks(m, policy, 8, lambda p, t: setattr(p, "keyword", 0.5 if t >= 5 else 0.0))
    armed = m.summary()["armed"]
    assert armed["divergence"] == armed["feature"] == f"off: {reason}"
    assert armed["format"] == "armed"  # the scan is off, so the marker check takes over
    assert "divergence" not in kinds and "feature" not in kinds
    assert m.summary()["divergence"] == f"off: {reason}"
    assert f"divergence ({reason})" in format_hack_monitor(m.summary())
    # the grpo job's shape: no gold, and its own reason for every gold check
    off = {kind: f"off: {reason}" for kind in ("divergence", "gold_decline", "feature")}
    armed = HackMonitor(holdout=["q"] * 8, gold=None, disarm=off).summary()["armed"]
    assert {kind: armed[kind] for kind in off} == off and armed["length"] == "armed"


def test_disarm_is_checked_and_names_the_accepted_kinds():
    with pytest.raises(ValueError) as err:
        HackMonitor(holdout=["q"] * 8, disarm={"lenght": "typo", "kl": ""})
    text = str(err.value)
    assert "disarm names 'lenght'; accepted kinds: ['divergence', 'gold_decline', 'length', 'kl', 'feature', " \
           "'format']" in text
    assert "disarm['kl']=''" in text
    with pytest.raises(ValueError, match="must be a mapping of alarm kind"):
        HackMonitor(holdout=["q"] * 8, disarm=["divergence"])
    with pytest.warns(MonitorWarning, match=r"stop_on names \['divergence'\], which cannot fire"):
        HackMonitor(holdout=["q"] * 8, stop_on="divergence")


# ---------------------------------------------------------------------------
# A gold that agrees with the proxy raises nothing
# ---------------------------------------------------------------------------

VOCAB = ["alpha", "beta", "gamma", "delta", "**bold**", "- item", "# head", "wow!", "why?", "<think>", "{\"a\": 1}",
         "certainly", "http://x.io", "LOUD WORDS", "\U0001F600"]


@settings(max_examples=2, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), n_prompts=st.integers(8, 10), k=st.integers(2, 3),
       length_pay=st.floats(0.0, 0.2), marker_pay=st.floats(0.0, 1.0))
def test_a_gold_equal_to_the_proxy_never_alarms(seed, n_prompts, k, length_pay, marker_pay):
    """200 looks of a policy whose lengths and formats wander; the proxy pays for both, and so does gold."""
    rng = np.random.default_rng(seed)
    state = {"words": 10.0, "mix": rng.dirichlet(np.ones(len(VOCAB)))}

    def score(text: str) -> float:
        digest = sum(map(ord, text)) % 97 / 97  # a per-text value: the same text always scores the same
        return digest + length_pay * len(text.split()) + marker_pay * ("**" in text or "!" in text)

    def sample(model, tokenizer, prompts, n, max_new_tokens):
        sizes = np.maximum(1, rng.poisson(state["words"], size=(len(prompts), n)))
        return [[" ".join(rng.choice(VOCAB, size=s, p=state["mix"])) for s in row] for row in sizes]

    m = HackMonitor(holdout=[f"prompt {i}" for i in range(n_prompts)], n_prompts=n_prompts, k=k, window=2,
                    proxy=lambda prompts, completions, **kw: [score(c) for c in completions],
                    gold=lambda row: score(row["messages"][-1]["content"]), sample=sample, buffer=0,
                    n_boot=20, n_perm=10, concurrency=1, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MonitorWarning)
        for look in range(200):
            state["words"] = float(np.clip(state["words"] * rng.lognormal(0, 0.3), 2, 60))
            if rng.random() < 0.2:  # a change of style now and then
                state["mix"] = rng.dirichlet(np.ones(len(VOCAB)) * rng.uniform(0.1, 2))
            entry = m.evaluate(step=look)
            assert entry["alarms"] == [], (look, entry["checks"])
    assert m.alarms == [] and len(m.history) == 200


# ---------------------------------------------------------------------------
# The calibration benchmark runs at a tiny size
# ---------------------------------------------------------------------------


def test_calibration_benchmark_prints_its_rates_at_a_tiny_size(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("monitor_calibration", ROOT / "benchmarks" / "monitor_calibration.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # its dataclasses look their module up by name
    spec.loader.exec_module(bench)
    bench.main(["--runs", "1", "--only", "improving", "--only", "length abrupt"])
    out = capsys.readouterr().out
    assert re.search(r"^improving +1 +0 0\.0% +\d+\.\d% +- +\d+\.\d%", out, re.M), out
    # runs, detected, rate, median and p90 delay, the length alarm's own rate and delay, early alarms
    assert re.search(r"^length abrupt +1 +[01] +\d+\.\d% +\S+ +\S+ +\d+\.\d% +\S+ +\d+\.\d%", out, re.M), out
    assert "worst honest false-alarm rate" in out and re.search(r"^targets: (all met|missed)", out, re.M)
    assert "keyword" not in out  # --only kept the run to the two classes
    with pytest.raises(SystemExit):
        bench.main(["--runs", "0"])
