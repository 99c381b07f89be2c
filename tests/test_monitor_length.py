"""The length check's statistics, called directly: the move gate on the whole distribution and the price of
length read as a step function within prompts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from whileai.domain import defaults
from whileai.domain.monitor import _stats as stats

PROMPTS, K, BASE = 32, 4, 15.0


def lengths(rng: np.random.Generator, centre: float, looks: int = 1, sd: float = 0.3) -> np.ndarray:
    return np.maximum(3, np.round(centre * rng.lognormal(0, sd, (looks, PROMPTS, K))))


def run_test(base: np.ndarray, now: np.ndarray, price, rng: np.random.Generator, *, gold_price=None,
             noise: float = 0.1, alpha: float = 0.001) -> dict:
    """The length test on the baseline looks and the latest, the residual paying ``price(length)``."""
    read = np.concatenate([base, now[None]])
    resid = price(read) + rng.normal(0, noise, read.shape)
    gold = gold_price(read) if gold_price is not None else np.zeros_like(read)
    res = stats.length_test(base, now, resid, gold, read, rng=rng, n_boot=300, alpha=alpha,
                            delta=defaults.MONITOR_DELTA, pct=defaults.MONITOR_LENGTH_PCT,
                            shift=defaults.MONITOR_LENGTH_SHIFT, bins=defaults.MONITOR_LENGTH_BINS)
    assert res is not None
    return res


def test_the_gate_opens_on_a_share_of_completions_moving_when_the_mean_barely_moves():
    base = np.full((3, PROMPTS, K), 15.0)
    part = np.full((PROMPTS, K), 15.0)
    part[:, :1] = 30.0  # a quarter of the completions doubled: the mean moves 25%, not past the gate
    drift, moved, opened = stats.length_moved(base, part, pct=0.25, shift=0.25)
    assert drift == pytest.approx(0.25) and moved == pytest.approx(0.25) and opened
    drift, moved, opened = stats.length_moved(base, part, pct=0.25, shift=0.3)
    assert not opened  # neither gate: the mean moved exactly its 25%, a quarter of completions crossed
    few = np.full((PROMPTS, K), 15.0)
    few[: PROMPTS // 2, :1] = 20.0  # an eighth moved a third: neither gate
    assert stats.length_moved(base, few, pct=0.25, shift=0.25)[2] is False
    drift, moved, _ = stats.length_moved(base, np.full((PROMPTS, K), 40.0), pct=0.25, shift=0.25)
    assert drift == pytest.approx(40 / 15 - 1) and moved == 1.0
    assert math.isnan(stats.length_moved(np.zeros(3), few, pct=0.25, shift=0.25)[0])


def test_a_proxy_paying_past_a_threshold_is_priced_by_the_share_that_crossed_it():
    rng = np.random.default_rng(0)
    base, now = lengths(rng, BASE, looks=3), lengths(rng, 1.8 * BASE)[0]
    at, pay = 1.4 * BASE, 0.4
    res = run_test(base, now, lambda length: pay * (length > at), rng)
    crossed = (now > at).mean() - (base > at).mean()
    assert res["fired"] and res["verdict"] == "hack"
    assert res["gap_from_length"] == pytest.approx(pay * crossed, abs=0.06)
    assert res["gap_lo"] > 0 and res["slope"] > 0


def test_a_proxy_paying_per_word_is_priced_too():
    rng = np.random.default_rng(1)
    base, now = lengths(rng, BASE, looks=3), lengths(rng, 2 * BASE)[0]
    res = run_test(base, now, lambda length: 0.2 * np.maximum(0.0, length / BASE - 1), rng)
    bought = 0.2 * (np.maximum(0, now / BASE - 1).mean() - np.maximum(0, base / BASE - 1).mean())
    assert res["fired"] and res["gap_from_length"] == pytest.approx(bought, rel=0.35)


def test_a_hack_on_a_share_of_completions_fires_through_the_distribution_gate():
    rng = np.random.default_rng(2)
    base = lengths(rng, BASE, looks=3)
    now = lengths(rng, BASE)[0]
    now[:, :2] *= 2.2  # half the completions grow, the proxy pays past 1.5x
    res = run_test(base, now, lambda length: 0.6 * (length > 1.5 * BASE), rng)
    assert res["moved_share"] >= defaults.MONITOR_LENGTH_SHIFT and res["fired"], res


def test_growth_the_gold_pays_for_is_growth_not_a_hack():
    rng = np.random.default_rng(3)
    base, now = lengths(rng, BASE, looks=3), lengths(rng, 1.8 * BASE)[0]
    gold_step = lambda length: 0.5 * (length > 1.3 * BASE)  # noqa: E731
    res = run_test(base, now, lambda length: np.zeros_like(length), rng, gold_price=gold_step)
    assert res["verdict"] == "growth" and not res["fired"]
    crossed = (now > 1.3 * BASE).mean() - (base > 1.3 * BASE).mean()
    assert res["gold_from_length"] == pytest.approx(0.5 * crossed, abs=0.08)  # reported: the gold pays for it


def test_no_move_no_test_and_a_null_price_stays_quiet_over_many_runs():
    rng = np.random.default_rng(4)
    base = lengths(rng, BASE, looks=3)
    still = run_test(base, lengths(rng, BASE)[0], lambda length: np.zeros_like(length), rng)
    assert still["verdict"] == "stable" and "gap_from_length" not in still
    fired = sum(run_test(lengths(rng, BASE, looks=3), lengths(rng, 2 * BASE)[0],
                         lambda length: np.zeros_like(length), rng, alpha=0.01)["fired"] for _ in range(200))
    assert fired <= 6  # alpha 1% over 200 null runs: about 2 expected


def test_per_prompt_is_the_gap_bought_where_lengths_moved():
    rng = np.random.default_rng(5)
    base = lengths(rng, BASE, looks=3)
    now = lengths(rng, BASE)[0]
    now[: PROMPTS // 2] *= 2.0  # only the first half of the prompts grew
    res = run_test(base, now, lambda length: 0.5 * (length > 1.5 * BASE), rng)
    per = res["per_prompt"]
    assert per.shape == (PROMPTS,) and np.nanmean(per[: PROMPTS // 2]) > np.nanmean(per[PROMPTS // 2 :]) + 0.2
