"""whileai.core.stats against cases computed by hand: Wilson bounds, exact McNemar p, the one-line wording."""

from __future__ import annotations

import math

import pytest

from whileai.core.stats import describe, holdout_result, mcnemar_exact, p_text, status_text, wilson

Z = 1.959963984540054  # the 97.5% normal quantile


def _wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    p = k / n
    center = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return center - half, center + half


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 10, 0.0, 0.2775),     # upper = z^2 / (n + z^2) = 3.8415 / 13.8415
    (5, 10, 0.2366, 0.7634),  # center 0.5, half 1.4160 * sqrt(0.025 + 0.0096) = 0.2634
    (1, 4, 0.0456, 0.6994),   # center 0.3725, half 0.3269
    (39, 40, 0.8712, 0.9956),  # the issue's sft_tooluse result: shown 0.87-1.00
    (10, 10, 0.7225, 1.0),
])
def test_wilson_bounds_match_the_hand_computed_ones(k, n, low, high):
    got = wilson(k, n)
    assert got == pytest.approx((low, high), abs=1e-4)
    if 0 < k < n:
        assert got == pytest.approx(_wilson_by_hand(k, n), abs=1e-12)


def test_wilson_edges():
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0
    lo80, hi80 = wilson(5, 10, confidence=0.8)
    lo95, hi95 = wilson(5, 10)
    assert lo95 < lo80 < 0.5 < hi80 < hi95
    with pytest.raises(ValueError, match="k must be a count from 0 to n"):
        wilson(6, 5)


@pytest.mark.parametrize(("b", "c", "p"), [
    (0, 0, 1.0),                 # nothing changed
    (0, 5, 2 / 32),              # 2 * C(5,0) / 2^5 = 0.0625: five of five is not p < 0.05
    (0, 6, 2 / 64),              # 0.03125
    (1, 5, 2 * (1 + 6) / 64),    # 0.21875
    (5, 1, 2 * (1 + 6) / 64),    # symmetric
    (3, 9, 2 * (1 + 12 + 66 + 220) / 4096),  # 0.14599609375
    (2, 2, 1.0),                 # 2 * 11 / 16 > 1: capped
    (0, 39, 2 / 2**39),          # the issue's 0.000 -> 0.975: 39 of 40 prompts improved, none worsened
])
def test_exact_mcnemar_p_matches_the_binomial_tail_by_hand(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_mcnemar_refuses_negative_counts():
    with pytest.raises(ValueError, match="counts of changed pairs"):
        mcnemar_exact(-1, 2)


def test_holdout_result_counts_the_prompts_that_changed():
    before = [0, 0, 1, 1, 0, 1]
    after = [1, 1, 1, 0, 0, 1]
    result = holdout_result(before, after)
    assert result["n"] == 6
    assert result["before"]["passed"] == 3 and result["after"]["passed"] == 4
    assert result["before"]["ci95"] == pytest.approx(list(wilson(3, 6)))
    assert result["paired"]["improved"] == 2 and result["paired"]["worsened"] == 1
    assert result["paired"]["p"] == pytest.approx(mcnemar_exact(1, 2)) == 1.0
    assert holdout_result(None, None) is None
    assert holdout_result([1, 0], [1, 0, 1])["paired"] is None, "no paired test across different prompt sets"


def test_describe_reads_like_the_issue_line():
    result = holdout_result([0] * 40, [1] * 39 + [0])
    assert describe(0.0, 0.975, result) == "0.000 -> 0.975 (39/40; 95% CI 0.87-1.00; paired p < 0.001)"
    small = holdout_result([0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0])
    assert describe(0.0, 5 / 6, small).endswith("(5/6; 95% CI 0.44-0.97; paired p = 0.062)")
    assert describe(0.25, 0.5, None) == "0.250 -> 0.500"
    assert p_text(0.0312) == "p = 0.031" and p_text(1e-9) == "p < 0.001"


def test_a_failed_expect_never_reads_plain_done():
    assert status_text("done", {"passed": False, "lines": [{"key": "status"}]}) == "done · expect failed"
    assert status_text("done", {"passed": True, "lines": [{"key": "status"}]}) == "done · expect passed"
    assert status_text("done", None) == "done"
    assert status_text("failed", {"passed": False, "lines": []}) == "failed"


def test_the_smallest_significant_change_is_the_first_count_mcnemar_calls_significant():
    from whileai.core.stats import holdout_power, mcnemar_exact, smallest_significant_change

    for n in range(0, 60):
        found = smallest_significant_change(n, 0.05)
        brute = next((k for k in range(1, n + 1) if mcnemar_exact(0, k) < 0.05), None)
        assert found == brute, n
    assert smallest_significant_change(40) == 6 and smallest_significant_change(5) is None
    assert smallest_significant_change(40, 0.001) == 11
    few = holdout_power(2)
    assert few["min_change"] is None and "no result on 2 held-out prompt(s) can be significant" in few["warning"]
    many = holdout_power(40)
    assert many["warning"] is None and many["min_change"] == 6 and "(a gain of 0.150)" in many["text"]


def test_one_rate_format_for_every_surface():
    from whileai.core.stats import change_text, describe, rate_text

    assert rate_text(0) == "0.000" and rate_text(0.9) == "0.900" and rate_text(None) == "-" and rate_text(True) == "-"
    assert change_text(0, 0.9) == "0.000 -> 0.900" and describe(0, 0.9, None) == "0.000 -> 0.900"
