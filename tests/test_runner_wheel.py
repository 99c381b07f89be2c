"""A plain wheel install carries conf/ and recipes/: the runner works outside this checkout.

Builds the wheel (``pip wheel --no-deps``), installs it into a fresh virtualenv in a temporary
folder outside the repository, and runs ``python -m whileai run --help`` and
``python -m whileai validate recipe=sft_tooluse`` from another temporary folder. The virtualenv
reuses this environment's installed packages (torch, hydra, ...) through a ``.pth`` line instead
of downloading them; the editable install of this checkout is not on its path, so the whileai it
imports is the wheel's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)


def test_wheel_install_outside_the_repo_lists_recipes_and_validates(tmp_path):
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(ROOT),
                  "-w", str(wheels)], cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("whileai-*.whl")

    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--force-reinstall",
                      "-q", str(wheel)], env=clean)
    assert installed.returncode == 0, installed.stderr
    # after the install: pip would otherwise take this environment's whileai for the installed one
    (site / "_reuse_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WHILEAI_RECIPES")}
    env["WHILEAI_HOME"] = str(tmp_path / "home")
    where = _run([str(python), "-c", "import whileai, sys; print(whileai.__file__)"], cwd=outside, env=env)
    assert str(site) in where.stdout, f"the wheel's whileai is imported, not the checkout's: {where.stdout}"

    shown = _run([str(python), "-m", "whileai", "run", "--help"], cwd=outside, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "recipe: agent_tooluse, dpo_tooluse, grpo_tooluse, rm_tooluse, sft_tooluse" in shown.stdout
    assert "recipe/gpu: dpo_qwen3, grpo_qwen3, rm_qwen3, sft_qwen3" in shown.stdout

    valid = _run([str(python), "-m", "whileai", "validate", "recipe=sft_tooluse"], cwd=outside, env=env)
    assert valid.returncode == 0, valid.stderr
    assert "name: sft_tooluse" in valid.stdout
    assert list(outside.iterdir()) == [], "nothing is written into the working directory"
