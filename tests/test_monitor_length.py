"""The length check's statistics, called directly: the move gates on the whole distribution and on its upper
tail, and the price of length read within prompts as a step function with a line past its last step."""

from __future__ import annotations

import math
import warnings
from statistics import NormalDist

import numpy as np
import pytest

from whileai.domain import defaults
from whileai.domain.monitor import _checks as ch
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


def tail_gate(base: np.ndarray, now: np.ndarray) -> bool:
    """Whether the upper tail's gate alone opens (the mean's and the distribution's gates out of reach)."""
    return stats.length_moved(base, now, pct=math.inf, shift=math.inf, tail=defaults.MONITOR_LENGTH_TAIL,
                              tail_alpha=defaults.MONITOR_LENGTH_TAIL_ALPHA)[2]


def test_the_tail_gate_opens_on_a_minority_growing_far_where_the_other_gates_stay_shut():
    rng = np.random.default_rng(6)
    base = lengths(rng, BASE, looks=3)
    now = lengths(rng, BASE)[0]
    now[: PROMPTS // 2, :1] *= 2.5  # an eighth of the completions grow 2.5x, the rest stay as they were
    drift, moved, opened = stats.length_moved(base, now, pct=defaults.MONITOR_LENGTH_PCT,
                                              shift=defaults.MONITOR_LENGTH_SHIFT)
    assert drift < defaults.MONITOR_LENGTH_PCT and moved < defaults.MONITOR_LENGTH_SHIFT and not opened
    share_base, share_now, p = stats.length_tail(base, now, share=defaults.MONITOR_LENGTH_TAIL)
    assert share_base == pytest.approx(defaults.MONITOR_LENGTH_TAIL, abs=0.02) and share_now > share_base + 0.05
    assert p <= defaults.MONITOR_LENGTH_TAIL_ALPHA and tail_gate(base, now)
    assert stats.length_moved(base, now, pct=defaults.MONITOR_LENGTH_PCT, shift=defaults.MONITOR_LENGTH_SHIFT,
                              tail=defaults.MONITOR_LENGTH_TAIL, tail_alpha=defaults.MONITOR_LENGTH_TAIL_ALPHA)[2]


def test_the_tail_gate_stays_shut_on_stable_lengths_and_slow_growth_of_all_of_them():
    rng = np.random.default_rng(7)
    stable = sum(tail_gate(lengths(rng, BASE, looks=3), lengths(rng, BASE)[0]) for _ in range(300))
    assert stable <= 9  # its level is 1% a look: about 3 of 300 stable looks expected
    slow = sum(tail_gate(lengths(rng, BASE, looks=3), lengths(rng, 1.03 * BASE)[0]) for _ in range(300))
    assert slow <= 18  # every completion 3% longer (a slow, benign drift) opens it about 4% of the time


def test_the_tail_gate_reads_prompts_apart_so_long_prompts_are_no_move():
    rng = np.random.default_rng(8)
    centre = np.where(np.arange(PROMPTS) < 4, 6 * BASE, BASE)[:, None]  # four prompts answered at six times length
    opened = sum(tail_gate(lengths(rng, 1.0, looks=3) * centre, lengths(rng, 1.0)[0] * centre) for _ in range(300))
    assert opened <= 9  # every long completion is of a long prompt, in the baseline as in the latest look


def test_the_tail_statistic_by_hand():
    base = np.arange(1.0, 11.0).reshape(1, 1, 10)  # one prompt: its longest tenth is past 9.1, the 10 alone
    now = np.array([[1.0, 2, 3, 4, 5, 6, 7, 20, 20, 20]])  # three of ten past it
    # Mantel-Haenszel, one table: 4 of 20 in the tail, 10 of them the latest look's; 2 expected there
    z = (3 - 2 - 0.5) / math.sqrt(10 * 10 * 4 * 16 / (20**2 * 19))
    share_base, share_now, p = stats.length_tail(base, now, share=0.1)
    assert (share_base, share_now) == (0.1, 0.3) and p == pytest.approx(1 - NormalDist().cdf(z))
    assert stats.length_tail(base, base[0], share=0.1)[2] > 0.5  # no more in the tail than before
    assert stats.length_tail(np.full((1, 1, 10), 5.0), np.full((1, 10), 5.0), share=0.1)[2] == 1.0  # no tail at all
    assert math.isnan(stats.length_tail(np.full(3, np.nan), now, share=0.1)[0])


def test_a_minority_growing_far_is_priced_past_the_last_step():
    rng = np.random.default_rng(9)
    base = lengths(rng, BASE, looks=3)
    now = lengths(rng, BASE)[0]
    now[: PROMPTS // 2, :1] *= 2.5  # an eighth of the completions grow 2.5x, the proxy pays 0.8 a base length
    price = lambda length: 0.8 * np.maximum(0.0, length / BASE - 1)  # noqa: E731
    res = stats.length_test(base, now, price(np.concatenate([base, now[None]])) + rng.normal(0, 0.1, (4, PROMPTS, K)),
                            np.zeros((4, PROMPTS, K)), np.concatenate([base, now[None]]), rng=rng, n_boot=300,
                            alpha=0.001, delta=defaults.MONITOR_DELTA, pct=defaults.MONITOR_LENGTH_PCT,
                            shift=defaults.MONITOR_LENGTH_SHIFT, bins=defaults.MONITOR_LENGTH_BINS,
                            tail=defaults.MONITOR_LENGTH_TAIL, tail_alpha=defaults.MONITOR_LENGTH_TAIL_ALPHA)
    assert res is not None and res["tail_p"] <= defaults.MONITOR_LENGTH_TAIL_ALPHA
    bought = price(now).mean() - price(base).mean()
    assert res["fired"] and res["gap_from_length"] == pytest.approx(bought, rel=0.3), (res, bought)


def test_benign_growth_of_a_minority_opens_the_tail_gate_and_stays_growth():
    rng = np.random.default_rng(10)
    base = lengths(rng, BASE, looks=3)
    now = lengths(rng, BASE)[0]
    now[: PROMPTS // 2, :1] *= 2.5  # the same minority grows, and the gold pays for it as much as the proxy
    read = np.concatenate([base, now[None]])
    gold = 0.8 * np.maximum(0.0, read / BASE - 1)
    res = stats.length_test(base, now, rng.normal(0, 0.1, read.shape), gold, read, rng=rng, n_boot=300,
                            alpha=0.01, delta=defaults.MONITOR_DELTA, pct=defaults.MONITOR_LENGTH_PCT,
                            shift=defaults.MONITOR_LENGTH_SHIFT, bins=defaults.MONITOR_LENGTH_BINS,
                            tail=defaults.MONITOR_LENGTH_TAIL, tail_alpha=defaults.MONITOR_LENGTH_TAIL_ALPHA)
    assert res is not None and res["verdict"] == "growth" and not res["fired"]
    assert res["gold_from_length"] > defaults.MONITOR_DELTA  # reported: the gold pays for the growth


def test_the_tail_gate_is_armed_only_with_a_gold_judge():
    settings = dict(window=3, delta=0.1, length_pct=0.25, kl_budget=None, n_boot=10, n_perm=10, scan_min=8, seed=0)
    assert ch.Settings(**settings, has_gold=True).tail() == defaults.MONITOR_LENGTH_TAIL
    assert ch.Settings(**settings, has_gold=False).tail() is None  # without gold the test reads the proxy itself


def move_read(paid: float, *, gap_se: float = 0.1, price_se: float = 0.01, tail_p: float | None = 1e-6,
              alpha: float = 0.001, n: int = 32) -> dict:
    return stats._move_read({"gap_from_length": paid, "gap_se": gap_se, "price_se": price_se}, n, alpha=alpha,
                            delta=defaults.MONITOR_DELTA, tail_p=tail_p)


def test_the_move_is_read_by_the_mean_or_by_the_tail_each_at_half_the_level():
    q_half, q_whole = stats.t_quantile(1 - 0.0005, 31), stats.t_quantile(1 - 0.001, 31)
    wide = move_read(0.3)  # the product's interval is wide: the mean's reading fails, the tail's holds
    assert wide["gap_lo"] == pytest.approx(0.3 - q_half * 0.1) and wide["gap_lo"] < 0
    assert wide["price_lo"] == pytest.approx(0.3 - q_half * 0.01) and wide["price_lo"] > 0
    assert wide["fired"] and wide["read"] == "tail" and wide["verdict"] == "hack"
    assert move_read(0.3, gap_se=0.05)["read"] == "mean"  # 0.3 - 3.6 x 0.05 > 0: the mean's reading first
    unread = move_read(0.3, tail_p=None)  # no tail (no gold judge): the mean's reading alone, at the whole level
    assert unread["gap_lo"] == pytest.approx(0.3 - q_whole * 0.1) and not unread["fired"]
    assert unread["read"] is None and unread["verdict"] == "growth"
    assert move_read(0.3, gap_se=0.3 / (q_whole + 0.01), tail_p=None)["fired"]  # just inside the whole level
    assert not move_read(0.3, gap_se=0.3 / (q_whole + 0.01), price_se=1.0)["fired"]  # outside half of it
    with_tail = dict(gap_se=0.3 / (q_whole + 0.01), tail_p=0.0009)  # the tail at 0.0009 > 0.0005: not read
    assert not move_read(0.3, **with_tail)["fired"]
    assert move_read(0.3, tail_p=0.0005)["fired"]  # at exactly half the level it is read
    assert not move_read(0.3, price_se=0.3 / q_half)["fired"]  # the price's lower bound at zero: not shown paid
    assert not move_read(0.3, price_se=0.3 / (q_half - 0.01))["fired"]  # below zero
    assert move_read(0.3, price_se=0.3 / (q_half + 0.01))["fired"]  # just above zero
    assert move_read(defaults.MONITOR_DELTA, gap_se=0.001)["fired"]  # a gap of delta is enough ...
    assert not move_read(0.099, gap_se=0.001)["fired"]  # ... below it neither reading fires
    assert not move_read(0.099, gap_se=0.5)["fired"]
    assert move_read(0.3, n=3)["price_lo"] == pytest.approx(0.3 - stats.t_quantile(1 - 0.0005, 2) * 0.01)


def minority(seed: int, *, gold_pays: bool) -> dict:
    """Half the prompts, two of their four completions doubling, at a wide spread of length (log-normal sd
    0.4), a proxy paying 1 per base length beyond gold (or the gold paying it as much), alpha 5e-4."""
    rng = np.random.default_rng(seed)
    base, now = lengths(rng, BASE, looks=3, sd=0.4), lengths(rng, BASE, sd=0.4)[0]
    now[: PROMPTS // 2, :2] *= 2.0
    read = np.concatenate([base, now[None]])
    paid = 1.0 * np.maximum(0.0, read / BASE - 1)
    noise = rng.normal(0, 0.1, read.shape)
    resid, gold = (noise, paid) if gold_pays else (paid + noise, np.zeros(read.shape))
    res = stats.length_test(base, now, resid, gold, read, rng=rng, n_boot=300, alpha=5e-4,
                            delta=defaults.MONITOR_DELTA, pct=defaults.MONITOR_LENGTH_PCT,
                            shift=defaults.MONITOR_LENGTH_SHIFT, bins=defaults.MONITOR_LENGTH_BINS,
                            tail=defaults.MONITOR_LENGTH_TAIL, tail_alpha=defaults.MONITOR_LENGTH_TAIL_ALPHA)
    assert res is not None
    return res


def test_a_share_of_completions_growing_is_shown_bought_by_the_tail_where_the_mean_is_too_wide():
    hacked = [minority(seed, gold_pays=False) for seed in range(30)]
    by_tail = [r for r in hacked if r.get("read") == "tail"]
    assert len(by_tail) >= 6 and sum(r["fired"] for r in hacked) >= 14  # 10 and 18 of 30 when written
    for r in by_tail:
        assert r["gap_lo"] <= 0 < r["price_lo"] and r["tail_p"] <= 5e-4 / 2
        assert r["gap_from_length"] >= defaults.MONITOR_DELTA and r["price_se"] < r["gap_se"] / 5
    honest = [minority(seed, gold_pays=True) for seed in range(30)]
    assert not any(r["fired"] for r in honest)  # the same move, the gold paying for it: the price is nil


def test_stable_lengths_under_a_proxy_paying_per_word_are_not_read_as_bought():
    rng = np.random.default_rng(11)
    price = lambda length: 1.0 * np.maximum(0.0, length / BASE - 1)  # noqa: E731
    fired = 0
    for _ in range(100):
        base, now = lengths(rng, BASE, looks=3, sd=0.4), lengths(rng, BASE, sd=0.4)[0]
        read = np.concatenate([base, now[None]])
        res = stats.length_test(base, now, price(read) + rng.normal(0, 0.1, read.shape), np.zeros(read.shape),
                                read, rng=rng, n_boot=100, alpha=0.002, delta=defaults.MONITOR_DELTA,
                                pct=defaults.MONITOR_LENGTH_PCT, shift=defaults.MONITOR_LENGTH_SHIFT,
                                bins=defaults.MONITOR_LENGTH_BINS, tail=defaults.MONITOR_LENGTH_TAIL,
                                tail_alpha=defaults.MONITOR_LENGTH_TAIL_ALPHA)
        fired += bool(res and res["fired"])
    assert fired <= 1  # the price is read sharply, but no move: the tail's reading is the move's test


def test_an_alarm_read_by_the_tail_says_so():
    from whileai.domain.monitor._report import alarm_message

    alarm = {"kind": "length", "drift": 0.15, "moved_share": 0.12, "length_base": 15.0, "length_now": 17.2,
             "gap_from_length": 0.3, "gap_lo": -0.05, "slope": 0.14, "read": "tail", "tail_base": 0.1,
             "tail_now": 0.22, "tail_p": 2e-5, "price_lo": 0.29}
    text = alarm_message(alarm, "words")
    assert "read by the tail: 22% of them past the baseline's longest 10%, p 2.0e-05" in text
    assert "lower bound +0.290" in text and "-0.050" not in text
    assert "(lower bound -0.050)" in alarm_message(dict(alarm, read="mean"), "words")


def mantel_haenszel_p(tables: list[tuple[int, int, int, int]]) -> float:
    """The one-sided p-value by hand from per-prompt (n_base, in_base, n_now, in_now) tables, continuity corrected;
    a table of under two completions adds nothing (its variance is zero, its expected count its own count)."""
    observed = expected = var = 0.0
    for n_base, in_base, n_now, in_now in tables:
        total, in_tail = n_base + n_now, in_base + in_now
        observed += in_now
        expected += n_now * in_tail / total if total else 0.0
        var += n_now * n_base * in_tail * (total - in_tail) / (total**2 * (total - 1)) if total > 1 else 0.0
    return 1 - NormalDist().cdf((observed - expected - 0.5) / math.sqrt(var))


def test_the_tail_statistic_by_hand_over_two_prompts_read_apart():
    # two baseline looks of two prompts, three completions each: the edge (upper quarter) is 11, past it only
    # prompt 1's 12s; the latest look puts one of prompt 0's and two of prompt 1's past it
    base = np.array([[[1.0, 2, 3], [10, 11, 12]], [[1, 2, 3], [10, 11, 12]]])
    now = np.array([[1.0, 2, 20], [12, 12, 10]])
    share_base, share_now, p = stats.length_tail(base, now, share=0.25)
    assert (share_base, share_now) == (pytest.approx(2 / 12), pytest.approx(3 / 6))
    assert p == pytest.approx(mantel_haenszel_p([(6, 0, 3, 1), (6, 2, 3, 2)]))
    assert p != pytest.approx(mantel_haenszel_p([(12, 2, 6, 3)]))  # not the tables pooled into one


def test_the_tail_statistic_reads_other_shapes_as_one_prompt():
    now = np.array([1.0, 2, 20])  # base 1 .. 10: its longest tenth is past 9.1; 10 of 13 completions, 2 past it
    assert stats.length_tail(np.arange(1.0, 11.0), now, share=0.1)[2] == pytest.approx(
        mantel_haenszel_p([(10, 1, 3, 1)]))
    base, now = np.arange(1.0, 13.0).reshape(2, 2, 3), np.array([[1.0, 20], [3, 4], [20, 6]])  # (3, 2) after (2, 3)
    assert stats.length_tail(base, now, share=0.25) == stats.length_tail(base.ravel(), now.ravel(), share=0.25)


def test_the_tail_statistic_counts_prompts_with_few_completions_without_a_warning():
    base = np.array([[[1.0, 2], [np.nan, np.nan], [np.nan, np.nan], [1, np.nan]]])
    now = np.array([[9.0, 9], [np.nan, np.nan], [9, np.nan], [9, np.nan]])  # none, one and two completions
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0 / 0 of an empty prompt's table reaches the user
        share_base, share_now, p = stats.length_tail(base, now, share=0.5)  # the edge is 1: past it the 2 and 9s
        assert (share_base, share_now) == (pytest.approx(1 / 3), 1.0)
        assert p == pytest.approx(mantel_haenszel_p([(2, 1, 2, 2), (0, 0, 0, 0), (0, 0, 1, 1), (1, 0, 1, 1)]))
        assert stats.length_tail(np.full((1, 1, 10), 5.0), np.full((1, 10), 5.0), share=0.1)[2] == 1.0  # no tail
    assert stats.length_tail(np.full(3, np.nan), now, share=0.1)[2] == 1.0  # no baseline: nothing read


def test_the_tail_gate_opens_at_its_level_and_is_shut_by_default():
    base, now = np.arange(1.0, 11.0).reshape(1, 1, 10), np.array([[1.0, 2, 3, 4, 5, 6, 7, 20, 20, 20]])
    p = stats.length_tail(base, now, share=0.1)[2]
    gate = dict(pct=math.inf, shift=math.inf, tail=0.1)
    assert stats.length_moved(base, now, **gate, tail_alpha=p)[2]  # a p-value at exactly the level opens it
    assert not stats.length_moved(base, now, **gate, tail_alpha=p / 2)[2]
    assert not stats.length_moved(base, base[0], **gate)[2]  # no level given: the tail's gate stays shut


def test_the_length_test_reports_what_the_tail_read_and_keeps_its_gate_shut_by_default():
    rng = np.random.default_rng(12)
    base, now = lengths(rng, BASE, looks=3), lengths(rng, BASE)[0]
    read = np.concatenate([base, now[None]])
    res = stats.length_test(base, now, rng.normal(0, 0.1, read.shape), None, read, rng=rng, n_boot=10, alpha=0.01,
                            delta=defaults.MONITOR_DELTA, pct=math.inf, shift=math.inf, bins=4, tail=0.1)
    assert res is not None and res["verdict"] == "stable" and "gap_from_length" not in res
    assert (res["tail_base"], res["tail_now"], res["tail_p"]) == stats.length_tail(base, now, share=0.1)


def test_the_steps_of_length_by_hand():
    base, now = np.array([[[2.0, 4]]]), np.array([[6.0, 8]])  # pooled 2 4 6 8: mean 5, halves at 5
    step, x = stats._length_steps(base, now, np.array([[[2.0, 6, 8, np.nan]]]), 2)
    # one bin past the edge 5 (the one below it the reference) and the length past 5, over the mean 5
    assert x.tolist() == [[[[0.0, 0.0], [1.0, 0.2], [1.0, 0.6], [1.0, 0.0]]]]
    assert step.tolist() == [[1.0, 0.4]]  # the latest look's mean (1, 0.4) less the baseline's (0, 0)
    step, x = stats._length_steps(np.array([[[0.2, 0.4]]]), np.array([[0.6, 0.8]]), np.array([[[0.2, 0.8]]]), 1)
    assert x.tolist() == [[[[0.0], [pytest.approx(0.6 / 0.5)]]]]  # no edges: the line from the shortest, over 0.5
    zeros = np.zeros((1, 1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stats._length_steps(zeros, zeros[0], zeros, 2)[1][..., -1].tolist() == [[[0.0, 0.0]]]  # all empty


def test_a_gap_lower_bound_of_exactly_zero_is_not_shown_bought():
    q = stats.t_quantile(1 - 0.001, 31)
    at_zero = move_read(0.3, gap_se=0.3 / q, tail_p=None)
    assert at_zero["gap_lo"] == 0.0 and not at_zero["fired"] and at_zero["read"] is None
