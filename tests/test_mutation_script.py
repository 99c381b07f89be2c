"""scripts/mutation.py without running mutmut: its module -> tests mapping names files that exist, the survivors
file parses, and a survivor is matched against that file by module, function and mutation.

Light: the script is loaded from scripts/ and its helpers called in this process (mutmut itself takes minutes a
module and never runs here).
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("mutation_script", ROOT / "scripts" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_every_module_and_each_of_its_test_files_exist(script):
    assert script.MODULES, "nothing to mutate"
    for module, tests in script.MODULES.items():
        assert module.startswith("whileai/") and module.endswith(".py") and (ROOT / module).is_file(), module
        assert tests, f"{module} has no test files"
        for test in tests:
            assert test.startswith("tests/test_") and test.endswith(".py"), test
            assert (ROOT / test).is_file(), f"{module}: {test} does not exist"
    assert 0 < script.MIN_SCORE <= 1


def test_the_survivors_file_parses_and_names_only_modules_of_the_mapping(script):
    listed = script.read_survivors()
    for survivor in listed:
        assert survivor.module in script.MODULES, survivor
        assert survivor.line > 0 and " -> " in survivor.mutation and survivor.reason and survivor.function, survivor
    assert script.read_survivors(script.SURVIVORS) == listed


def test_a_row_reads_back_as_the_survivor_it_was_printed_from(script, tmp_path):
    one = script.Survivor("whileai/core/stats.py", 56, "wilson", "min(1.0, a | b) -> min(2.0, a < b & c &lt;)", "the same")
    path = tmp_path / "survivors.md"
    path.write_text("# Surviving mutants\n\n| module | line | function | mutation | reason |\n|---|---|---|---|---|\n"
                    + one.row() + "\n")
    assert script.read_survivors(path) == [one]
    path.write_text(script.Survivor(one.module, 1, "f", "a -> b").row() + "\n")
    with pytest.raises(ValueError, match="no reason"):
        script.read_survivors(path)
    path.write_text("| whileai/core/stats.py | x | f | `a -> b` | why |\n")
    with pytest.raises(ValueError, match="is not a row"):
        script.read_survivors(path)


def test_a_survivor_is_matched_by_module_function_and_mutation_not_by_line(script):
    s = script.Survivor
    listed = [s("whileai/a.py", 10, "f", "x -> y", "why"), s("whileai/a.py", 20, "f", "x -> y", "why"),
              s("whileai/a.py", 30, "g", "p -> q", "why"), s("whileai/b.py", 1, "h", "m -> n", "why")]
    found = [s("whileai/a.py", 12, "f", "x -> y"), s("whileai/a.py", 22, "f", "x -> y"), s("whileai/a.py", 5, "f", "u -> v")]
    missing, stale = script.unlisted(found, listed)
    assert missing == [found[2]], "a new mutation is unlisted; the same two moved by an edit above are not"
    assert stale == [listed[2]], "a listed survivor of a module that ran and that no longer survives is stale"
    three = found[:2] + [s("whileai/a.py", 40, "f", "x -> y")]
    assert script.unlisted(three, listed)[0] == [three[2]], "each listed row covers one survivor"


def test_the_changed_part_of_a_line_is_shown_with_some_context(script):
    changed = script._changed("high = 1.0 if k == n else min(1.0, center + half)",
                              "high = 1.0 if k == n else min(2.0, center + half)")
    assert changed.startswith("== n else min(1.0,") and " -> " in changed and "min(2.0," in changed
    assert script._changed("if n == 0:", "if n == 1:") == "if n == 0: -> if n == 1:"


def test_the_scratch_config_mutates_the_one_module_with_its_own_tests(script):
    config = tomllib.loads(script.pyproject("whileai/core/stats.py", ("tests/test_stats.py",), ["benchmarks", "tests"]))
    mutmut = config["tool"]["mutmut"]
    assert mutmut["only_mutate"] == ["whileai/core/stats.py"] and mutmut["source_paths"] == ["whileai"]
    assert mutmut["pytest_add_cli_args_test_selection"] == ["tests/test_stats.py"]
    assert mutmut["also_copy"] == ["benchmarks", "tests"]
    repo = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["pytest"] == repo["tool"]["pytest"], "the tests run with the checkout's pytest settings"
    assert "mutmut" not in repo["tool"], "the script writes mutmut's settings into each scratch copy"


def test_a_scratch_copy_holds_the_files_git_lists_new_ones_included(script):
    files = script._files()
    assert "scripts/mutation.py" in files and "tests/test_mutation_script.py" in files and "whileai/core/stats.py" in files
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in files)


def test_mutmut_is_pinned_in_the_test_extra_and_in_constraints(script):
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(req.replace(" ", "").startswith("mutmut==") for req in extra), extra
    pins = [line for line in (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("mutmut==")]
    assert len(pins) == 1, pins


def test_an_unknown_module_is_refused_and_list_runs_nothing(script, capsys):
    assert script.main(["whileai/nope.py"]) == 2
    assert "not in MODULES" in capsys.readouterr().err
    assert script.main(["--list"]) == 0
    assert "whileai/core/stats.py: tests/test_stats.py" in capsys.readouterr().out
