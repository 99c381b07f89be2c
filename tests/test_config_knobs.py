"""Every knob ``run --help`` lists is a key of the composed config: typed on the command line, it needs no ``+``.

Hydra refuses a command-line key the composed config lacks ("Key 'vllm_mode' is not in struct"), so
conf/config.yaml's root knobs are generated from the declarations (``knobs_doc.root_knobs_yaml``) and
this test types each listed knob, with a valid value, after a committed recipe of a method that reads
it, through ``validate`` itself (in process, one call per recipe with all its knobs at once).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from whileai.core.spec import SPEC_MODELS, knob_of

from _runner_helpers import ROOT

#: the committed recipe each method's knobs are typed after (its root stage is that method)
_RECIPE = {"sft": "sft_tooluse", "grpo": "grpo_tooluse", "dpo": "dpo_tooluse", "rm": "rm_tooluse"}
#: a valid value for the knobs whose declared default is None ("not given") or does not fit the others typed with
#: it, on that recipe (reward_model is read only when reward includes rm; one weight per reward; turn_reward only
#: in an environment, which grpo_tooluse has not: null, its off; prompt_filter_pool likewise)
_VALUE = {"steps": "30", "batch_per_device": "4", "max_tool_output_chars": "4000", "reward": "[first_action,rm]",
          "reward_weights": "[1.0,0.5]", "reward_model": "run_0123456789abcdef", "turn_reward": "null",
          "prompt_filter_pool": "null"}
_HELP_LINE = re.compile(r"^  ([a-z_.]+) \(([a-z, ]+)\): ")


@pytest.fixture(scope="module")
def listed() -> dict[str, list[str]]:
    """``run --help``'s knobs: the name as typed -> the methods that read it."""
    out = subprocess.run([sys.executable, "-m", "whileai", "run", "--help"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    found = {m.group(1): m.group(2).split(", ") for m in map(_HELP_LINE.match, out.stdout.splitlines()) if m}
    assert len(found) >= 30 and "vllm_mode" in found and "batch_per_device" in found, out.stdout
    return found


def _typed(value: object) -> str:
    """A declared default as the command line writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_typed(v) for v in value) + "]"
    return str(value)


def _override(typed: str, method: str) -> str:
    name = typed.rsplit(".", 1)[-1]
    default = knob_of(SPEC_MODELS[method], name).default
    value = _VALUE[name] if name in _VALUE or default is None else _typed(default)
    return f"{typed}={value}"


@pytest.mark.parametrize("method", list(_RECIPE))
def test_each_listed_knob_is_accepted_without_a_plus(listed, method, capsys):
    from whileai.runner.cli import validate_main

    knobs = [typed for typed, methods in listed.items() if methods[0] == method]
    overrides = [_override(typed, method) for typed in knobs]
    try:
        code = validate_main([f"recipe={_RECIPE[method]}", *overrides])
    except SystemExit as exc:  # validate's refusal (exit 2) and Hydra's own (a key not in struct) both exit
        code = exc.code
    said = capsys.readouterr()
    assert "not in struct" not in said.err and code == 0, (overrides, said.err[-3000:])
    assert all(o.split("=", 1)[0].rsplit(".", 1)[-1] + ":" in said.out for o in overrides), said.out


def test_every_listed_knob_has_a_recipe_of_its_method(listed):
    assert {methods[0] for methods in listed.values()} <= set(_RECIPE)
    names = {typed.rsplit(".", 1)[-1] for typed in listed}
    no_default = {n for n in names if all(knob_of(SPEC_MODELS[m], n).default is None
                                          for m in SPEC_MODELS if n in SPEC_MODELS[m].model_fields)}
    assert no_default <= set(_VALUE), f"give these a valid value in _VALUE: {sorted(no_default - set(_VALUE))}"


def test_the_reported_command_validates(tmp_path):
    """The command a user typed: the GRPO recipe with vLLM's server mode and a per-device cap."""
    import os

    env = {**os.environ, "WHILEAI_HOME": str(tmp_path)}
    env.pop("WHILEAI_RUNNER_TOKEN", None)
    out = subprocess.run([sys.executable, "-m", "whileai", "validate", "recipe=grpo_tooluse", "vllm_mode=server",
                          "batch_per_device=8"], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    assert "vllm_mode: server" in out.stdout and "batch_per_device: 8" in out.stdout
