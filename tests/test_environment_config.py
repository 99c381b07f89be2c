"""The runner's environment group (conf/environment/): none by default, kit and bfcl by name, a class of the user's
by environment.name=python:MODULE:CLASS; validated once with the other groups (with data that carries episodes
and GRPO sampling every task's), shown by ``validate`` with its tools and turn cap. And the run spec's two fields.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
import yaml
from pydantic import ValidationError
from test_runner_validate import ROOT, compose, run_cli

from whileai.core import defaults as core_defaults
from whileai.core.spec import GRPOSpec, spec_json
from whileai.domain import defaults as sdk
from whileai.domain.episodes import environment_ref
from whileai.runner import schema


def _messages(problems: list[schema.Problem]) -> dict[str, str]:
    return {p.key: p.message for p in problems}


def test_none_is_the_default_and_every_recipe_still_reads_back():
    plain, problems = compose(["recipe=grpo_tooluse"])
    assert problems == []
    assert plain["environment"] == {"name": "none", "category": None, "max_turns": None}
    assert list(plain)[-1] == "environment", "composed after the other groups"
    assert schema.recipe_spec(plain).plain() == plain


@pytest.mark.parametrize("option", sorted(p.stem for p in (ROOT / "conf" / "environment").glob("*.yaml")))
def test_every_option_composes_and_says_what_it_is(option):
    assert option in ("none", "kit", "bfcl")
    text = (ROOT / "conf" / "environment" / f"{option}.yaml").read_text()
    assert text.startswith("# "), "each option opens with what it is"
    plain, _ = compose(["recipe=grpo_tooluse", f"environment={option}"])
    assert plain["environment"] == {**yaml.safe_load(text)}
    assert plain["environment"]["name"] == option


def test_kit_validates_with_grpo_and_is_refused_without_it():
    _, problems = compose(["recipe=agent_tooluse", "environment.max_turns=4"])
    assert problems == []
    _, problems = compose(["recipe=sft_tooluse", "environment=kit"])
    assert {k: v for k, v in _messages(problems).items() if k == "environment.name"} == {"environment.name": (
        "environment=kit is played by GRPO, and no stage of this spec is grpo (method=sft); pick method=grpo (or a "
        "recipe with a grpo stage), or environment=none")}


def test_bfcl_takes_a_multi_turn_category():
    plain, _ = compose(["recipe=grpo_tooluse", "environment=bfcl"])
    assert plain["environment"]["category"] == "multi_turn_base"
    _, problems = compose(["recipe=grpo_tooluse", "environment=bfcl", "environment.category=simple_python"])
    assert _messages(problems)["environment.category"].startswith(
        "environment.category='simple_python' is not a BFCL multi-turn category; pass one of multi_turn_base")
    _, problems = compose(["recipe=agent_tooluse", "environment.category=multi_turn_base"])
    assert _messages(problems) == {"environment.category": (
        "environment.category='multi_turn_base' is read only by environment=bfcl (environment=kit); drop it")}


def test_the_turn_cap_is_checked_against_its_range_and_needs_an_environment():
    low, high = core_defaults.TRAIN_MAX_TURNS_RANGE
    for bad in (low - 1, high + 1):
        _, problems = compose(["recipe=agent_tooluse", f"environment.max_turns={bad}"])
        assert list(_messages(problems)) == ["environment.max_turns"]
    _, problems = compose(["recipe=grpo_tooluse", "environment.max_turns=4"])
    assert _messages(problems) == {"environment.max_turns": (
        "environment.max_turns=4 is read only with an environment; pick environment=kit or bfcl (or "
        "environment.name=python:MODULE:CLASS), or drop it")}


def test_typos_and_misplaced_keys_point_to_the_group():
    _, problems = compose(["recipe=grpo_tooluse", "+environment.max_turn=4"])
    assert "did you mean max_turns?" in _messages(problems)["environment.max_turn"]
    _, problems = compose(["recipe=grpo_tooluse", "environment.name=kitt"])
    assert _messages(problems)["environment.name"] == (
        "environment='kitt' is not an environment; pass kit, bfcl (with a category) or python:MODULE:CLASS, or none")


def test_a_python_environment_is_imported_and_checked_at_validate(tmp_path, monkeypatch):
    (tmp_path / "wai_cfg_envs.py").write_text(textwrap.dedent('''
        class Shelf:
            def reset(self, **kwargs):
                self.items = []

            def put(self, item: str) -> str:
                """Put an item on the shelf.

                Args:
                    item: What to put.
                """
                self.items.append(item)
                return "ok"

        class Loose:
            def reset(self):
                pass

            def put(self, item):
                pass
    '''))
    monkeypatch.chdir(tmp_path)  # the runner imports a python: class from where it runs
    sys.modules.pop("wai_cfg_envs", None)
    own_rows = ["method=grpo", "dataset=jsonl", "dataset.path=episodes.jsonl", "prompt_source=gold"]  # its episodes
    _, problems = compose([*own_rows, "environment.name=python:wai_cfg_envs:Shelf"])
    assert problems == []
    _, problems = compose([*own_rows, "environment.name=python:wai_cfg_envs:Loose"])
    (message,) = _messages(problems).values()
    assert "(2 problem(s))" in message and "Loose.reset(self) does not take **kwargs" in message
    assert "tool Loose.put has no docstring" in message
    assert str(tmp_path) not in sys.path


def test_validate_prints_the_tools_and_the_turn_cap_and_run_refuses_what_it_cannot_play(tmp_path):
    done = run_cli("validate", "recipe=agent_tooluse", "environment.max_turns=4", home=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("# environment kit (whileai.domain.episodes.kit.KitEnvironment): 4 tools, turn cap 4 "
                        "tool-calling rounds (environment.max_turns)")
    assert lines[start + 1:start + 5] == [
        "#   close_account(account: str) -> str: Close an account that holds nothing.",
        "#   deposit(account: str, amount: int) -> int: Add money to an account and return its new balance.",
        "#   get_balance(account: str) -> int: Read the balance of an account.",
        "#   transfer(source: str, target: str, amount: int) -> str: Move money from one account to another."]
    assert yaml.safe_load(done.stdout)["environment"] == {"name": "kit", "category": None, "max_turns": 4}
    plain = run_cli("validate", "recipe=grpo_tooluse", home=tmp_path)
    assert "# environment" not in plain.stdout, "environment=none prints nothing more"
    refused = run_cli("run", "recipe=grpo_tooluse", "environment=kit", home=tmp_path)  # single-turn rows
    assert refused.returncode == 2
    assert "the rows of dataset.source=sample carry none; pick dataset=episodes" in refused.stderr


def test_the_run_spec_carries_the_environment_and_its_turn_cap():
    spec = GRPOSpec(environment=environment_ref("bfcl", "multi_turn_miss_func"), max_turns=sdk.EPISODE_MAX_TURNS)
    assert (spec.environment, spec.max_turns) == ("bfcl:multi_turn_miss_func", sdk.EPISODE_MAX_TURNS)
    assert "environment" not in spec_json(GRPOSpec()) and "max_turns" not in spec_json(GRPOSpec()), \
        "a spec without them records nothing new"
    for bad in ({"environment": "kitt"}, {"environment": "python:mod"}, {"max_turns": 0},
                {"max_turns": core_defaults.TRAIN_MAX_TURNS_RANGE[1] + 1}):
        with pytest.raises(ValidationError):
            GRPOSpec(**bad)
    low, high = core_defaults.TRAIN_MAX_TURNS_RANGE
    assert low <= sdk.EPISODE_MAX_TURNS <= high
