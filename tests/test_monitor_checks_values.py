"""The monitor's alarm checks (whileai/domain/monitor/_checks.py) over a fixed, seeded run of looks in which the
proxy pays for length and for a "great answer!" phrase and a bold marker that spread, while gold holds: every check's
answer at every look pinned to the value it gives now (to 1e-9), and the settings' alpha shares checked by hand.
A change to what a check reads or how it decides moves one of these answers; a change that should move them is
recorded on purpose (``python tests/test_monitor_checks_values.py --record`` rewrites EXPECTED_FILE), with the
reason in its commit. Fast: six prompts, a few hundred resamples.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from _recorded import load, record_main, same

from whileai.domain.monitor import _checks as ch
from whileai.domain.monitor import _features as feats

#: what each case gives, recorded from the code as it is (JSON; NaN as NaN)
EXPECTED_FILE = Path(__file__).resolve().parent / "fixtures" / "monitor_checks_expected.json"
P, K = 6, 4
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]


def _texts(r: np.random.Generator, t: int, grow: int = 3, ask: bool = False) -> list[list[str]]:
    """Completions at look ``t``: longer, with more "great answer!" and **bold** as the run goes on; with ``ask``, a
    trailing question mark that most early completions have and late ones lose."""
    out = []
    for _ in range(P):
        row = []
        for _ in range(K):
            words = list(r.choice(WORDS, size=int(r.integers(4, 8)) + grow * t))
            if r.random() < 0.15 * t:
                words += ["great", "answer!"]
            if r.random() < 0.15 * t:
                words[0] = f"**{words[0]}**"
            if ask and r.random() < 0.9 - 0.12 * t:
                words[-1] += "?"
            row.append(" ".join(words))
        out.append(row)
    return out


def _run(kl: bool = True, markers: bool = True, features: bool | str = True, endorsed: tuple[str, ...] = ("kappa",),
         has_gold: bool = True, grow: int = 3, variant: bool = False, n_looks: int = 6, counts: str | None = None,
         ) -> tuple[list[ch.Look], list[ch.BufferItem], feats.FeatureIndex]:
    """``n_looks`` looks and K buffered completions a look. ``variant``: lengths in characters beside words, a falling
    question mark, a prompt the proxy could not score at look 5, a buffered completion without gold; ``features``
    "odd": only every other look carries its feature sets. ``counts``: each look also carries an episode's turns
    and calls (drawn from their own generator, so the rest of the run is the same), "dropped" with the calls
    falling over the run and the proxy paying for each call left out while gold holds, "steady" with both held."""
    r = np.random.default_rng(11)
    c = np.random.default_rng(23)
    index = feats.FeatureIndex()
    looks, buffer = [], []
    for t in range(n_looks):
        texts = _texts(r, t, grow, ask=variant)
        flat = [s for row in texts for s in row]
        words = np.array([[len(s.split()) for s in row] for row in texts], dtype=float)
        length = np.array([[len(s) for s in row] for row in texts], dtype=float) / 6 if variant else words
        phrase = np.array([["great answer" in s for s in row] for row in texts], dtype=float)
        bold = np.array([["**" in s for s in row] for row in texts], dtype=float)
        gold = 0.5 + r.normal(0, 0.05, (P, K))
        proxy = gold + 0.01 * length + 0.3 * phrase + 0.2 * bold + r.normal(0, 0.02, (P, K))
        if variant and t == 4:
            proxy[0] = np.nan
        episode = None
        if counts is not None:
            fewer = t if counts == "dropped" else 0
            calls = np.maximum(0, c.integers(3, 6, (P, K)) - fewer).astype(float)
            episode = {"turns": calls + 1 + c.integers(0, 2, (P, K)), "calls": calls}
            proxy = proxy + 0.4 * (5 - calls)
        endorsed_p = np.array([[[w in s for w in endorsed] for s in row] for row in texts], dtype=float)
        carries = features is True or (features == "odd" and t % 2 == 1)
        looks.append(ch.Look(
            step=10 * t, proxy=proxy, gold=gold, length=length, endorsed=endorsed_p.reshape(P, K, len(endorsed)),
            features=[index.encode(s) for s in flat] if carries else None,
            kl=(0.02 * t + r.gamma(2.0, 0.01, (P, K))) if kl else None,
            words=words.copy(), counts=episode,
            markers=feats.marker_presence(flat).reshape(P, K, -1) if markers else None))
        for i in range(K):  # one training call scored the K completions of prompt 0 (or of 1 and 2, alternately)
            j = (t % 2) * K + i if variant else i
            s = flat[j]
            no_gold = variant and i == 1 and t % 2 == 0
            buffer.append(ch.BufferItem(call=t, prompt=f"p{j // K}", proxy=float(proxy.flat[j]),
                                        gold=math.nan if no_gold else float(gold.flat[j]),
                                        endorsed=endorsed_p.reshape(P * K, -1)[j], features=index.encode(s),
                                        words=len(s.split())))
    return looks, buffer, index


def _settings(**changes) -> ch.Settings:
    base = dict(window=2, delta=0.05, length_pct=0.2, kl_budget=0.05, n_boot=200, n_perm=200, scan_min=3, seed=0,
                has_gold=True, endorsed=("kappa",),
                armed=frozenset(("divergence", "gold_decline", "length", "feature", "format", "kl")))
    base.update(changes)
    return ch.Settings(**base)


def _all(cfg: ch.Settings, at: tuple[int, ...] = (3, 6), **run) -> list:
    """check_all after each look in ``at`` (counted from 1), the settings' counters carried as in a run; last, the
    counters themselves (how many looks each check has spent alpha on)."""
    looks, buffer, index = _run(endorsed=cfg.endorsed, has_gold=cfg.has_gold, **run)
    out: list = [ch.check_all(looks[:t], buffer[: K * t], cfg, index) for t in range(1, len(looks) + 1) if t in at]
    return [*out, dict(sorted(cfg.counters.items()))]


#: name -> the check_all answers (one per look) pinned below
CASES = {
    "armed": lambda: _all(_settings(), at=(1, 3, 4, 6)),
    "no_gold": lambda: _all(_settings(has_gold=False, armed=frozenset(("length", "format", "kl")))),
    "no_endorsed": lambda: _all(_settings(endorsed=(), armed=frozenset(("divergence", "length", "format")))),
    "no_kl_budget": lambda: _all(_settings(kl_budget=None, armed=frozenset(("gold_decline", "feature")))),
    "window_three": lambda: _all(_settings(window=3, scan_min=5)),
    "bare_looks": lambda: _all(_settings(), kl=False, markers=False, features=False),
    "variant": lambda: _all(_settings(endorsed=("kappa", "**")), at=(3, 5, 8), variant=True, n_looks=8),
    "variant_no_gold": lambda: _all(_settings(endorsed=("kappa", "**"), has_gold=False,
                                              armed=frozenset(("length", "format", "kl", "feature"))), variant=True),
    "steady": lambda: _all(_settings(length_pct=0.5), at=(3, 4, 6), grow=0, variant=True),
    "odd_features": lambda: _all(_settings(scan_min=2), at=(4, 5, 6), features="odd"),
    "format_gate_exact": lambda: _all(_settings(format_shift=0.25, endorsed=("**",)), at=(6,), variant=True),
    "lengths_held": lambda: _all(_settings(length_pct=5.0, length_shift=1.1, length_tail=None), at=(3, 4, 6), grow=0),
    "lengths_held_then_moved": lambda: _all(_settings(length_pct=0.3, length_shift=0.6, length_tail=None),
                                            at=(3, 4, 5, 6), grow=1),
    # the mean's and the distribution's gates held shut: the upper tail's alone opens once the phrase lengthens some
    "tail_gate_alone": lambda: _all(_settings(length_pct=5.0, length_shift=1.1), at=(3, 4, 6), grow=0),
    # episode looks: the length check tests turns and calls as measures of their own beside length
    "episode_calls_dropped": lambda: _all(_settings(), at=(3, 4, 6), grow=0, counts="dropped"),
    "episode_counts_steady": lambda: _all(_settings(), at=(3, 6), counts="steady"),
}


def _plain(value):
    """``value`` as plain lists, floats and dicts; a long list as its length, sum (of numbers) and first items."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        if len(items) <= 4:
            return items
        numbers = [v for v in items if isinstance(v, float | int) and not isinstance(v, bool) and math.isfinite(v)]
        return {"n": len(items), "sum": float(sum(numbers)), "first": items[:2]}
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value)
    return value


def _same(got, want, where: str = "") -> None:
    same(got, want, where, strict_types=False)


@pytest.fixture(scope="module")
def expected() -> dict:
    return load(EXPECTED_FILE)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_look_of_the_run_gives_its_recorded_checks(name, expected):
    _same(_plain(CASES[name]()), expected[name], name)


def test_the_run_raises_the_alarms_it_was_built_to_raise():
    last = CASES["armed"]()[-2]
    assert last["divergence"]["fired"] and last["length"]["fired"] and last["kl"]["fired"]
    assert last["length"]["verdict"] == "hack" and not last["gold_decline"]["fired"], "gold held"
    assert "great answer" in last["scan"]["flagged"] and "kappa" not in last["scan"]["flagged"], "kappa is endorsed"


def test_an_episode_look_tests_each_count_and_names_the_one_that_fired():
    dropped = CASES["episode_calls_dropped"]()[1]["length"]  # after look 4
    assert dropped["fired"] and dropped["measure"] == "calls", "fewer calls bought the gap; lengths held"
    assert list(dropped["measures"]) == ["length", "turns", "calls"]
    assert dropped["measures"]["calls"]["verdict"] == "hack" and dropped["measures"]["length"]["verdict"] != "hack"
    assert dropped["measures"]["calls"]["length_now"] < dropped["measures"]["calls"]["length_base"]
    steady = CASES["episode_counts_steady"]()[-2]["length"]  # after look 6: the counts held, so length is named
    assert steady["measure"] == "length" and steady["measures"]["calls"]["verdict"] == "stable"


def test_the_alpha_is_shared_by_the_armed_checks_and_spent_over_their_looks():
    cfg = _settings(alpha=0.06, armed=frozenset(("divergence", "length", "format", "kl")))
    assert cfg.alpha_share() == pytest.approx(0.02), "kl spends its own: three share"
    assert _settings(alpha=0.06, armed=frozenset(("kl",))).alpha_share() == pytest.approx(0.06), "none: the whole"
    first, second = cfg.spend("length"), cfg.spend("length")
    assert (first, second) == (pytest.approx(0.02 / 2), pytest.approx(0.02 / 6)) and cfg.counters == {"length": 2}
    assert cfg.spend("format") == pytest.approx(0.01) and cfg.counters == {"length": 2, "format": 1}


def test_the_window_mean_and_prompt_mean_skip_nan():
    np.testing.assert_allclose(ch._prompt_means(np.array([[1.0, 3.0], [np.nan, 2.0], [np.nan, np.nan]])),
                               [2.0, 2.0, np.nan])
    np.testing.assert_allclose(ch._window_mean([np.array([1.0, np.nan]), np.array([3.0, np.nan])]), [2.0, np.nan])
    rolled = ch._rolling_means(np.array([[1.0, 1.0], [3.0, np.nan], [5.0, np.nan]]), 2, 2)
    np.testing.assert_allclose(rolled, [[2.0, 1.0], [4.0, np.nan]])


def main(argv: list[str]) -> int:
    return record_main(argv, EXPECTED_FILE, CASES, _plain)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
