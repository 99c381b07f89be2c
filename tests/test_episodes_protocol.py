"""The environment protocol (TRL's environment_factory contract), the python:MODULE:CLASS loader and the registry.

The checker lists every problem of a class at once; the loader and the registry refuse with the value, what
is accepted and the fix. Schemas are read with transformers' own get_json_schema, as TRL reads them.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from pathlib import Path

import pytest
from transformers.utils import get_json_schema

from whileai.domain import defaults
from whileai.domain.episodes import (KitEnvironment, describe_environment, environment_factory, environment_problems,
                                     environment_ref, load_environment, parse_environment_ref, protocol_problems,
                                     tool_methods, tool_schemas)
from whileai.domain.episodes import registry


class _Broken:
    """Every way a class can break the contract, one per method."""

    def reset(self, task: str) -> None:  # no **kwargs: TRL passes every column
        pass

    def get_reward(self, completion: str) -> float:  # TRL calls it with none
        return 0.0

    def undocumented(self, x: str) -> str:
        return x

    def untyped(self, x):  # type: ignore[no-untyped-def]
        """Has a docstring.

        Args:
            x: a thing.
        """

    def variadic(self, *names: str) -> str:
        """Takes any number.

        Args:
            names: the names.
        """
        return ""

    def no_args_section(self, x: str) -> str:
        """Says nothing about x."""
        return x


def test_the_kit_environment_meets_the_protocol():
    assert protocol_problems(KitEnvironment) == []


def test_every_problem_of_a_class_is_listed_at_once():
    problems = protocol_problems(_Broken)
    assert len(problems) == 6, problems
    text = "\n".join(problems)
    assert "_Broken.reset(self, task: str) -> None does not take **kwargs" in text
    assert "_Broken.get_reward needs completion, but TRL calls it with no argument" in text
    assert "tool _Broken.undocumented has no docstring" in text
    assert "tool _Broken.untyped: parameter(s) x have no type hint" in text
    assert "tool _Broken.variadic takes *names/**" in text
    # transformers' own reader refuses it, in its words, with our fix after them
    assert "tool _Broken.no_args_section: Cannot generate JSON schema for no_args_section because the docstring " \
           "has no description for the argument 'x'; write a one-line summary, then 'Args:'" in text


def test_no_reset_no_tool_and_not_a_class_are_problems():
    class Empty:
        def _helper(self) -> None:
            """Private: not a tool."""

    problems = protocol_problems(Empty)
    assert [p.split(";")[0] for p in problems] == ["Empty has no reset method", "Empty has no tool: every public "
                                                   "method other than reset and get_reward is one"]
    (problem,) = protocol_problems(KitEnvironment())
    assert "is a KitEnvironment, not a class" in problem


def test_static_methods_are_tools_and_properties_are_not():
    class World:
        def reset(self, **kwargs: object) -> None:
            """Start."""

        @staticmethod
        def shout(text: str) -> str:
            """Say it loudly.

            Args:
                text: What to say.
            """
            return text.upper()

        @property
        def state(self) -> int:
            return 1

    assert protocol_problems(World) == []
    assert [m.__name__ for m in tool_methods(World())] == ["shout"]


def test_tools_are_what_trl_selects_and_their_schemas_what_it_renders():
    env = KitEnvironment()
    # grpo_trainer.py: functions on the class, less reset and get_reward and private names
    trl_tools = [getattr(env, name) for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
                 if name not in ("reset", "get_reward") and not name.startswith("_")]
    assert [m.__name__ for m in tool_methods(env)] == [m.__name__ for m in trl_tools] == [
        "close_account", "deposit", "get_balance", "transfer"]
    assert tool_schemas(env) == [get_json_schema(m) for m in trl_tools]
    transfer = next(s for s in tool_schemas(env) if s["function"]["name"] == "transfer")["function"]
    assert transfer["parameters"]["required"] == ["source", "target", "amount"]
    assert transfer["parameters"]["properties"]["amount"]["type"] == "integer"
    assert transfer["description"] == "Move money from one account to another."


# ---------------------------------------------------------------------------
# The loader: python:MODULE:CLASS
# ---------------------------------------------------------------------------


def _module(tmp_path: Path, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    sys.modules.pop(name, None)
    return str(tmp_path)


_GOOD = """
    class Counter:
        def __init__(self):
            self.count = 0

        def reset(self, **kwargs):
            self.count = 0

        def add(self, n: int) -> int:
            '''Add to the count.

            Args:
                n: How much to add.
            '''
            self.count += n
            return self.count

    class NeedsArgs(Counter):
        def __init__(self, size):
            super().__init__()

    class Boom(Counter):
        def __init__(self):
            raise RuntimeError("no database here")

    class Untyped(Counter):
        def add(self, n):
            '''Add.'''

    VALUE = 3
"""


def test_a_job_imports_a_user_environment_only_from_the_folder_its_platform_recorded(tmp_path, monkeypatch):
    """The job side of the user-code rule: the embedded platform records the launching user's folder on the row
    (``platform.reward_path``) and the job imports the class from there; a server's row records none, so a module
    that sits only in the job's working folder does not import."""
    from whileai.core.jobrow import JobPlatform
    from whileai.jobs._episode_play import factory_of
    from whileai.jobs._loading import job_platform

    users = tmp_path / "user"
    users.mkdir()
    _module(users, "wai_env_job", _GOOD)
    with job_platform(JobPlatform(reward_path=str(users))):
        assert factory_of("python:wai_env_job:Counter").__name__ == "Counter"
    sys.modules.pop("wai_env_job", None)
    monkeypatch.chdir(users)  # as a server's job sits in a folder it writes
    with job_platform(JobPlatform()), pytest.raises(ValueError, match="module 'wai_env_job' does not import"):
        factory_of("python:wai_env_job:Counter")


def test_a_user_environment_loads_from_the_search_path(tmp_path):
    path = _module(tmp_path, "wai_env_good", _GOOD)
    cls = load_environment("python:wai_env_good:Counter", search_path=path)
    assert cls.__name__ == "Counter" and protocol_problems(cls) == []
    assert str(tmp_path) not in sys.path, "the search path is put back"
    assert environment_factory("python:wai_env_good:Counter", search_path=path) is cls


@pytest.mark.parametrize("ref, words", [
    ("python:wai_env_good", "is not python:MODULE:CLASS; name a dotted module and a class in it, e.g. python:my_envs"),
    ("python:wai_env_absent:X", "module 'wai_env_absent' does not import (ModuleNotFoundError"),
    ("python:wai_env_good:Countr", "module wai_env_good has no class 'Countr' (did you mean Counter?)"),
    ("python:wai_env_good:VALUE", "module wai_env_good has VALUE = int, not a class 'VALUE'"),
    ("python:wai_env_good:NeedsArgs", "NeedsArgs() raised TypeError"),
    ("python:wai_env_good:Boom", "Boom() raised RuntimeError: no database here; TRL builds one environment per "
                                 "rollout with no arguments"),
    ("python:wai_env_good:Untyped", "cannot be handed to TRL's environment_factory (1 problem(s)): tool "
                                    "Untyped.add: parameter(s) n have no type hint"),
])
def test_the_loader_names_the_value_and_the_fix(tmp_path, ref, words):
    path = _module(tmp_path, "wai_env_good", _GOOD)
    with pytest.raises(ValueError) as caught:
        load_environment(ref, search_path=path)
    assert str(caught.value).startswith(f"environment={ref!r}")
    assert words in str(caught.value)


def test_a_module_that_fails_on_import_is_named(tmp_path):
    path = _module(tmp_path, "wai_env_raises", "raise ImportError('needs gym')\n")
    with pytest.raises(ValueError, match=r"module 'wai_env_raises' does not import \(ImportError: needs gym\)"):
        load_environment("python:wai_env_raises:X", search_path=path)


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


def test_the_registry_resolves_kit_and_refuses_other_words():
    assert environment_factory("kit") is KitEnvironment
    assert environment_problems("kit") == [] and environment_problems("none") == []
    with pytest.raises(ValueError, match=r"environment='kitt' is not an environment; pass kit, bfcl \(with a "
                                         r"category\) or python:MODULE:CLASS, or none"):
        environment_factory("kitt")
    assert environment_problems("kit", "multi_turn_base") == [
        "environment.category='multi_turn_base' is read only by environment=bfcl (environment=kit); drop it"]
    (problem,) = environment_problems("bfcl", "simple_python")
    assert problem.startswith("environment.category='simple_python' is not a BFCL multi-turn category; pass one "
                              "of multi_turn_base, multi_turn_miss_func")


def test_bfcl_is_imported_by_name_and_its_absence_is_said(monkeypatch):
    monkeypatch.setitem(registry.LAZY_MODULES, "bfcl", "wai_absent_pkg.bfcl")
    (problem,) = environment_problems("bfcl")
    assert problem == ("environment=bfcl: this whileai has no wai_absent_pkg.bfcl, so bfcl cannot be played here; "
                       "update whileai, or pick environment=kit or python:MODULE:CLASS")
    assert environment_problems("kit") == [], "the other environments still work"


_LAZY = """
    from whileai.domain.episodes import KitEnvironment

    class Other(KitEnvironment):
        def peek(self, account: str) -> int:
            '''Look without reading.

            Args:
                account: Whose.
            '''
            return 0

    def environment_factory(category):
        if category == "multi_turn_long_context":
            raise FileNotFoundError("no data folder")
        return {"bfcl:kit": KitEnvironment, "bfcl:other": Other}
"""


def test_a_lazy_module_may_answer_with_trl_s_dict_of_factories(tmp_path, monkeypatch):
    path = _module(tmp_path, "wai_lazy_bfcl", _LAZY)
    monkeypatch.syspath_prepend(path)
    monkeypatch.setitem(registry.LAZY_MODULES, "bfcl", "wai_lazy_bfcl")
    assert set(environment_factory("bfcl", "multi_turn_base")) == {"bfcl:kit", "bfcl:other"}
    assert environment_problems("bfcl") == []
    info = describe_environment("bfcl")
    assert info.name == "bfcl:multi_turn_base" and [w.label for w in info.worlds] == ["bfcl:kit", "bfcl:other"]
    assert [t.name for t in info.worlds[1].tools] == ["close_account", "deposit", "get_balance", "peek", "transfer"]
    (problem,) = environment_problems("bfcl", "multi_turn_long_context")
    assert problem == ("environment=bfcl: wai_lazy_bfcl.environment_factory('multi_turn_long_context') raised "
                       "FileNotFoundError: no data folder")


def test_a_lazy_module_without_the_factory_is_named(tmp_path, monkeypatch):
    path = _module(tmp_path, "wai_lazy_empty", "X = 1\n")
    monkeypatch.syspath_prepend(path)
    monkeypatch.setitem(registry.LAZY_MODULES, "bfcl", "wai_lazy_empty")
    (problem,) = environment_problems("bfcl")
    assert problem.startswith("environment=bfcl: wai_lazy_empty defines no environment_factory(category)")


def test_describe_shows_the_tools_and_the_turn_cap():
    info = describe_environment("kit")
    (world,) = info.worlds
    assert world.label is None and world.source == "whileai.domain.episodes.kit.KitEnvironment"
    assert [t.signature for t in world.tools][-1] == "transfer(source: str, target: str, amount: int) -> str"
    assert (info.max_turns, info.max_turns_from) == (defaults.EPISODE_MAX_TURNS, "EPISODE_MAX_TURNS, the default")
    assert describe_environment("kit", max_turns=3).max_turns == 3


def test_a_spec_carries_one_string_per_environment():
    assert environment_ref("none") is None and environment_ref("kit") == "kit"
    assert environment_ref("bfcl", "multi_turn_miss_func") == "bfcl:multi_turn_miss_func"
    for name, category in [("kit", None), ("bfcl", "multi_turn_base"), ("python:m:C", None)]:
        ref = environment_ref(name, category)
        assert ref is not None and parse_environment_ref(ref) == (name, category)
