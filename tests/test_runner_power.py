"""The held-out warnings a run prints before training (``runner/_power.py``) say how to grow the held-out side in the
dataset's own terms: a drawn cut grows with ``dataset.holdout``; ``dataset=bfcl_episodes`` is cut by BFCL's own split,
refuses that knob (``schema._own_split_checks``), and grows with more entries."""

from __future__ import annotations

import json

import pytest

from whileai.core.spec import RMSpec, SFTSpec
from whileai.runner._power import OWN_SPLIT_GROWTH, power_note
from whileai.runner.schema import Dataset

DRAWN = Dataset(source="sample")
OWN_SPLIT = Dataset(source="bfcl_episodes")


def _sample(n: int) -> list[dict]:
    from whileai.kit import load_sample

    return json.loads(json.dumps(load_sample()[:n]))


@pytest.mark.parametrize("data", [None, DRAWN])
def test_too_few_prompts_of_a_drawn_cut_are_grown_by_the_holdout_share(data):
    text, warning = power_note(_sample(2), SFTSpec(), 0.05, data)
    assert text.startswith("1 held-out prompt(s): no change on them can be significant")
    assert warning is not None and warning.startswith("no result on 1 held-out prompt(s) can be significant")
    assert "(more rows, or a larger dataset.holdout share)" in warning
    assert warning.endswith("(this spec's expect.holdout_gain_significant will fail)")


def test_too_few_prompts_of_bfcl_episodes_are_grown_by_more_entries_not_the_share_it_refuses():
    text, warning = power_note(_sample(2), SFTSpec(), 0.05, OWN_SPLIT)
    assert text.startswith("1 held-out prompt(s): no change on them can be significant")
    assert warning is not None and warning.startswith("no result on 1 held-out prompt(s) can be significant")
    assert "dataset.holdout" not in warning and f"({OWN_SPLIT_GROWTH})" in warning
    assert "a larger dataset.tasks" in warning and "more dataset.categories" in warning
    assert warning.endswith("(this spec's expect.holdout_gain_significant will fail)")


def test_too_few_held_out_pairs_of_bfcl_episodes_are_grown_by_more_entries_too():
    _, warning = power_note(_sample(2), RMSpec(), None, OWN_SPLIT)
    assert warning is not None and "pair(s) can be significant" in warning
    assert "dataset.holdout" not in warning and f"({OWN_SPLIT_GROWTH})" in warning


def test_an_empty_held_out_side_is_grown_in_the_datasets_own_terms():
    _, drawn = power_note([], SFTSpec(), None, DRAWN)
    assert drawn is not None and "raise dataset.holdout" in drawn
    _, own = power_note([], SFTSpec(), None, OWN_SPLIT)
    assert own is not None and own.startswith("the held-out side has no rows: the dataset's own split held out none")
    assert "dataset.holdout" not in own and OWN_SPLIT_GROWTH in own


def test_enough_prompts_say_no_fix_for_either_cut():
    rows = _sample(200)
    assert power_note(rows, SFTSpec(), 0.05, DRAWN)[1] is None
    assert power_note(rows, SFTSpec(), 0.05, OWN_SPLIT)[1] is None
