"""The knob declarations are the one source: docs/knobs.md, conf/method/*.yaml and ``run --help`` come from them."""

from __future__ import annotations

import subprocess
import sys

from whileai.core.spec import SPEC_MODELS, knob_fields, knob_of
from whileai.runner.knobs_doc import generated_files, main


def test_generated_files_match_the_declarations():
    stale = [str(path) for path, text in generated_files().items() if not path.exists() or path.read_text() != text]
    assert stale == [], "run python -m whileai.runner.knobs_doc --write"
    assert main(["--check"]) == 0


def test_every_knob_declares_its_default_reason_help_and_accepted_values():
    for method, model in SPEC_MODELS.items():
        for name in knob_fields(model):
            meta = knob_of(model, name)
            assert meta.help and meta.reason, (method, name)
            assert (meta.range is None) != (meta.choices is None), (method, name)
            assert model.model_fields[name].default == meta.default, (method, name)


def test_run_help_lists_each_knob_with_its_help():
    out = subprocess.run([sys.executable, "-m", "whileai", "run", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "beta (grpo, dpo): weight of the KL penalty against the start policy" in out.stdout
    assert "near_misses (rm):" in out.stdout
