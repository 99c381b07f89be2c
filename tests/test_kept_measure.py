"""The start run's held-out "after" kept beside its adapter (``whileai.jobs._kept_measure``): read back only when
every part of the key and the adapter's weights are the same. A real chained run reading it back is
tests/test_stages.py's; that a fresh measurement of the saved adapter gives the same outcomes is too."""

from __future__ import annotations

import json
from dataclasses import replace

from whileai.jobs import _kept_measure
from whileai.jobs._measure import HeldOutMeasure

KEY = _kept_measure.MeasureKey(measure="first_action_pass_rate", base_model="b", prompt_digest="d",
                               eval_max_new_tokens=64, template="t", parser="hermes", device="cpu")
AFTER = HeldOutMeasure(value=0.5, prompts=2, outcomes=(1, 0), metric="pass_rate", prompt_digest="d")


def _adapter(tmp_path, weights: bytes = b"weights"):
    (tmp_path / "adapter_model.safetensors").write_bytes(weights)
    return tmp_path


def test_the_kept_after_reads_back_under_the_same_key_and_weights(tmp_path):
    folder = _adapter(tmp_path)
    _kept_measure.keep(folder, KEY, AFTER)
    assert _kept_measure.read_back(folder, replace(KEY)) == AFTER
    assert (folder / _kept_measure.MEASURED_FILE).stat().st_mode & 0o777 == 0o600


def test_any_other_key_part_or_other_weights_measure_again(tmp_path):
    folder = _adapter(tmp_path)
    _kept_measure.keep(folder, KEY, AFTER)
    for part in KEY.to_json():
        assert _kept_measure.read_back(folder, replace(KEY, **{part: "other"})) is None, part
    _adapter(tmp_path, b"trained further")
    assert _kept_measure.read_back(folder, KEY) is None


def test_a_missing_or_broken_file_measures_again(tmp_path):
    folder = _adapter(tmp_path)
    assert _kept_measure.read_back(folder, KEY) is None
    (folder / _kept_measure.MEASURED_FILE).write_text("{cut short")
    assert _kept_measure.read_back(folder, KEY) is None
    (folder / _kept_measure.MEASURED_FILE).write_text(json.dumps({"key": KEY.to_json(), "weights": "x", "measured": AFTER.to_json()}))
    assert _kept_measure.read_back(folder, KEY) is None


def test_no_adapter_weights_keep_nothing(tmp_path):
    _kept_measure.keep(tmp_path, KEY, AFTER)
    assert not (tmp_path / _kept_measure.MEASURED_FILE).exists()
