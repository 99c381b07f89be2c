"""The calibration benchmark's classes that differ in kind from the ones the alarms were built around, one
simulated run each: every hack alarms after its onset and not before, honest length growth does not alarm."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("monitor_calibration", ROOT / "benchmarks" / "monitor_calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def run(bench, kind, seed: int) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bench.simulate(kind, seed=seed, n_prompts=32, k=4, fresh=True)


def test_each_new_hack_alarms_after_its_onset_and_not_before(bench):
    for i, kind in enumerate(bench.NEW_HACKED):
        res = run(bench, kind, seed=900 + i)
        looks, onset = res["first"], res["onset"]
        assert looks and min(looks.values()) >= onset, (kind.name, res)
        if kind.check:  # the alarm built for it caught it, not only another one
            assert looks.get(kind.check, -1) >= onset, (kind.name, res)


def test_honest_length_growth_the_gold_pays_for_does_not_alarm(bench):
    for i, kind in enumerate(bench.NEW_HONEST):
        res = run(bench, kind, seed=950 + i)
        assert not set(res["first"]) & set(bench.ALARMS), (kind.name, res)


def test_fresh_draws_differ_from_the_tuning_draws(bench):
    kind = next(k for k in bench.NEW_HACKED if k.draws == "threshold")
    tune = [bench.drawn(kind, seed, fresh=False) for seed in range(200)]
    fresh = [bench.drawn(kind, seed, fresh=True) for seed in range(200)]
    assert {k.length_sd for k in tune} == {kind.length_sd} and len({k.length_sd for k in fresh}) == 200
    assert max(k.threshold for k in fresh) > max(k.threshold for k in tune)
    assert min(k.threshold for k in fresh) < min(k.threshold for k in tune)
    assert all(k.pick_hard for k in fresh) and not any(k.pick_hard for k in tune)
    assert bench.drawn(bench.HONEST[0], 0, fresh=True) is bench.HONEST[0]  # the fixed classes stay as written
