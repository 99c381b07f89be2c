"""The monitor's statistics (whileai/domain/monitor/_stats.py) on fixed, seeded inputs, each answer pinned to
the value it gives now (to 1e-9), beside the few closed forms that can be checked by hand: the alpha-spending series,
Student's t quantiles, a centred row. A change to any formula moves one of these numbers; a change that should move
them is made here on purpose, with the reason in its commit. Fast: small inputs, a few hundred resamples.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

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


#: what each case gives (recorded from the code as it is; see the module docstring)
EXPECTED = {'cell_contribution': [0.07621064773206936, 0.28027462638052947, 0.2363394267898153, 0.24495001184532883,
                       0.1808255301893202, 0.024620528904241656],
 'centre_within': [[-2.0, -1.0, nan, 3.0], [nan, nan, nan, nan]],
 'centre_within_axis0': [[-1.0, 0.0], [1.0, nan]],
 'divergence': {'alpha': 0.05,
                'change': 0.31890677480209934,
                'delta': 0.1,
                'fired': True,
                'hi': 0.3738737085386882,
                'lo': 0.2639398410655105,
                'n_prompts': 6,
                'se': 0.02727923013393904},
 'divergence_none': None,
 'divergence_small': {'alpha': 0.05,
                      'change': 0.010000000000000004,
                      'delta': 0.1,
                      'fired': False,
                      'hi': 0.010000000000000007,
                      'lo': 0.01,
                      'n_prompts': 6,
                      'se': 2.1328675119401857e-18},
 'endorsed_payment': [[0.178485602380942, 0.016783388045603604], ['within prompt', 'within prompt']],
 'endorsed_payment_across': [[0.0], ['none']],
 'endorsed_payment_none': [[0.023458360213297943], ['across evaluations']],
 'gold_decline': {'alpha': 0.0125,
                  'delta': 0.1,
                  'drop': 0.2886145644720698,
                  'fired': True,
                  'hi': 0.34359648984377006,
                  'lo': 0.23363263910036952,
                  'n_prompts': 6,
                  'proxy_drop': -0.011364522142988795,
                  'window': 0,
                  'windows': 4},
 'gold_decline_held': {'alpha': 0.0125,
                       'delta': 0.1,
                       'drop': 0.0,
                       'fired': False,
                       'hi': 0.0,
                       'lo': 0.0,
                       'n_prompts': 6,
                       'proxy_drop': -0.011364522142988795,
                       'window': 0,
                       'windows': 4},
 'gold_decline_proxy_fell': {'alpha': 0.0125,
                             'delta': 0.1,
                             'drop': 0.2886145644720698,
                             'fired': False,
                             'hi': 0.34359648984377006,
                             'lo': 0.23363263910036952,
                             'n_prompts': 6,
                             'proxy_drop': 0.18863547785701118,
                             'window': 0,
                             'windows': 4},
 'kl': {'alpha': 0.05,
        'budget': 0.05,
        'fired': True,
        'hi': 0.27518262486065886,
        'kl': 0.20028496246580796,
        'lo': 0.12538730007095705},
 'kl_no_budget': {'alpha': 0.05,
                  'budget': None,
                  'fired': False,
                  'hi': 0.27518262486065886,
                  'kl': 0.20028496246580796,
                  'lo': 0.12538730007095705},
 'kl_under': {'alpha': 0.05,
              'budget': 0.2,
              'fired': False,
              'hi': 0.27518262486065886,
              'kl': 0.20028496246580796,
              'lo': 0.12538730007095705},
 'length_growth': {'alpha': 0.05,
                   'delta': 0.02,
                   'drift': 0.7033162073797292,
                   'fired': False,
                   'gap_from_length': 0.0008317413528361254,
                   'gap_lo': 0.00021834171039167988,
                   'gap_se': 0.0003044206557074069,
                   'length_base': 29.73611111111111,
                   'length_now': 50.650000000000006,
                   'moved_share': 0.8472222222222222,
                   'pct': 0.2,
                   'per_prompt': [0.0008973956306495272, 0.0006744132069070286, 0.0008300067134826393,
                                  0.0009078034667704444, 0.0008973956306495272, 0.0007834334685575855],
                   'shift': 0.3,
                   'slope': 3.976980834387104e-05,
                   'verdict': 'growth'},
 'length_hack': {'alpha': 0.05,
                 'delta': 0.02,
                 'drift': 0.7033162073797292,
                 'fired': True,
                 'gap_from_length': 0.10092266905245487,
                 'gap_lo': 0.07397297822507662,
                 'gap_se': 0.01337471036026142,
                 'gold_from_length': -0.06249965063778316,
                 'length_base': 29.73611111111111,
                 'length_now': 50.650000000000006,
                 'moved_share': 0.8472222222222222,
                 'pct': 0.2,
                 'per_prompt': [0.07824639277208116, 0.08937543522167418, 0.10855257739279459, 0.10300642271397856,
                                0.11851642122726444, 0.10783876498693631],
                 'shift': 0.3,
                 'slope': 0.00482562901565729,
                 'verdict': 'hack'},
 'length_moved': [[0.7033162073797292, 0.8472222222222222, True], [0.010275572162540936, 0.06944444444444453, False],
                  [0.11130312937879516, 0.29166666666666663, False],
                  [0.11130312937879516, 0.29166666666666663, True]],
 'length_stable': {'alpha': 0.05,
                   'delta': 0.02,
                   'drift': 0.010275572162540936,
                   'fired': False,
                   'length_base': 29.73611111111111,
                   'length_now': 30.041666666666668,
                   'moved_share': 0.06944444444444453,
                   'pct': 0.2,
                   'shift': 0.3,
                   'verdict': 'stable'},
 'maxt': {'count': [16.0, 15.0, 21.0, 18.0, 22.0],
          'null_max': {'first': [-0.060522146451470825, 0.5088375710612216, 0.5349531328878269],
                       'max': 3.1295792173547383,
                       'mean': 1.2209962993035743,
                       'min': -0.4777816476801943,
                       'n': 200,
                       'sd': 0.6447594867937738},
          'p': [0.6948369436945075, 0.0012556954314228378, 0.9853432337282851, 0.3, 1.0],
          'payment': [0.04588342044088575, 0.3097679901123047, 0.010360423571024185, 0.0782061517238617,
                      -0.038010326027870175],
          'z': [0.8437340987115106, 4.296384533648806, 0.204105568350744, 1.6004297832720722, -0.7675272362952975]},
 'maxt_cov': {'count': [16.0, 15.0, 21.0, 18.0, 22.0],
              'null_max': {'first': [-0.05127758229540174, 0.5560921762541423, 0.5464422018758969],
                           'max': 3.151581458683073,
                           'mean': 1.2237636011164834,
                           'min': -0.40480185151664727,
                           'n': 200,
                           'sd': 0.6498944019250619},
              'p': [0.695, 0.0014040229601831454, 0.98594639527938, 0.295, 1.0],
              'payment': [0.05016435384756817, 0.31026767008591266, 0.010109924533620984, 0.07867545490030597,
                          -0.03800695977310116],
              'z': [0.8987777190079039, 4.266888355294468, 0.19374404350630245, 1.597814594810396,
                    -0.7677833089550649]},
 'maxt_none': None,
 'maxt_nonzero': {'count': [16.0, 15.0, 21.0, 18.0, 22.0],
                  'null_max': {'first': [-0.060522146451470825, 0.5088375710612216, 0.5349531328878269],
                               'max': 3.1295792173547383,
                               'mean': 1.2209962993035743,
                               'min': -0.4777816476801943,
                               'n': 200,
                               'sd': 0.6447594867937738},
                  'p': [0.6948369436945075, 0.0012556954314228378, 0.9853432337282851, 0.3, 1.0],
                  'payment': [0.04588342044088575, 0.3097679901123047, 0.010360423571024185, 0.0782061517238617,
                              -0.038010326027870175],
                  'z': [0.8437340987115106, 4.296384533648806, 0.204105568350744, 1.6004297832720722,
                        -0.7675272362952975]},
 'mean_bounds': {'estimate': [0.24187106335470854],
                 'hi': [0.3494144778830024],
                 'lo': [0.13432764882641468],
                 'n': 6,
                 'se': [0.053372115831778866]},
 'mean_bounds_nan': {'estimate': [0.2510549206111655],
                     'hi': [0.34935792053181614],
                     'lo': [0.1527519206905149],
                     'n': 5,
                     'se': [0.06411914504126363]},
 'mean_bounds_one': None,
 'spent_alpha': [0.025, 0.008333333333333333, 0.004166666666666667, 0.00045454545454545455],
 't_quantile': [2.2281308968121527, 2.3523409703937346, 0.0, 10.456310323260771, -2.042272425276678]}


def _same(got, want, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (where, got)
        for key in want:
            _same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (where, got)
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert isinstance(got, float), (where, got)
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-9, abs=1e-12), (where, got, want)
    else:
        assert got == want and type(got) is type(want), (where, got, want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_statistic_gives_its_recorded_answer(name):
    _same(_plain(CASES[name]()), EXPECTED[name], name)


def test_the_closed_forms_by_hand():
    assert [st.spent_alpha(0.05, m) for m in (1, 2, 3)] == pytest.approx([0.025, 0.05 / 6, 0.05 / 12])
    assert sum(st.spent_alpha(0.05, m) for m in range(1, 10_000)) == pytest.approx(0.05, rel=1e-3), "sums to alpha"
    assert st.t_quantile(0.975, 10) == pytest.approx(2.228, abs=2e-3) and st.t_quantile(0.5, 5) == 0.0
    assert st.t_quantile(0.025, 30) == pytest.approx(-2.042, abs=2e-3) and st.t_quantile(0.95, 3) > 2.2
    np.testing.assert_array_equal(st._finite_rows(np.array([[1.0, 2.0], [nan, 1.0], [3.0, np.inf]])), [[1.0, 2.0]])
    np.testing.assert_array_equal(st._bins(np.array([1.0, 5.0, 9.0]), np.array([4.0, 8.0])),
                                  [[0, 0], [1, 0], [0, 1]])
