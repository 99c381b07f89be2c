"""The packaged demo base: one set of bytes on every machine and every CPU kernel path (whileai/kit/_base.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from whileai.kit import _base, defaults


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_packaged_weights_have_the_digest_this_version_pins():
    assert _sha256(_base.PACKAGED_BASE / _base.WEIGHTS_FILE) == defaults.BASE_WEIGHTS_SHA256
    assert _base.weights_digest(_base.PACKAGED_BASE) == defaults.BASE_WEIGHTS_SHA256
    record = json.loads((_base.PACKAGED_BASE / "whileai_kit.json").read_text())
    assert record["weights_sha256"] == defaults.BASE_WEIGHTS_SHA256
    assert record["built_with"]["cpu_capability"] == "DEFAULT", "built on the portable kernel path"


def test_the_packaged_base_was_built_by_the_codes_recipe():
    """A KIT_BASE_* value changed without rebuilding (scripts/build_kit_base.py) fails here, not on a user's run."""
    wanted = json.loads(json.dumps({**_base._recipe(), "seed": defaults.KIT_BASE_SEED, "what": "base"}, default=str))
    assert _base._packaged_recipe() == wanted
    assert not _base.demo_base_trains(), "the default base is copied, never pre-trained on a user's machine"
    assert _base.demo_base_trains(defaults.KIT_BASE_SEED + 1), "a base of another seed is pre-trained here"


def test_the_wheel_carries_the_packaged_base():
    import tomllib

    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["whileai"]
    shipped = {p.relative_to(root / "whileai") for p in _base.PACKAGED_BASE.iterdir()}
    assert shipped and all(any(p.match(pattern) for pattern in patterns) for p in shipped), (shipped, patterns)


@pytest.mark.parametrize("path", [None, "default", "avx2", "avx512"])
def test_every_cpu_kernel_path_sets_up_the_same_base_bytes(tmp_path, path):
    """Pre-training the same recipe under AVX2 and the scalar kernels gives other weights; the packaged base does not
    depend on the path the process runs (ATEN_CPU_CAPABILITY is read at torch's first dispatch: a process each)."""
    env = {**os.environ, "WHILEAI_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    env.pop("ATEN_CPU_CAPABILITY", None)
    if path is not None:
        env["ATEN_CPU_CAPABILITY"] = path
    code = ("import torch; from whileai.kit import demo_base, weights_digest; torch.ones(8).sum(); "
            "print(torch.backends.cpu.get_cpu_capability(), weights_digest(demo_base()))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    capability, digest = done.stdout.split()
    if path == "default":
        assert capability == "DEFAULT", "the variable reached torch: this is the second kernel path"
    assert digest == defaults.BASE_WEIGHTS_SHA256


def test_a_damaged_packaged_base_is_refused_with_the_fix(home, tmp_path, monkeypatch):
    damaged = tmp_path / "base"
    shutil.copytree(_base.PACKAGED_BASE, damaged)
    weights = bytearray((damaged / _base.WEIGHTS_FILE).read_bytes())
    weights[-1] ^= 0xFF
    (damaged / _base.WEIGHTS_FILE).write_bytes(bytes(weights))
    monkeypatch.setattr(_base, "PACKAGED_BASE", damaged)
    with pytest.raises(RuntimeError, match="install is damaged: reinstall whileai") as caught:
        _base.demo_base()
    assert defaults.BASE_WEIGHTS_SHA256 in str(caught.value)
    assert not _base.demo_base_built(), "nothing half-copied is left as the base"


def test_the_data_roots_copy_is_the_packaged_base(home):
    folder = _base.demo_base()
    assert folder.parent == home / "models"
    assert _sha256(folder / _base.WEIGHTS_FILE) == defaults.BASE_WEIGHTS_SHA256
    for name in ("tokenizer.json", "config.json"):
        assert (folder / name).read_bytes() == (_base.PACKAGED_BASE / name).read_bytes()
    assert json.loads((folder / "whileai_kit.json").read_text())["packaged"] is True


def test_a_folders_weights_digest_covers_every_weights_file(tmp_path):
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"a")
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"b")
    (tmp_path / "config.json").write_text("{}")
    first = _base.weights_digest(tmp_path)
    (tmp_path / "config.json").write_text('{"x": 1}')
    assert _base.weights_digest(tmp_path) == first, "only the weights count"
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"c")
    assert _base.weights_digest(tmp_path) != first
    (tmp_path / "model.safetensors").write_bytes(b"one file")
    assert _base.weights_digest(tmp_path) == _sha256(tmp_path / "model.safetensors")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no weights file"):
        _base.weights_digest(tmp_path / "empty")
