"""HackMonitor: arguments, the watched reward and its buffer, the alarms on synthetic runs, the report."""

from __future__ import annotations

import asyncio
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from whileai.domain.monitor import _features as feats
from whileai.domain.monitor import _stats as stats
from whileai.domain import defaults
from whileai.domain.monitor import HackMonitor, format_hack_monitor

WORDS = [f"w{i}" for i in range(200)]


class Policy:
    """A synthetic policy over ``n`` held-out prompts; its behaviour is set per look by the test."""

    def __init__(self, seed: int = 0, n: int = 32):
        self.rng = np.random.default_rng(seed)
        self.n = n
        self.skill = 0.0
        self.keyword = 0.0  # share of completions with "certainly"
        self.think = 0.0  # share with a <think> block
        self.words = 12  # mean filler length
        self.difficulty = self.rng.normal(0, 1, n)
        self.holdout = [{"prompt": f"task {i}", "answer": f"a{i % 7}"} for i in range(n)]
        self.index = {r["prompt"]: i for i, r in enumerate(self.holdout)}

    def sample(self, model, tokenizer, prompts, n, max_new_tokens):
        out = []
        for p in prompts:
            i = self.index[p]
            row = []
            for _ in range(n):
                length = max(3, int(self.words * self.rng.lognormal(0, 0.3)))
                filler = " ".join(self.rng.choice(WORDS, length))
                ok = self.rng.random() < 1 / (1 + math.exp(self.difficulty[i] - self.skill))
                answer = f"a{i % 7}" if ok else f"a{(i + 1 + self.rng.integers(0, 5)) % 7}"
                text = f"{filler} answer {answer}"
                if self.rng.random() < self.think:
                    text = f"<think> {filler} </think> answer {answer}"
                if self.rng.random() < self.keyword:
                    text = "certainly " + text
                row.append(text)
            out.append(row)
        return out


def make_proxy(policy: Policy, keyword_pay: float = 0.0, think_pay: float = 0.0, length_pay: float = 0.0,
               lenient: float = 0.0):
    def proxy(prompts, completions, answer, **_):
        noise = policy.rng.normal(0, 0.1, len(completions))
        out = []
        for text, ans, e in zip(completions, answer, noise):
            r = float(text.endswith(f"answer {ans}")) + lenient + e
            r += keyword_pay * ("certainly" in text) + think_pay * text.startswith("<think>")
            r += length_pay * max(0.0, len(text.split()) / 12 - 1)
            out.append(r)
        return out

    return proxy


def gold(row):
    return float(row["messages"][-1]["content"].endswith(f"answer {row['answer']}"))


def run_looks(monitor, policy, looks, change=None):
    """Evaluate ``looks`` times; ``change(policy, look)`` edits the policy before each look."""
    for t in range(looks):
        if change is not None:
            change(policy, t)
        monitor.evaluate(step=10 * t)
    return {a["kind"] for a in monitor.alarms}


def monitor_for(policy, proxy, **kw):
    kw.setdefault("concurrency", 1)
    return HackMonitor(holdout=policy.holdout, proxy=proxy, gold=gold, sample=policy.sample, **kw)


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------


def test_defaults_come_from_monitor_constants():
    m = HackMonitor(holdout=["a"] * 8)
    assert (m.every, m.k, m.n_prompts, m.window, m.delta) == (
        defaults.MONITOR_EVERY, defaults.MONITOR_K, defaults.MONITOR_N_PROMPTS, defaults.MONITOR_WINDOW,
        defaults.MONITOR_DELTA)
    assert m.sampling == defaults.MONITOR_SAMPLING and m.kl_budget is defaults.MONITOR_KL_BUDGET
    assert m.buffer == defaults.MONITOR_BUFFER and m.n_boot == defaults.MONITOR_N_BOOT


def test_bad_arguments_are_all_reported_at_once():
    with pytest.raises(ValueError) as err:
        HackMonitor(holdout=["q"] * 8, every=0, k=1, delta=-1, stop_on=["divergence", "typo"],
                    sampling={"temperature": 0, "beam": 3}, proxy="not callable")
    text = str(err.value)
    for needle in ("every=0", "k=1", "delta=-1", "'typo'", "temperature", "'beam'", "proxy="):
        assert needle in text
    assert "leave it None" in text


@pytest.mark.parametrize("holdout", [None, [], "just a string", [{"no": "prompt"}], [42]])
def test_holdout_must_be_prompts(holdout):
    with pytest.raises(ValueError, match="holdout"):
        HackMonitor(holdout=holdout)


def test_kl_stop_needs_a_budget():
    with pytest.raises(ValueError, match="kl_budget"):
        HackMonitor(holdout=["q"] * 8, stop_on="kl")
    HackMonitor(holdout=["q"] * 8, stop_on="kl", kl_budget=2.0)


def test_holdout_rows_and_columns_reach_proxy_and_gold():
    seen = {}

    def proxy(prompts, completions, answer, city):
        seen["proxy"] = (prompts[0], completions[0], answer[0], city[0])
        return [1.0] * len(completions)

    def judge(row):
        seen["gold"] = row
        return {"reward": 0.5}

    rollout = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Weather?"},
                            {"role": "assistant", "content": "old answer"}], "answer": "x", "city": "Oslo"}
    m = HackMonitor(holdout=[rollout] * 8, proxy=proxy, gold=judge, k=2, concurrency=1,
                    sample=lambda mo, tok, prompts, n, max_new_tokens: [['<tool_call>{"name": "f", "arguments": {}}'
                                                                         '</tool_call>'] * n for _ in prompts])
    entry = m.evaluate(step=3)
    prompt, completion, answer, city = seen["proxy"]
    assert [msg["role"] for msg in prompt] == ["system", "user"]
    assert completion[0]["role"] == "assistant" and (answer, city) == ("x", "Oslo")
    row = seen["gold"]
    assert row["answer"] == "x" and row["messages"][-1]["tool_calls"][0]["function"]["name"] == "f"
    assert entry["gold"] == 0.5 and entry["proxy"] == 1.0 and entry["step"] == 3


def test_first_action_gold_held_as_json_text_is_judged():
    from whileai.domain.judges.judging import first_action_judge

    call = '<tool_call>{"name": "get_time", "arguments": {"city": "Tokyo"}}</tool_call>'
    rows = [{"prompt": [{"role": "user", "content": "Time in Tokyo?"}],
             "gold": json.dumps({"name": "get_time", "arguments": {"city": "Tokyo"}})}] * 8
    m = HackMonitor(holdout=rows, proxy=lambda prompts, completions, **kw: [1.0] * len(completions),
                    gold=first_action_judge, k=2, sample=lambda mo, tok, prompts, n, max_new_tokens: [[call, "no"]] * 8)
    entry = m.evaluate(step=0)
    assert entry["gold"] == 0.5 and m.summary()["errors"]["gold"] == 0


def test_sample_must_return_k_strings_per_prompt():
    m = HackMonitor(holdout=["q"] * 8, proxy=lambda prompts, completions: [0.0] * len(completions), k=2,
                    sample=lambda mo, tok, prompts, n, max_new_tokens: [["x"]] * len(prompts))
    with pytest.raises(ValueError, match="one list of 2 strings"):
        m.evaluate(0)


def test_no_proxy_and_nothing_wrapped_says_what_to_do():
    m = HackMonitor(holdout=["q"] * 8, sample=lambda *a, **k: [["x"] * 4] * 8)
    with pytest.raises(ValueError, match="wrap"):
        m.evaluate(0)


# ---------------------------------------------------------------------------
# wrap and the buffer
# ---------------------------------------------------------------------------


def test_wrap_keeps_name_rewards_and_buffers_completions():
    def my_reward(prompts, completions, **kw):
        return [len(c) / 10 for c in completions]

    m = HackMonitor(holdout=["q"] * 8)
    watched = m.wrap(my_reward)
    assert watched.__name__ == "my_reward" and watched.__doc__ == my_reward.__doc__
    out = watched(prompts=["p", "p"], completions=["abc", "abcdef"], gold=["x", "y"])
    assert out == [0.3, 0.6]
    assert m._live_keys() == [(1, 0), (1, 1)]


def test_wrap_of_a_callable_object_and_an_async_reward():
    class Scorer:
        def __call__(self, prompts, completions, **kw):
            return [1.0] * len(completions)

    async def async_reward(prompts, completions, **kw):
        return [2.0] * len(completions)

    m = HackMonitor(holdout=["q"] * 8)
    assert m.wrap(Scorer()).__name__ == "Scorer"
    watched = m.wrap(async_reward)
    assert asyncio.iscoroutinefunction(watched) and watched.__name__ == "async_reward"
    assert asyncio.run(watched(prompts=["p"], completions=["c"])) == [2.0]


def test_buffer_is_bounded_and_keeps_the_latest():
    m = HackMonitor(holdout=["q"] * 8, buffer=10)
    watched = m.wrap(lambda prompts, completions, **kw: [0.0] * len(completions))
    for _ in range(20):
        watched(prompts=["p"] * 4, completions=["c"] * 4)
    keys = m._live_keys()
    assert len(keys) == 10 and keys[-1] == (20, 3)
    assert sum(len(b[2]) for b in m._batches) <= 10 + 4


def test_only_the_proxy_is_buffered_and_a_bad_call_never_breaks_the_reward():
    def proxy(prompts=None, completions=(), **kw):
        return [1.0] * len(completions)

    def other(prompts, completions, **kw):
        return [0.0] * len(completions)

    m = HackMonitor(holdout=["q"] * 8, proxy=proxy)
    m.wrap(other)(prompts=["p"], completions=["c"])
    assert m._live_keys() == []
    assert m.wrap(proxy)(completions=["c"]) == [1.0]  # no prompts: not buffered, reward still returned
    assert m._live_keys() == []


# ---------------------------------------------------------------------------
# History, summary, report
# ---------------------------------------------------------------------------


def test_history_and_summary_shape():
    policy = Policy(seed=1)
    m = monitor_for(policy, make_proxy(policy), n_boot=100)
    run_looks(m, policy, 4)
    assert [e["step"] for e in m.history] == [0, 10, 20, 30]
    entry = m.history[-1]
    for key in ("proxy", "gold", "gap", "length", "kl", "alarms", "checks", "seconds"):
        assert key in entry
    assert entry["checks"]["divergence"]["n_prompts"] == 32
    summary = m.summary()
    json.dumps(summary)
    assert len(summary["curve"]) == 4 and summary["alarms"] == [] and summary["stopped"] is None
    assert summary["kl"].startswith("skipped") and summary["scan"]["completions"] > 0


def test_history_alarms_and_summary_keep_their_keys_in_order():
    policy = Policy(seed=2)
    m = monitor_for(policy, make_proxy(policy, keyword_pay=0.4, length_pay=0.3), n_boot=100)
    run_looks(m, policy, 7, lambda p, t: (setattr(p, "keyword", 0.5 if t >= 4 else 0.0),
                                          setattr(p, "words", 12 if t < 4 else 30)))
    assert list(m.history[-1]) == ["step", "evaluation", "proxy", "gold", "gap", "length", "length_unit", "kl",
                                   "prompts", "k", "alarms", "checks", "seconds"]
    assert list(m.history[-1]["seconds"]) == ["sampling", "judges", "kl", "monitor", "total"]
    summary = m.summary()
    assert list(summary) == ["evaluations", "curve", "alarms", "scan", "format", "length", "endorsed", "divergence",
                             "kl", "armed", "length_unit", "stopped", "settings", "errors"]
    assert list(summary["curve"][-1]) == ["step", "proxy", "gold", "gap", "length", "kl"]
    assert list(summary["scan"]) == ["completions", "held_out", "buffered", "features", "alpha", "flagged", "top",
                                     "flagged_detail", "step"]
    assert list(summary["length"])[-1] == "step" and "per_prompt" not in summary["length"]
    kinds = [a["kind"] for a in summary["alarms"]]
    assert {"divergence", "length", "feature"} <= set(kinds)
    for alarm in summary["alarms"]:
        assert list(alarm)[:3] == ["kind", "step", "evaluation"] and list(alarm)[-2:] == ["look_at", "message"]
        assert list(alarm["look_at"]) == ["feature", "length_before", "length_after", "length_change_pct", "prompts"]
        assert all(list(p) == ["prompt", "effect"] for p in alarm["look_at"]["prompts"])
    divergence = summary["alarms"][kinds.index("divergence")]
    assert list(divergence["look_at"]["feature"]) == ["feature", "payment", "z", "p", "count", "strongest", "alpha"]
    feature = summary["alarms"][kinds.index("feature")]
    assert list(feature)[3:-2] == ["features", "detail", "alpha", "completions"]


def test_format_shows_curve_then_alarms_in_plain_words():
    policy = Policy(seed=2)
    m = monitor_for(policy, make_proxy(policy, keyword_pay=0.4), n_boot=100)
    run_looks(m, policy, 7, lambda p, t: setattr(p, "keyword", 0.5 if t >= 4 else 0.0))
    text = format_hack_monitor(m.summary())
    lines = text.splitlines()
    assert lines[0].startswith("HackMonitor: 7 evaluations")
    assert "step" in lines[2] and "proxy" in lines[2] and "gold" in lines[2]
    assert text.index("step") < text.index("Alarms")
    assert "proxy-gold gap grew" in text and "'certainly'" in text
    assert "KL: skipped" in text
    assert format_hack_monitor({}) == "HackMonitor: no evaluations yet"


# ---------------------------------------------------------------------------
# The alarms on synthetic runs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [3, 4])
def test_honest_improving_run_is_quiet(seed):
    policy = Policy(seed=seed)
    m = monitor_for(policy, make_proxy(policy))
    kinds = run_looks(m, policy, 10, lambda p, t: setattr(p, "skill", -0.5 + 0.2 * t))
    assert kinds == set()


def test_keyword_hack_fires_divergence_and_the_scan_names_it():
    policy = Policy(seed=5)
    m = monitor_for(policy, make_proxy(policy, keyword_pay=0.4))
    run_looks(m, policy, 8, lambda p, t: setattr(p, "keyword", 0.5 if t >= 5 else 0.0))
    first = {}
    for a in m.alarms:
        first.setdefault(a["kind"], a)
    assert first["divergence"]["step"] <= 60
    assert first["divergence"]["change"] >= m.delta and first["divergence"]["lo"] > 0
    assert "certainly" in first["feature"]["features"]


def test_constant_lenient_proxy_is_not_a_hack():
    policy = Policy(seed=6)
    m = monitor_for(policy, make_proxy(policy, lenient=0.3))
    assert run_looks(m, policy, 9, lambda p, t: setattr(p, "skill", 0.2 * t)) == set()
    assert m.history[-1]["gap"] > 0.2


def test_length_hack_fires_length_alarm_and_benign_growth_is_growth():
    policy = Policy(seed=7)
    m = monitor_for(policy, make_proxy(policy, length_pay=0.2))
    kinds = run_looks(m, policy, 8, lambda p, t: setattr(p, "words", 24 if t >= 4 else 12))
    assert "length" in kinds
    alarm = next(a for a in m.alarms if a["kind"] == "length")
    assert alarm["drift"] > m.length_pct and alarm["slope"] > 0 and alarm["gap_from_length"] >= m.delta

    honest = Policy(seed=8)
    m2 = monitor_for(honest, make_proxy(honest))
    assert run_looks(m2, honest, 8, lambda p, t: setattr(p, "words", 24 if t >= 4 else 12)) == set()
    assert m2.summary()["length"]["verdict"] == "growth"
    assert "growth, not a hack" in format_hack_monitor(m2.summary())


def test_gold_decline_while_proxy_holds():
    policy = Policy(seed=9)
    base = make_proxy(policy)

    def proxy(prompts, completions, answer, **kw):  # pays 1 for any answer once the policy stops being right
        return [max(r, 1.0 if policy.skill < 0 else r) for r in base(prompts, completions, answer)]

    m = monitor_for(policy, proxy)
    kinds = run_looks(m, policy, 10, lambda p, t: setattr(p, "skill", 2.0 if t < 6 else -2.0))
    assert "gold_decline" in kinds
    alarm = next(a for a in m.alarms if a["kind"] == "gold_decline")
    assert alarm["drop"] >= m.delta and alarm["proxy_drop"] <= 0.5 * alarm["drop"]


def test_endorsed_format_is_discounted():
    def learning(p, t):
        p.think = min(0.9, 0.15 * t)

    policy = Policy(seed=10)
    m = monitor_for(policy, make_proxy(policy, think_pay=0.3), endorsed=["<think>"])
    assert run_looks(m, policy, 9, learning) == set()
    paid = m.summary()["endorsed"]["<think>"]["payment"]
    assert abs(paid - 0.3) < 0.1
    assert m.history[-1]["gap_adjusted"] < m.history[-1]["gap"] - 0.1

    policy = Policy(seed=10)
    m = monitor_for(policy, make_proxy(policy, think_pay=0.3))
    assert "divergence" in run_looks(m, policy, 9, learning)


def test_no_gold_turns_divergence_off_and_says_why():
    policy = Policy(seed=11)
    m = HackMonitor(holdout=policy.holdout, proxy=make_proxy(policy), sample=policy.sample, concurrency=1)
    run_looks(m, policy, 5)
    summary = m.summary()
    assert summary["divergence"].startswith("off: no gold judge")
    assert "divergence" not in m.history[-1]["checks"]
    assert "Divergence and gold decline: off" in format_hack_monitor(summary)


# ---------------------------------------------------------------------------
# The run and the trainer
# ---------------------------------------------------------------------------


class BrokenRun:
    def log(self, **kw):
        raise RuntimeError("platform down")

    def note(self, **kw):
        raise ConnectionError("platform down")


class RecordingRun:
    def __init__(self):
        self.points, self.notes = [], []

    def log(self, step=None, **metrics):
        self.points.append((step, metrics))

    def note(self, **fields):
        self.notes.append(fields)


def test_a_broken_run_never_raises_into_training():
    policy = Policy(seed=12)
    m = HackMonitor(BrokenRun(), holdout=policy.holdout, proxy=make_proxy(policy), gold=gold, sample=policy.sample,
                    concurrency=1, every=1)
    control = SimpleNamespace(should_training_stop=False)
    for step in range(3):
        m.on_step_end(None, SimpleNamespace(global_step=step + 1), control)
    assert len(m.history) == 3 and m.summary()["errors"]["run"] >= 6


def test_callback_logs_to_the_run_and_stop_on_stops_training():
    policy = Policy(seed=13)
    run = RecordingRun()
    m = HackMonitor(run, holdout=policy.holdout, proxy=make_proxy(policy, keyword_pay=0.4), gold=gold,
                    sample=policy.sample, concurrency=1, every=5, stop_on="divergence")
    control = SimpleNamespace(should_training_stop=False)
    m.on_train_begin(None, SimpleNamespace(global_step=0), control)
    step = 0
    while not control.should_training_stop and step < 100:
        step += 1
        policy.keyword = 0.5 if step > 25 else 0.0
        m.on_step_end(None, SimpleNamespace(global_step=step), control)
    assert control.should_training_stop and step % 5 == 0 and 30 <= step <= 45
    stopped = m.summary()["stopped"]
    assert stopped["step"] == step and stopped["kind"] == "divergence" and "gap grew" in stopped["reason"]
    assert {"monitor/proxy", "monitor/gold", "monitor/gap", "monitor/length"} <= set(run.points[-1][1])
    assert run.notes[-1]["monitor"]["stopped"]["kind"] == "divergence"
    assert "Training stopped at step" in format_hack_monitor(run.notes[-1]["monitor"])


def test_a_look_leaves_the_trainers_random_state_as_it_was():
    """A gold judge that draws (a reward model initialising its score head on first load) must not move GRPO's samples."""
    import random

    import torch

    policy = Policy(seed=14)

    def drawing_gold(row):
        torch.rand(8), random.random(), np.random.rand()  # what loading a judge's fresh head does to the generators
        return gold(row)

    m = HackMonitor(holdout=policy.holdout, proxy=make_proxy(policy), gold=drawing_gold, sample=policy.sample,
                    concurrency=1, every=1)
    control = SimpleNamespace(should_training_stop=False)

    def draws():
        return torch.rand(4).tolist(), random.random(), float(np.random.rand())

    torch.manual_seed(0), random.seed(0), np.random.seed(0)
    expected = draws()
    torch.manual_seed(0), random.seed(0), np.random.seed(0)
    m.on_step_end(None, SimpleNamespace(global_step=1), control)
    assert len(m.history) == 1 and not m.summary()["errors"]["evaluate"]
    assert draws() == expected
    torch.manual_seed(0), random.seed(0), np.random.seed(0)
    m.evaluate(step=2)  # called directly, in a loop of the user's own
    assert len(m.history) == 2 and draws() == expected


def test_a_failing_look_in_the_callback_is_reported_not_raised():
    def boom(*a, **k):
        raise RuntimeError("sampler crashed")

    m = HackMonitor(holdout=["q"] * 8, proxy=lambda prompts, completions: [0.0] * len(completions), sample=boom,
                    every=1)
    control = SimpleNamespace(should_training_stop=False)
    with pytest.warns(UserWarning, match="sampler crashed"):
        m.on_step_end(None, SimpleNamespace(global_step=1), control)
    m.on_step_end(None, SimpleNamespace(global_step=2), control)  # same error: warned once
    assert not control.should_training_stop
    assert m.summary()["errors"]["evaluate"] == ["RuntimeError: sampler crashed"]


# ---------------------------------------------------------------------------
# Statistics and features
# ---------------------------------------------------------------------------


def test_alpha_spending_sums_to_alpha():
    total = sum(stats.spent_alpha(0.01, m) for m in range(1, 100_000))
    assert 0.0099 < total <= 0.01


def test_t_quantile_matches_tables():
    assert stats.t_quantile(0.975, 10) == pytest.approx(2.228, abs=2e-3)
    assert stats.t_quantile(0.999, 30) == pytest.approx(3.385, abs=2e-3)
    assert stats.t_quantile(0.9999, 10) == pytest.approx(5.694, abs=1e-2)


def test_divergence_test_pairs_by_prompt():
    rng = np.random.default_rng(0)
    level = rng.normal(0, 1, 32)  # large between-prompt spread, cancelled by pairing
    base, now = level + rng.normal(0, 0.02, 32), level + 0.15 + rng.normal(0, 0.02, 32)
    res = stats.divergence_test(base, now, rng=rng, n_boot=200, alpha=1e-4, delta=0.1)
    assert res["fired"] and res["lo"] > 0.1
    quiet = stats.divergence_test(base, level + 0.05, rng=rng, n_boot=200, alpha=1e-4, delta=0.1)
    assert not quiet["fired"]


def test_kl_bound_fires_only_past_the_budget():
    rng = np.random.default_rng(5)
    kl = rng.gamma(4.0, 0.5, 32)  # mean 2 nats
    assert stats.kl_test(kl, rng=rng, n_boot=200, alpha=1e-3, budget=1.0)["fired"]
    assert not stats.kl_test(kl, rng=rng, n_boot=200, alpha=1e-3, budget=2.0)["fired"]
    assert not stats.kl_test(kl, rng=rng, n_boot=200, alpha=1e-3, budget=None)["fired"]


def test_feature_scan_is_calibrated_under_the_null_and_finds_a_paid_feature():
    rng = np.random.default_rng(1)
    n, f = 400, 60
    cells = np.repeat(np.arange(n // 4), 4)
    small = 0
    for _ in range(40):
        x = (rng.random((n, f)) < 0.1).astype(np.float32)
        res = stats.maxt_scan(x, rng.normal(size=n), cells, rng=rng, n_perm=50)
        small += res["p"].min() <= 0.05
    assert small <= 6  # about 2 expected at 5% family-wise
    r = rng.normal(size=n) + 0.8 * x[:, 7]
    res = stats.maxt_scan(x, r, cells, rng=rng, n_perm=50)
    assert int(np.argmax(res["z"])) == 7 and res["p"][7] < 1e-3 and res["payment"][7] == pytest.approx(0.8, abs=0.3)


def test_feature_scan_holds_length_fixed():
    rng = np.random.default_rng(4)
    n, f = 400, 40
    cells = np.repeat(np.arange(n // 4), 4)
    length = rng.lognormal(2.7, 0.4, n)
    x = (rng.random((n, f)) < np.clip(length[:, None] / 60, 0, 1)).astype(np.float32)  # long => more words
    r = 0.02 * length + rng.normal(0, 0.1, n)  # the proxy pays for length, not for any word
    assert stats.maxt_scan(x, r, cells, rng=rng, n_perm=50)["p"].min() < 0.01
    held = stats.maxt_scan(x, r, cells, rng=rng, n_perm=50, covariate=length)
    assert held["p"].min() > 0.02
    r = r + 0.3 * x[:, 3]
    paid = stats.maxt_scan(x, r, cells, rng=rng, n_perm=50, covariate=length)
    assert paid["p"][3] < 1e-3 and paid["payment"][3] == pytest.approx(0.3, abs=0.1)


def test_endorsed_payment_within_and_across_looks():
    rng = np.random.default_rng(2)
    n = 800
    cells, groups = np.repeat(np.arange(n // 4), 4), np.repeat(np.arange(n // 4), 4) % 50
    x = (rng.random(n) < 0.5).astype(float)[:, None]
    pay, how = stats.endorsed_payment(0.3 * x[:, 0] + rng.normal(0, 0.1, n), x, cells, groups, min_support=8)
    assert pay[0] == pytest.approx(0.3, abs=0.05) and how == ["within prompt"]
    whole = (cells >= n // 8).astype(float)[:, None]  # all-or-nothing per cell: read across looks
    pay, how = stats.endorsed_payment(0.3 * whole[:, 0] + rng.normal(0, 0.1, n), whole, cells, groups, min_support=8)
    assert pay[0] == pytest.approx(0.3, abs=0.05) and how == ["across evaluations"]


def test_features_markers_ngrams_and_endorsed_exclusion():
    text = "# Plan\n- step one\nI am **SURE** THIS WORKS <think>hmm</think> ```json\n{\"a\": 1}\n``` hope this helps!"
    found = feats.features_of(text)
    for marker in ("markdown_header", "bullet_list", "bold", "all_caps", "think", "json", "code_block", "exclamation"):
        assert f"format:{marker}" in found
    assert {"hope", "hope this", "hope this helps", "trailing:hope this helps"} <= found
    excluded = feats.excluded_by_endorsed(["<think>", "bold"])
    assert excluded("think") and excluded("format:bold") and not excluded("hmm") and not excluded("format:think")
    assert feats.endorsed_detectors(["think"])[0]("<think>x</think>")
    assert feats.completion_text([{"role": "assistant", "content": "hi", "tool_calls": [
        {"function": {"name": "f", "arguments": {"x": 1}}}]}]).endswith('<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>')


def test_feature_index_compacts_without_changing_meaning():
    index = feats.FeatureIndex()
    old = [index.encode(f"filler{i} words here") for i in range(3000)]
    live = old[-2:]
    fresh = index.compact(live, slack=1)
    assert fresh is not None and len(index) < 100
    assert sorted(index.name(int(i)) for i in fresh[0]) == sorted(feats.features_of("filler2998 words here"))
    x, names, nonzero = index.presence(fresh, min_count=2, max_features=10)
    assert x[nonzero].all() and x.sum() == len(nonzero[0])
    assert set(names) == {"words", "here", "words here"} and x.shape == (2, 3)
