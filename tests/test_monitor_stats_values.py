"""The monitor's statistics (whileai/domain/monitor/_stats.py) on fixed, seeded inputs, each answer pinned to
the value it gives now (to 1e-9), beside the few closed forms that can be checked by hand: the alpha-spending series,
Student's t quantiles, a centred row. A change to any formula moves one of these numbers; a change that should move
them is recorded on purpose (``python tests/test_monitor_stats_values.py --record`` rewrites EXPECTED_FILE), with the
reason in its commit. Fast: small inputs, a few hundred resamples.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from _recorded import load, record_main, same

from whileai.domain.monitor import _stats as st

nan = math.nan


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _inputs() -> dict[str, np.ndarray]:
    """Six prompts of four completions over three baseline looks and the latest, drawn once from seed 7."""
    r = _rng(7)
    p, k, e = 6, 4, 3
    v: dict[str, np.ndarray] = {}
    v["base"] = r.normal(0.0, 0.2, p)
    v["now"] = v["base"] + r.normal(0.3, 0.1, p)
    v["now_nan"] = v["now"].copy()
    v["now_nan"][2] = np.nan
    v["gw"] = r.normal(0.6, 0.05, (4, p))
    v["gn"] = v["gw"][1] - r.normal(0.25, 0.05, p)
    v["pw"] = r.normal(0.5, 0.05, (4, p))
    v["pn"] = v["pw"][1] + r.normal(0.0, 0.02, p)
    v["lb"] = r.integers(20, 40, (e, p, k)).astype(float)
    v["ln"] = v["lb"][0] * 1.6 + r.integers(0, 5, (p, k))
    v["length"] = np.concatenate([v["lb"], v["ln"][None]])
    v["gold"] = r.normal(0.5, 0.1, v["length"].shape)
    v["resid"] = 0.01 * (v["length"] - 30) + r.normal(0, 0.02, v["length"].shape)
    v["resid_flat"] = r.normal(0, 0.001, v["length"].shape)
    v["kl"] = r.gamma(2.0, 0.05, p)
    n = 48
    v["cells"] = np.repeat(np.arange(12), 4)
    v["x"] = (r.random((n, 5)) < 0.4).astype(float)
    v["res"] = 0.3 * v["x"][:, 1] + r.normal(0, 0.1, n)
    v["groups"] = v["cells"] % 6
    v["cov"] = r.integers(5, 50, n).astype(float)
    v["pres"] = (r.random((n, 2)) < 0.5).astype(float)
    v["res2"] = 0.2 * v["pres"][:, 0] + r.normal(0, 0.05, n)
    v["across"] = np.repeat((np.arange(12) % 2)[:, None], 4, axis=0).astype(float)
    # NaN residuals: one completion of most cells, three of one cell, all of prompt 5 at the latest look
    v["resid_nan"] = v["resid"].copy()
    v["resid_nan"][:, :, 0] = np.nan
    v["resid_nan"][0, 1, 1:] = np.nan
    v["resid_nan"][3, 5, :] = np.nan
    v["res_nan"] = v["res"].copy()
    v["res_nan"][[0, 4, 5, 6]] = np.nan
    # endorsed features: A varies within the cells (eval, prompt), B is constant within each and turns on at eval 1
    ev = np.repeat(np.arange(2), 12)
    v["e_cells"] = ev * 3 + np.repeat(np.tile(np.arange(3), 2), 4)
    v["e_groups"] = v["e_cells"] % 3
    a = (r.random(24) < 0.5).astype(float)
    b = (ev == 1).astype(float)
    v["e_presence"] = np.stack([a, b], axis=1)
    v["e_resid"] = 0.2 * a + 0.3 * b + r.normal(0, 0.02, 24)
    return v


V = _inputs()
LENGTH = dict(n_boot=300, alpha=0.05, delta=0.02, pct=0.2, shift=0.3)

#: name -> the call whose answer is pinned below
CASES = {
    "spent_alpha": lambda: [st.spent_alpha(0.05, m) for m in (1, 2, 3, 10)],
    "t_quantile": lambda: [st.t_quantile(p, df) for p, df in ((0.975, 10), (0.95, 3), (0.5, 5), (0.99, 1.5),
                                                               (0.025, 30))],
    "mean_bounds": lambda: st.mean_bounds(V["now"][:, None], rng=_rng(1), n_boot=300, alpha=0.05),
    "mean_bounds_nan": lambda: st.mean_bounds(V["now_nan"][:, None], rng=_rng(1), n_boot=300, alpha=0.1),
    "mean_bounds_one": lambda: st.mean_bounds(V["now"][:1, None], rng=_rng(1), n_boot=300, alpha=0.1),
    "divergence": lambda: st.divergence_test(V["base"], V["now"], rng=_rng(2), n_boot=300, alpha=0.05, delta=0.1),
    "divergence_small": lambda: st.divergence_test(V["base"], V["base"] + 0.01, rng=_rng(2), n_boot=300, alpha=0.05,
                                                   delta=0.1),
    "divergence_none": lambda: st.divergence_test(V["base"][:1], V["now"][:1], rng=_rng(2), n_boot=300, alpha=0.05,
                                                  delta=0.1),
    "gold_decline": lambda: st.gold_decline_test(V["gw"], V["gn"], V["pw"], V["pn"], rng=_rng(3), n_boot=300,
                                                 alpha=0.05, delta=0.1, hold=0.05),
    "gold_decline_proxy_fell": lambda: st.gold_decline_test(V["gw"], V["gn"], V["pw"], V["pn"] - 0.2, rng=_rng(3),
                                                            n_boot=300, alpha=0.05, delta=0.1, hold=0.05),
    "gold_decline_held": lambda: st.gold_decline_test(V["gw"], V["gw"][0], V["pw"], V["pn"], rng=_rng(3), n_boot=300,
                                                      alpha=0.05, delta=0.1, hold=0.05),
    "centre_within": lambda: st.centre_within(np.array([[1.0, 2.0, np.nan, 6.0], [np.nan] * 4])),
    "centre_within_axis0": lambda: st.centre_within(np.array([[1.0, 2.0], [3.0, np.nan]]), axis=0),
    "length_moved": lambda: [st.length_moved(V["lb"], V["ln"], pct=0.2, shift=0.3),
                             st.length_moved(V["lb"], V["lb"][0], pct=0.2, shift=0.3),
                             st.length_moved(V["lb"], V["lb"][0] * 1.1, pct=0.2, shift=0.3),
                             st.length_moved(V["lb"], V["lb"][0] * 1.1, pct=0.05, shift=0.9)],
    "length_hack": lambda: st.length_test(V["lb"], V["ln"], V["resid"], V["gold"], V["length"], rng=_rng(4), bins=4,
                                          **LENGTH),
    "length_growth": lambda: st.length_test(V["lb"], V["ln"], V["resid_flat"], None, V["length"], rng=_rng(4), bins=3,
                                            **LENGTH),
    "length_stable": lambda: st.length_test(V["lb"], V["lb"][0], V["resid"], V["gold"], V["length"], rng=_rng(4),
                                            bins=4, **LENGTH),
    "kl": lambda: st.kl_test(V["kl"], rng=_rng(5), n_boot=300, alpha=0.05, budget=0.05),
    "kl_under": lambda: st.kl_test(V["kl"], rng=_rng(5), n_boot=300, alpha=0.05, budget=0.2),
    "kl_no_budget": lambda: st.kl_test(V["kl"], rng=_rng(5), n_boot=300, alpha=0.05, budget=None),
    "cell_contribution": lambda: st.cell_contribution(V["x"][:, 1], V["res"], V["cells"], V["groups"], 6),
    "endorsed_payment": lambda: st.endorsed_payment(V["res2"], V["pres"], V["cells"], V["groups"], min_support=4),
    "endorsed_payment_across": lambda: st.endorsed_payment(V["res2"] + 0.3 * V["across"][:, 0], V["across"],
                                                           V["cells"], V["groups"], min_support=4),
    "endorsed_payment_none": lambda: st.endorsed_payment(V["res2"], V["across"], V["cells"], V["groups"] * 0,
                                                         min_support=4),
    "maxt": lambda: st.maxt_scan(V["x"], V["res"], V["cells"], rng=_rng(6), n_perm=200),
    "maxt_cov": lambda: st.maxt_scan(V["x"], V["res"] + 0.01 * V["cov"], V["cells"], rng=_rng(6), n_perm=200,
                                     covariate=V["cov"]),
    "maxt_nonzero": lambda: st.maxt_scan(V["x"], V["res"], V["cells"], rng=_rng(6), n_perm=200,
                                         nonzero=np.nonzero(V["x"])),
    "maxt_none": lambda: st.maxt_scan(V["x"][:3], V["res"][:3], np.arange(3), rng=_rng(6), n_perm=50),
    # edges: the t quantile's guards, two prompts, exact boundaries, NaN, one resample, an empty or flat input
    "t_quantile_edges": lambda: [st.t_quantile(1.0, 5), st.t_quantile(0.0, 5), st.t_quantile(0.975, math.inf),
                                 st.t_quantile(0.975, 0), st.t_quantile(0.975, -1), st.t_quantile(0.975, 0.5),
                                 st.t_quantile(0.975, 1.0)],
    "mean_bounds_two": lambda: st.mean_bounds(V["now"][:2, None], rng=_rng(1), n_boot=300, alpha=0.1),
    "divergence_at_delta": lambda: st.divergence_test(np.zeros(6), np.full(6, 0.25), rng=_rng(2), n_boot=50,
                                                      alpha=0.05, delta=0.25),
    "divergence_flat_no_delta": lambda: st.divergence_test(np.zeros(6), np.zeros(6), rng=_rng(2), n_boot=50,
                                                           alpha=0.05, delta=0.0),
    "gold_decline_one_window": lambda: st.gold_decline_test(V["gw"][:1], V["gn"], V["pw"][:1], V["pn"], rng=_rng(3),
                                                            n_boot=300, alpha=0.05, delta=0.1, hold=0.05),
    "gold_decline_at_bounds": lambda: st.gold_decline_test(np.full((1, 6), 0.5), np.full(6, 0.25),
                                                           np.full((1, 6), 0.5), np.full(6, 0.375), rng=_rng(3),
                                                           n_boot=50, alpha=0.05, delta=0.25, hold=0.5),
    "gold_decline_flat_no_delta": lambda: st.gold_decline_test(np.full((2, 6), 0.5), np.full(6, 0.5),
                                                               np.full((2, 6), 0.5), np.full(6, 0.5), rng=_rng(3),
                                                               n_boot=50, alpha=0.05, delta=0.0, hold=0.5),
    "gold_decline_best_window_not_ok": lambda: st.gold_decline_test(
        np.array([np.full(6, 0.9), np.full(6, 0.75)]), np.full(6, 0.5), np.array([np.full(6, 0.9), np.full(6, 0.5)]),
        np.full(6, 0.5), rng=_rng(3), n_boot=50, alpha=0.05, delta=0.1, hold=0.5),
    "gold_decline_none_ok": lambda: st.gold_decline_test(
        np.array([np.full(6, 0.6), np.full(6, 0.9)]), np.full(6, 0.5), np.array([np.full(6, 0.9), np.full(6, 0.9)]),
        np.full(6, 0.1), rng=_rng(3), n_boot=50, alpha=0.05, delta=0.1, hold=0.5),
    "length_moved_edges": lambda: [st.length_moved([], [1.0], pct=0.2, shift=0.3),
                                   st.length_moved([1.0], [np.nan], pct=0.2, shift=0.3),
                                   st.length_moved([0.0, 0.0], [1.0], pct=0.2, shift=0.3),
                                   st.length_moved([0.5, 0.5], [0.5, 1.5], pct=5.0, shift=0.5),
                                   st.length_moved([1.0, 1.0], [1.0, 2.0], pct=0.5, shift=0.9),
                                   st.length_moved([1, 2], [1, 2], pct=0.0, shift=1.0)],
    "length_nan": lambda: st.length_test(V["lb"], V["ln"], V["resid_nan"], V["gold"], V["length"], rng=_rng(4),
                                         bins=4, **LENGTH),
    "length_two_prompts": lambda: st.length_test(V["lb"][:, :2], V["ln"][:2], V["resid"][:, :2], V["gold"][:, :2],
                                                 V["length"][:, :2], rng=_rng(4), bins=3, **LENGTH),
    "length_one_resample": lambda: st.length_test(V["lb"], V["ln"], V["resid"], None, V["length"], rng=_rng(4), bins=4,
                                                  **{**LENGTH, "n_boot": 1}),
    "length_two_resamples": lambda: st.length_test(V["lb"], V["ln"], V["resid"], None, V["length"], rng=_rng(4),
                                                   bins=4, **{**LENGTH, "n_boot": 2}),
    "length_unchanged": lambda: st.length_test(np.stack([V["lb"][0]] * 3), V["lb"][0], V["resid"], V["gold"],
                                               V["length"], rng=_rng(4), bins=4, **{**LENGTH, "shift": 0.0}),
    "kl_at_budget": lambda: st.kl_test(V["kl"], rng=_rng(5), n_boot=300, alpha=0.05,
                                       budget=st.kl_test(V["kl"], rng=_rng(5), n_boot=300, alpha=0.05, budget=None)["lo"]),
    "cell_contribution_nan": lambda: st.cell_contribution(V["x"][:, 1], V["res_nan"], V["cells"], V["groups"], 8),
    "cell_centre": lambda: [st._cell_centre(np.array([1.0, 3.0, 5.0, 4.0]), np.array([0, 0, 2, 2]), 4),
                            st._cell_centre(np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 5.0]]), np.array([1, 1, 3]), 5)],
    "endorsed_both_ways": lambda: st.endorsed_payment(V["e_resid"], V["e_presence"], V["e_cells"], V["e_groups"],
                                                      min_support=4),
    "endorsed_support_at_min": lambda: [st.endorsed_payment(V["e_resid"], V["e_presence"], V["e_cells"], V["e_groups"],
                                                            min_support=s) for s in (19, 20, 21)],
    "endorsed_two_finite": lambda: st.endorsed_payment(np.array([0.1, 0.4, np.nan]), np.array([[0.0], [1.0], [1.0]]),
                                                       np.array([0, 0, 0]), np.array([0, 0, 0]), min_support=1),
    "endorsed_no_features": lambda: st.endorsed_payment(V["res2"], np.zeros((48, 0)), V["cells"], V["groups"],
                                                        min_support=4),
    "gumbel_tail": lambda: [st._gumbel_tail(np.array([1.0]), np.array([0.5, 1.0, 2.0])),
                            st._gumbel_tail(np.array([1.0, 1.0, 1.0]), np.array([0.5, 1.0, 2.0])),
                            st._gumbel_tail(np.array([]), np.array([0.5])),
                            st._gumbel_tail(np.array([0.0, 1.0, 2.0, 3.0]), np.array([-1.0, 1.5, 4.0, 50.0]))],
    "maxt_flat_columns": lambda: st.maxt_scan(np.column_stack([V["x"][:, 1], np.ones(48), np.zeros(48)]), V["res"],
                                              V["cells"], rng=_rng(6), n_perm=100),
    "maxt_one_perm": lambda: st.maxt_scan(V["x"], V["res"], V["cells"], rng=_rng(6), n_perm=1),
    "maxt_untestable": lambda: st.maxt_scan(np.ones((48, 2)), V["res"], V["cells"], rng=_rng(6), n_perm=20),
    "maxt_nan_nonzero": lambda: st.maxt_scan(V["x"], V["res_nan"], V["cells"] + 3, rng=_rng(6), n_perm=100,
                                             nonzero=np.nonzero(V["x"])),
    "maxt_pairs": lambda: st.maxt_scan(V["x"][:10], V["res"][:10], np.array([0, 0, 1, 1, 2, 2, 3, 4, 5, 5]),
                                       rng=_rng(6), n_perm=100),
    "maxt_two_rows": lambda: st.maxt_scan(V["x"][:3], V["res"][:3], np.array([0, 0, 1]), rng=_rng(6), n_perm=20),
    "maxt_cov_flat": lambda: st.maxt_scan(V["x"], V["res"], V["cells"], rng=_rng(6), n_perm=100,
                                          covariate=np.repeat(np.arange(12.0), 4)),
    "maxt_cov_small": lambda: st.maxt_scan(V["x"], V["res"] + 0.5 * V["cov"] / 500, V["cells"], rng=_rng(6),
                                           n_perm=100, covariate=V["cov"] / 500),
    "maxt_cov_nan": lambda: st.maxt_scan(V["x"], V["res"], V["cells"], rng=_rng(6), n_perm=100,
                                         covariate=np.where(np.arange(48) % 7 == 0, np.nan, V["cov"])),
}


def _plain(value):
    """``value`` as plain lists, floats and dicts; a permutation null (``null_max``) as its summary."""
    if isinstance(value, dict):
        return {k: (_summary(v) if k == "null_max" else _plain(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value)
    return value


def _summary(values) -> dict[str, float]:
    values = np.asarray(values, dtype=float)
    return {"n": int(values.size), "mean": float(values.mean()), "sd": float(values.std()), "min": float(values.min()),
            "max": float(values.max()), "first": [float(v) for v in values[:3]]}


#: what each case gives, recorded from the code as it is (JSON; NaN as NaN)
EXPECTED_FILE = Path(__file__).resolve().parent / "fixtures" / "monitor_stats_expected.json"


def _same(got, want, where: str = "") -> None:
    same(got, want, where, strict_types=True)


@pytest.fixture(scope="module")
def expected() -> dict:
    return load(EXPECTED_FILE)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_statistic_gives_its_recorded_answer(name, expected):
    _same(_plain(CASES[name]()), expected[name], name)


def test_the_closed_forms_by_hand():
    assert [st.spent_alpha(0.05, m) for m in (1, 2, 3)] == pytest.approx([0.025, 0.05 / 6, 0.05 / 12])
    assert sum(st.spent_alpha(0.05, m) for m in range(1, 10_000)) == pytest.approx(0.05, rel=1e-3), "sums to alpha"
    assert st.t_quantile(0.975, 10) == pytest.approx(2.228, abs=2e-3) and st.t_quantile(0.5, 5) == 0.0
    assert st.t_quantile(0.025, 30) == pytest.approx(-2.042, abs=2e-3) and st.t_quantile(0.95, 3) > 2.2
    np.testing.assert_array_equal(st._finite_rows(np.array([[1.0, 2.0], [nan, 1.0], [3.0, np.inf]])), [[1.0, 2.0]])
    np.testing.assert_array_equal(st._bins(np.array([1.0, 5.0, 9.0]), np.array([4.0, 8.0])),
                                  [[0, 0], [1, 0], [0, 1]])


def main(argv: list[str]) -> int:
    return record_main(argv, EXPECTED_FILE, CASES, _plain)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
