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
            # a range or choices, not both; a free-text knob (reward_model) has its pattern alone
            assert (meta.range is None) != (meta.choices is None) or meta.pattern is not None, (method, name)
            assert meta.range is None or meta.choices is None, (method, name)
            assert model.model_fields[name].default == meta.default, (method, name)


def test_run_help_lists_each_knob_with_its_help():
    out = subprocess.run([sys.executable, "-m", "whileai", "run", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "beta (grpo, dpo): weight of the KL penalty against the start policy" in out.stdout
    assert "near_misses (rm):" in out.stdout


def test_conf_config_yaml_has_every_root_knob_the_schema_takes():
    """Hydra refuses a command-line key the composed config lacks: each root knob is in conf/config.yaml's block."""
    from pathlib import Path

    import yaml

    from whileai.runner.schema import HOST_KEYS, KNOBS

    root = yaml.safe_load((Path(__file__).resolve().parents[1] / "conf" / "config.yaml").read_text())
    assert {*KNOBS, *HOST_KEYS} <= set(root), sorted({*KNOBS, *HOST_KEYS} - set(root))
    assert all(root[name] is None for name in (*KNOBS, *HOST_KEYS)), "a root knob is null: the run resolves it"


def test_the_export_group_is_generated_from_the_export_model_one_file_per_format():
    """conf/export/<format>.yaml carries the runner's Export defaults (the knobs' from their declarations) and
    nothing else: changing a default in one place changes the files, and ``--check`` fails until they are rewritten."""
    from pathlib import Path

    import yaml

    from whileai.runner.schema import Export
    from whileai.domain import defaults as sdk

    files = {path.name: text for path, text in generated_files().items() if path.parent.name == "export"}
    assert set(files) == {"trl.yaml", "openai.yaml"}
    for name, text in files.items():
        assert yaml.safe_load(text) == Export(format=Path(name).stem).model_dump(by_alias=True)
    # the export knobs' defaults are their declarations' (the same values TRL gets from a method's spec)
    assert {k: getattr(Export(), k) for k in sdk.TRAIN_EXPORT_KNOBS} == sdk.TRAIN_EXPORT_DEFAULTS
