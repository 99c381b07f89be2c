"""constraints.txt: the script that writes and checks it, what a run records against it, and where that is shown.

Light: no training, no server. The script is loaded from scripts/ and run in this process.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

from whileai.platform.pages import _views
from whileai.runner import defaults, provenance
from whileai.core import defaults as core_defaults

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("make_constraints", ROOT / "scripts" / "make_constraints.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _with_pin(path: Path, name: str, version: str) -> None:
    lines = [f"{name}=={version}" if line.startswith(f"{name}==") else line
             for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


def test_the_script_writes_pins_of_installed_packages_and_refuses_to_overwrite(script, tmp_path, capsys):
    out = tmp_path / "constraints.txt"
    assert script.main(["--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("#") and "python scripts/make_constraints.py --force" in text
    pins = dict(line.split("==") for line in text.splitlines() if line and not line.startswith("#"))
    assert list(pins) == sorted(pins), "sorted by name"
    assert "whileai" not in pins
    for name, version in pins.items():
        assert name == provenance.canonical_name(name), name
        assert provenance.pin_matches(version, metadata.version(name)), name  # each line is an installed package
    assert "+" not in pins["torch"]  # ==X admits X+cpu and a CUDA build alike
    for name in ("transformers", "trl", "peft", "pytest", "ruff"):  # the main dependencies and the test extra
        assert pins[name] == metadata.version(name)

    out.write_text("# mine\n")
    capsys.readouterr()
    assert script.main(["--out", str(out)]) == 1
    assert "--force" in capsys.readouterr().err
    assert out.read_text() == "# mine\n", "an existing file is left alone without --force"
    assert script.main(["--out", str(out), "--force"]) == 0
    assert out.read_text() == text


def test_check_exits_1_on_a_wrong_pin_and_0_when_the_file_matches(script, tmp_path, capsys):
    out = tmp_path / "constraints.txt"
    assert script.main(["--path", str(out)]) == 0
    capsys.readouterr()
    assert script.main(["--check", "--path", str(out)]) == 0
    _with_pin(out, "transformers", "0.0.1")
    assert script.main(["--check", "--path", str(out)]) == 1
    said = capsys.readouterr().out
    assert f"transformers: pinned 0.0.1, installed {metadata.version('transformers')}" in said
    assert script.main(["--check", "--path", str(tmp_path / "absent.txt")]) == 1


def test_a_run_records_the_packages_installed_at_another_version_than_pinned(tmp_path):
    installed = provenance.versions()
    same = tmp_path / "same.txt"
    same.write_text("# pins\n" + "".join(f"{n}=={(installed[n] or '').split('+')[0]}\n"
                                         for n in defaults.VERSIONED_PACKAGES if n != "whileai"))
    assert provenance.constraints_differ(same) == {}
    wrong = tmp_path / "wrong.txt"
    wrong.write_text(same.read_text())
    _with_pin(wrong, "transformers", "0.0.1")
    assert provenance.constraints_differ(wrong) == {
        "transformers": {"pinned": "0.0.1", "installed": metadata.version("transformers")}}
    assert provenance.constraints_differ(tmp_path / "absent.txt") is None  # an installed wheel: nothing to compare
    assert provenance.pin_matches("2.13.0", "2.13.0+cpu") and not provenance.pin_matches("2.13.0+cpu", "2.13.0")

    context = SimpleNamespace(recipe="r", overrides=[], choices={}, command="c", sweep_id=None, output_dir=tmp_path,
                              reproduces=None, expect_lines={})
    record = provenance.runner_record({}, context)
    assert record.constraints_differ == provenance.constraints_differ()
    assert record.constraints_file == provenance.constraints_compared()[1] == {"name": "constraints.txt", "found": True}


def test_a_run_records_whether_it_found_a_constraints_file_to_compare_with(tmp_path):
    installed = provenance.versions()
    same = tmp_path / "constraints.txt"
    same.write_text("".join(f"{n}=={(installed[n] or '').split('+')[0]}\n"
                            for n in defaults.VERSIONED_PACKAGES if n != "whileai"))
    assert provenance.constraints_compared(same) == ({}, {"name": "constraints.txt", "found": True})
    _with_pin(same, "transformers", "0.0.1")
    assert provenance.constraints_compared(same) == (
        {"transformers": {"pinned": "0.0.1", "installed": metadata.version("transformers")}},
        {"name": "constraints.txt", "found": True})
    # an installed wheel has no file beside it: nothing compared, and the record says so
    assert provenance.constraints_compared(tmp_path / "absent.txt") == (None, {"name": "absent.txt", "found": False})
    unreadable = tmp_path / "latin.txt"
    unreadable.write_bytes(b"torch==\xff\n")
    assert provenance.constraints_compared(unreadable) == (None, {"name": "latin.txt", "found": False})


def test_the_words_name_the_installed_and_the_pinned_version():
    differ = {"transformers": {"pinned": "5.24.0", "installed": "5.25.0"}, "peft": {"pinned": "0.21.2", "installed": None}}
    words = ("installed packages differ from constraints.txt: peft not installed (pinned 0.21.2), "
             "transformers 5.25.0 (pinned 5.24.0)")
    assert provenance.constraints_text(differ) == words
    assert _views.constraints_text(differ) == words  # the page words it as the terminal does
    assert provenance.constraints_text({}) is None and provenance.constraints_text(None) is None


def test_the_committed_file_pins_every_versioned_package():
    pins = provenance.read_pins(ROOT / core_defaults.CONSTRAINTS_FILE)
    for name in defaults.VERSIONED_PACKAGES:
        if name != "whileai":  # installed from the checkout itself, never pinned
            assert name in pins, name
    assert "whileai" not in pins


def _runner_with(**fields) -> dict:
    return {"id": "run_1", "kind": "hosted", "config": {"spec": {"beta": 0.04}, "runner": {"spec": {}, **fields}}}


NO_FILE = {"constraints_differ": None, "constraints_file": {"name": "constraints.txt", "found": False}}
FOUND = {"name": "constraints.txt", "found": True}


def test_the_run_page_words_no_file_apart_from_not_recorded():
    said = {name: _views.config_parts(_runner_with(**fields))["constraints_words"] for name, fields in {
        "all match": {"constraints_differ": {}, "constraints_file": FOUND},
        "differs": {"constraints_differ": {"torch": {"pinned": "2.13.0", "installed": "2.14.1"}}, "constraints_file": FOUND},
        "no file": NO_FILE,
        "older, null": {"constraints_differ": None},
        "older, absent": {}}.items()}
    assert said == {"all match": "none", "differs": "installed packages differ from constraints.txt: torch 2.14.1 (pinned 2.13.0)",
                    "no file": "no constraints.txt to compare with", "older, null": "not recorded",
                    "older, absent": "not recorded"}
    assert _views.config_parts({"id": "run_2", "config": None})["constraints_words"] == "not recorded"
    assert _views.config_parts(_runner_with(**NO_FILE))["constraints_text"] is None, "no notice beside the result"
    assert "constraints_words" in (ROOT / "whileai" / "platform" / "pages" / "static" / "run.js").read_text()


def test_diff_and_reproduce_word_no_file_apart_from_not_recorded():
    from whileai.runner.depends import depends_differences, depends_on
    from whileai.runner.reproduce import _pinned_text

    row = "packages off constraints.txt"
    assert depends_on(_runner_with(constraints_differ={}, constraints_file=FOUND))[row] == "none"
    assert depends_on(_runner_with(**NO_FILE))[row] == "no constraints.txt to compare with"
    assert depends_on(_runner_with(constraints_differ=None))[row] is None, "an older record: not recorded"
    checked = _runner_with(constraints_differ={}, constraints_file=FOUND)
    assert depends_differences(checked, _runner_with(**NO_FILE)) == [(row, "none", "no constraints.txt to compare with")]
    assert depends_differences(checked, _runner_with(constraints_differ=None)) == [], "not recorded is no difference"
    assert _pinned_text({}, FOUND) is None, "reproduce says nothing where all match"
    assert _pinned_text(None, {"name": "constraints.txt", "found": False}) == "no constraints.txt to compare with"
    assert _pinned_text({"torch": {"pinned": "2.13.0", "installed": "2.14.1"}}, FOUND) == (
        "installed packages differ from constraints.txt: torch 2.14.1 (pinned 2.13.0)")


def test_the_run_page_says_which_packages_differ_beside_the_result():
    differ = {"transformers": {"pinned": "5.24.0", "installed": "5.25.0"}}
    record = {"id": "run_1", "kind": "hosted", "config": {"spec": {"beta": 0.04}, "runner": {
        "spec": {"beta": 0.04}, "versions": {"transformers": "5.25.0"}, "constraints_differ": differ}}}
    parts = _views.config_parts(record)
    assert parts["constraints_differ"] == differ
    assert parts["constraints_text"] == "installed packages differ from constraints.txt: transformers 5.25.0 (pinned 5.24.0)"
    same = {**record, "config": {"runner": {"spec": {}, "constraints_differ": {}}}}
    assert _views.config_parts(same)["constraints_text"] is None
    assert _views.config_parts({"id": "run_2", "config": None})["constraints_text"] is None
    assert "constraints_text" in (ROOT / "whileai" / "platform" / "pages" / "static" / "run.js").read_text()
