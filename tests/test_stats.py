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
    assert "prompts (more rows, or a larger dataset.holdout share), or drop" in few["warning"]
    own = holdout_power(2, growth="more entries")["warning"]
    assert "prompts (more entries), or drop" in own and "dataset.holdout" not in own


def test_one_rate_format_for_every_surface():
    from whileai.core.stats import change_text, describe, rate_text

    assert rate_text(0) == "0.000" and rate_text(0.9) == "0.900" and rate_text(None) == "-" and rate_text(True) == "-"
    assert change_text(0, 0.9) == "0.000 -> 0.900" and describe(0, 0.9, None) == "0.000 -> 0.900"


# --------------------------------------------------------------------------- every branch pinned (scripts/mutation.py)


def test_the_exact_ends_of_the_interval_are_not_left_to_rounding():
    # for these n the formula itself lands a hair off 0 and 1: the ends are set, not computed
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 13)[0] == 0.0
    assert wilson(13, 13)[1] == 1.0 and wilson(15, 15)[1] == 1.0
    with pytest.raises(ValueError, match=r"wilson\(k=0, n=-1\)"):
        wilson(0, -1)
    with pytest.raises(ValueError, match=r"wilson\(k=-1, n=3\)"):
        wilson(-1, 3)


def test_a_held_out_result_is_this_exact_dict():
    test = "exact McNemar (two-sided binomial on the prompts that changed)"
    assert holdout_result([1, 0, 1, 0], [1, 1, 0, 1]) == {
        "n": 4, "confidence": 0.95,
        "before": {"passed": 2, "n": 4, "rate": 0.5, "ci95": list(wilson(2, 4))},
        "after": {"passed": 3, "n": 4, "rate": 0.75, "ci95": list(wilson(3, 4))},
        "paired": {"test": test, "worsened": 1, "improved": 2, "p": 1.0},
    }
    only_before = holdout_result([1, True, 0], None)
    assert only_before == {"n": 3, "confidence": 0.95, "after": None, "paired": None,
                           "before": {"passed": 2, "n": 3, "rate": 2 / 3, "ci95": list(wilson(2, 3))}}
    only_after = holdout_result([], [0, 1])
    assert only_after["n"] == 2 and only_after["before"] is None and only_after["after"]["passed"] == 1
    assert holdout_result([], []) is None


def test_the_shown_p_and_interval_texts_at_their_edges():
    from whileai.core.stats import certainty_text, interval_text

    assert p_text(0.001) == "p = 0.001" and p_text(0.000999) == "p < 0.001"
    assert interval_text(None) is None and interval_text({"n": 0}) is None and interval_text("x") is None
    assert interval_text({"passed": 1, "n": 2, "ci95": [0.1, 0.9]}) == "1/2; 95% CI 0.10-0.90"
    before_only = {"before": {"passed": 1, "n": 2, "ci95": [0.1, 0.9]}, "paired": None}
    assert certainty_text(before_only) == "1/2; 95% CI 0.10-0.90"
    assert certainty_text({"after": None, "paired": {"p": "x"}}) is None
    assert certainty_text({"paired": {"p": 0.5}}) == "paired p = 0.500"
    assert certainty_text([1]) is None
    assert status_text(None, None) == "unknown" and status_text(None, {"lines": [1], "passed": 1}) == "unknown · expect passed"


def test_significance_is_worded_from_the_paired_test_alone():
    from whileai.core.stats import significance_word

    gain = holdout_result([0] * 40, [1] * 39 + [0])
    loss = holdout_result([1] * 40, [0] * 39 + [1])
    assert significance_word(gain) == "significant gain" and significance_word(loss) == "significant loss"
    assert significance_word(gain, alpha=1e-13) == "no significant change"  # p = 2 / 2^39 = 3.6e-12
    assert significance_word({"paired": {"p": 0.05, "improved": 9, "worsened": 0}}) == "no significant change"
    assert significance_word({"paired": {"p": 0.049, "improved": 9, "worsened": 0}}) == "significant gain"
    assert significance_word({"paired": {"p": 0.01, "improved": 3, "worsened": 3}}) == "no significant change"
    assert significance_word({"paired": {"p": 0.01, "improved": None, "worsened": 2}}) == "significant loss"
    assert significance_word({"paired": {"p": 0.01, "improved": 1, "worsened": None}}) == "significant gain"
    assert significance_word({"paired": {"p": 0.01, "improved": 1, "worsened": 3}}) == "significant loss"
    assert significance_word({"paired": {"p": 0.01, "improved": 0, "worsened": None}}) == "significant loss"
    assert significance_word({"paired": {"p": 0.01, "improved": 2, "worsened": 0}}, alpha="0.001") == "no significant change"
    for nothing in (None, {}, {"paired": None}, {"paired": {"p": None}}, {"paired": {"p": "0.01"}}, [("paired", 1)]):
        assert significance_word(nothing) is None, nothing


def test_the_judged_line_puts_the_verdict_beside_the_figure():
    from whileai.core.stats import judged_text

    gain = holdout_result([0] * 40, [1] * 39 + [0])
    assert judged_text(0.0, 0.975, gain) == "0.000 -> 0.975, significant gain (39/40; 95% CI 0.87-1.00; paired p < 0.001)"
    assert judged_text(0.5, None, None) == "0.500 -> -"
    assert judged_text(0.5, 0.5, {"paired": None}) == "0.500 -> 0.500"


def test_group_results_splits_the_outcomes_by_the_row_field():
    from whileai.core.stats import group_results

    got = group_results([0, 0, 1, 0], [1, 1, 1, 0], ["a", "a", "b", None], "category")
    assert got == {"field": "category", "prompts": ["a", "a", "b", "(no category)"], "groups": {
        "(no category)": holdout_result([0], [0]), "a": holdout_result([0, 0], [1, 1]), "b": holdout_result([1], [1])}}
    assert list(got["groups"]) == ["(no category)", "a", "b"], "sorted by value"
    after_only = group_results(None, [1, 0, 1], [2, 1, 2], "level")
    assert after_only["groups"] == {"1": holdout_result(None, [0]), "2": holdout_result(None, [1, 1])}
    assert after_only["prompts"] == ["2", "1", "2"]
    before_only = group_results([1, 0], [], ["x", "y"], "f")
    assert before_only["groups"]["x"] == holdout_result([1], None)
    for before, after, groups in (([1], [1], None), ([1], [1], []), ([1, 0], [1, 0], [None, None]),
                                  (None, None, ["a"]), ([1, 0], [1, 0], ["a"]), ([1], [1, 0], ["a"]),
                                  ([1, 0], [1], ["a", "b"])):
        assert group_results(before, after, groups, "f") is None, (before, after, groups)
    assert group_results([1, 0], [1, 0], [None, "a"], "f")["prompts"] == ["(no f)", "a"]


def test_group_lines_are_a_heading_and_one_aligned_line_a_group():
    from whileai.core.stats import group_lines

    by_group = {"field": "category", "groups": {"x": holdout_result([0] * 12, [1] * 12),
                                                "longname": holdout_result([1, 0], [1, 1]), "skipped": "not a dict"}}
    assert group_lines(by_group) == [
        "per category (3):",
        "  x         n=12   0.000 -> 1.000, significant gain (12/12; 95% CI 0.76-1.00; paired p < 0.001)",
        "  longname  n=2    0.500 -> 1.000, no significant change (2/2; 95% CI 0.34-1.00; paired p = 1.000)",
    ]
    assert group_lines({"groups": {"a": {}, "skipped": 1, "b": {"n": 3}}}) == [
        "per group (3):", "  a        n=None - -> -", "  b        n=3    - -> -"]
    assert group_lines({"groups": {"a": {}, "b": {"n": 3}}}) == ["per group (2):", "  a  n=None - -> -",
                                                                "  b  n=3    - -> -"], "two groups are enough"
    one = {"field": "f", "groups": {"a": holdout_result([0], [1])}}
    for nothing in (None, [], {"groups": None}, {"groups": []}, one):
        assert group_lines(nothing) == [], nothing


def test_constraints_text_names_each_package_that_differs_in_name_order():
    from whileai.core.stats import constraints_text

    differ = {"zz": {"pinned": "0", "installed": "1"}, "trl": {"pinned": "1.0", "installed": None},
              "accelerate": {"pinned": "1", "installed": "2"}, 3: "odd"}
    assert constraints_text(differ) == ("installed packages differ from constraints.txt: 3 not installed (pinned None), "
                                        "accelerate 2 (pinned 1), trl not installed (pinned 1.0), zz 1 (pinned 0)")
    assert constraints_text({}) is None and constraints_text(None) is None and constraints_text([("a", 1)]) is None


#: a runner's record in each state of its comparison with constraints.txt, as the runner writes it now and did before
_PINS_FOUND = {"name": "constraints.txt", "found": True}
_DIFFER = {"torch": {"pinned": "2.13.0", "installed": "2.14.1"}}
CONSTRAINTS_RECORDS = {
    "all match": {"constraints_differ": {}, "constraints_file": _PINS_FOUND},
    "differs": {"constraints_differ": _DIFFER, "constraints_file": _PINS_FOUND},
    "no file": {"constraints_differ": None, "constraints_file": {"name": "constraints.txt", "found": False}},
    "older, differs": {"constraints_differ": _DIFFER},  # before constraints_file: a dict was still compared
    "older, null": {"constraints_differ": None},  # before constraints_file: no file, or not recorded; unknown which
    "older, absent": {"spec": {}},  # before constraints_differ
}


def test_constraints_state_tells_no_file_from_not_recorded():
    from whileai.core.stats import constraints_state

    assert {name: constraints_state(record) for name, record in CONSTRAINTS_RECORDS.items()} == {
        "all match": "compared", "differs": "compared", "no file": "no file", "older, differs": "compared",
        "older, null": "not recorded", "older, absent": "not recorded"}
    assert constraints_state(None) == "not recorded" and constraints_state([]) == "not recorded"


def test_constraints_words_say_no_file_and_not_recorded_apart():
    from whileai.core.stats import constraints_words

    assert {name: constraints_words(record) for name, record in CONSTRAINTS_RECORDS.items()} == {
        "all match": "none",
        "differs": "installed packages differ from constraints.txt: torch 2.14.1 (pinned 2.13.0)",
        "no file": "no constraints.txt to compare with",
        "older, differs": "installed packages differ from constraints.txt: torch 2.14.1 (pinned 2.13.0)",
        "older, null": None, "older, absent": None}


def test_the_smallest_significant_change_at_its_edges():
    from whileai.core.stats import smallest_significant_change

    assert smallest_significant_change(10, 0.0625) == 6, "p must be under alpha: 2 / 2^5 = 0.0625 is not"
    assert smallest_significant_change(3, 1) == 2, "alpha = 1 is accepted: (0, 1]"
    assert smallest_significant_change(0) is None
    for n in (True, -1, 1.5, "3"):
        with pytest.raises(ValueError, match=r"n=.* is not a count of held-out prompts; pass an int >= 0"):
            smallest_significant_change(n)
    for alpha in (0, 0.0, -0.1, 1.5, 2):
        with pytest.raises(ValueError, match=r"alpha=.* is outside \(0, 1\]; pass a significance level"):
            smallest_significant_change(10, alpha)


def test_holdout_power_is_this_exact_dict():
    from whileai.core.stats import holdout_power

    assert holdout_power(40, unit="pair") == {
        "n": 40, "unit": "pair", "alpha": 0.05, "min_change": 6, "min_gain": 0.15, "warning": None,
        "text": "40 held-out pair(s): the smallest change that can be significant at p < 0.05 (exact McNemar) is "
                "6 pair(s) turning from wrong to right with none the other way (a gain of 0.150)"}
    assert holdout_power(20, alpha=0.001)["text"] == (
        "20 held-out prompt(s): the smallest change that can be significant at p < 0.001 (exact McNemar) is "
        "11 prompt(s) turning from fail to pass with none the other way (a gain of 0.550)")
    assert holdout_power(20, alpha=0.001)["alpha"] == 0.001 and holdout_power(20, alpha=0.001)["min_change"] == 11
    assert holdout_power(2) == {
        "n": 2, "unit": "prompt", "alpha": 0.05, "min_change": None, "min_gain": None,
        "text": "2 held-out prompt(s): no change on them can be significant at p < 0.05 (exact McNemar)",
        "warning": "no result on 2 held-out prompt(s) can be significant at p < 0.05: exact McNemar needs at least "
                   "6 prompts that change the same way. Give the held-out side more prompts (more rows, or a larger "
                   "dataset.holdout share), or drop expect.holdout_gain_significant"}
    tiny = holdout_power(50, alpha=1e-30)  # 2 / 2^k < 1e-30 from k = 101 on: more prompts than 50
    assert tiny["min_change"] is None and "needs at least 101 prompts" in tiny["warning"]
    assert holdout_power(0)["min_gain"] is None and holdout_power(0)["min_change"] is None
