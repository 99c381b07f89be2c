"""``python -m whileai`` as a person types it, each case a subprocess: the namespace trap, the bare
``run``, ``--cfg job`` and ``validate`` (nothing here trains; the runs' own output is tested in
test_runner_e2e.py and test_runner_sweep.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from _runner_helpers import ROOT, whileai

#: What setuptools' editable install does (its ``__editable___*_finder``): a finder after the path
#: finder that serves ``whileai.<name>`` from the clone. The path finder has already taken the
#: cwd's ``whileai/`` (the clone's own folder, no ``__init__.py``) as a namespace package.
_TRAP = """
import importlib.machinery, runpy, sys
CLONE = {package!r}
class Editable:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.startswith("whileai.") and fullname.count(".") == 1:
            return importlib.machinery.PathFinder.find_spec(fullname, [CLONE])
        return None
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
at = sys.meta_path.index(importlib.machinery.PathFinder)
sys.meta_path.insert(at + 1, Editable)
import whileai
assert whileai.__file__ is None, "the trap is set: whileai is a namespace package"
if sys.argv[1] == "sdk":
    import whileai.simulations
else:
    sys.argv = ["whileai", "run", "recipe=sft_tooluse"]
    runpy.run_module("whileai", run_name="__main__", alter_sys=True)
"""


def _in_trap(tmp_path: Path, what: str) -> subprocess.CompletedProcess:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "whileai").symlink_to(ROOT, target_is_directory=True)  # a folder holding the clone as whileai/
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = _TRAP.format(package=str(ROOT / "whileai"))
    return subprocess.run([sys.executable, "-c", code, what], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_namespace_trap_is_named_by_the_sdk_import(tmp_path):
    done = _in_trap(tmp_path, "sdk")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "NamespaceImportError: whileai was imported as a namespace package" in done.stderr, done.stderr
    assert str(tmp_path / "src" / "whileai") in done.stderr
    assert "Run from another folder, or from inside the clone (cd whileai)." in done.stderr


def test_the_namespace_trap_is_named_by_python_m_whileai(tmp_path):
    done = _in_trap(tmp_path, "main")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("python -m whileai: whileai was imported as a namespace package"), done.stderr
    assert "Run from another folder, or from inside the clone" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_bare_run_refuses_and_lists_the_recipes():
    done = whileai("run")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "", "nothing ran, so there is no result"
    assert done.stderr.startswith("python -m whileai run needs a recipe: python -m whileai run recipe=NAME")
    for name in ("sft_tooluse", "grpo_tooluse", "dpo_tooluse", "rm_tooluse", "gpu/grpo_qwen3"):
        assert f"recipe={name} " in done.stderr
    assert "recipe=none" in done.stderr


def test_recipe_none_keeps_the_root_spec_possible():
    done = whileai("run", "--cfg", "job", "recipe=none", "method=dpo", "steps=7")
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load(done.stdout)
    assert spec["method"] == "dpo" and spec["steps"] == 7 and spec["name"] is None


def test_cfg_job_fails_on_a_typo_like_validate():
    done = whileai("run", "--cfg", "job", "recipe=grpo_tooluse", "bta=1")
    same = whileai("validate", "recipe=grpo_tooluse", "bta=1")
    assert done.returncode == 2 and same.returncode == 2, done.stdout + done.stderr
    assert "bta: not a key of the spec; did you mean beta?" in done.stderr
    assert done.stderr == same.stderr and done.stdout == same.stdout == ""


def test_cfg_job_and_validate_show_the_values_the_job_will_use():
    from whileai.domain import defaults as sdk
    from whileai.core import defaults as core_defaults
    from whileai.kit import defaults as kit_defaults

    done = whileai("run", "--cfg", "job", "recipe=grpo_tooluse")
    assert done.returncode == 0, done.stderr
    assert "${" not in done.stdout, "interpolations are resolved"
    assert done.stdout == whileai("validate", "recipe=grpo_tooluse").stdout
    spec = yaml.safe_load(done.stdout)
    sft = spec["stages"]["sft"]
    assert spec["base_model"] == sft["base_model"] == kit_defaults.KIT_BASE_NAME
    assert sft["lora_rank"] == kit_defaults.KIT_SFT_LORA_R and sft["batch_size"] == kit_defaults.KIT_SFT_BATCH
    assert spec["lora_rank"] == sft["lora_rank"], "a stage inherits its start's LoRA shape"
    assert spec["beta"] == sdk.TRAINING_KNOBS["beta"]["grpo"]["default"]
    assert spec["epsilon_high"] == sdk.TRAINING_HOST_KEYS["epsilon_high"]["grpo"]["default"]
    assert spec["temperature"] is None, "GRPO reads it from the dataset: validate cannot know it"
    lines: dict[str, str] = {}
    for line in done.stdout.splitlines():  # the root's line first (monitor.temperature is indented below it)
        if ":" in line:
            lines.setdefault(line.split(":")[0].strip(), line)
    assert "# default (the kit's demo base, KIT_BASE_NAME)" in done.stdout
    assert f"\nbase_model: {kit_defaults.KIT_BASE_NAME}  # inherited from the sft stage" in done.stdout
    assert "# grpo's default (DAPO's value)" in lines["epsilon_high"]
    assert "rows' own sampling.temperature" in lines["temperature"]
    rm = yaml.safe_load(whileai("validate", "recipe=rm_tooluse").stdout)
    assert rm["lora_rank"] == core_defaults.TRAIN_LORA_R and rm["batch_size"] == core_defaults.TRAIN_BATCH_SIZE
    assert rm["base_model"] == kit_defaults.KIT_BASE_NAME and rm["learning_rate"] is not None


def test_reproduce_help_prints_the_usage_and_exits_0(capsys):
    from whileai.runner.reproduce import reproduce_main

    assert reproduce_main(["--help"]) == 0 and reproduce_main(["-h"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m whileai reproduce RUN_ID") and "--processes N" in out
    assert reproduce_main([]) == 2 and "usage:" in capsys.readouterr().err


def test_platform_help_names_upgrade():
    from whileai.platform.server import _parser

    assert "python -m whileai platform upgrade" in _parser().format_help()
