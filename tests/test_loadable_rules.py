"""whileai/platform/_loadable.py's rules one by one, on paths made here: which roots a base or an adapter may load
from, what reads as a hub id, and the refusal's words (it never says whether a path exists)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from whileai.platform import _loadable, defaults
from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults
from whileai.platform._loadable import adapter_problem, allowed_roots, base_problem, launch_base_problem


def _model(folder: Path) -> str:
    """A folder that holds a model as base_folder_problem reads one: config, weights, tokenizer."""
    folder.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (folder / name).write_text("{}")
    return str(folder)


@pytest.fixture
def roots(home, tmp_path, monkeypatch):
    """The data root's models/ and adapters/, and two operator folders in SERVE_DIRS_ENV (one with blanks around)."""
    extra, other = tmp_path / "served", tmp_path / "served2"
    extra.mkdir()
    other.mkdir()
    monkeypatch.setenv(defaults.SERVE_DIRS_ENV, f"{extra}{os.pathsep} {os.pathsep}{other}")
    return home, extra, other


def test_the_roots_are_the_data_roots_models_and_adapters_then_the_operators_folders(roots):
    home, extra, other = roots
    assert allowed_roots() == [Path(os.path.realpath(p)) for p in (home / "models", home / "adapters", extra, other)]


def test_the_roots_read_the_config_file_when_the_environment_names_none(home, tmp_path, monkeypatch):
    monkeypatch.delenv(defaults.SERVE_DIRS_ENV, raising=False)
    assert allowed_roots() == [Path(os.path.realpath(home / "models")), Path(os.path.realpath(home / "adapters"))]
    (home / "config.json").write_text('{"serve_dirs": "~/served"}')
    assert allowed_roots()[2] == Path(os.path.realpath(Path("~/served").expanduser()))


def test_inside_means_the_root_itself_or_under_it_and_absolute(roots, tmp_path):
    home, extra, _ = roots
    rs = [Path(os.path.realpath(extra))]
    assert _loadable._inside(str(extra), rs) and _loadable._inside(str(extra / "a" / "b"), rs)
    assert not _loadable._inside(str(tmp_path / "served-not"), rs), "a sibling that shares the prefix is outside"
    assert not _loadable._inside(str(extra / ".." / "elsewhere"), rs)
    assert not _loadable._inside("served/a", rs), "a relative path is never inside"
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "outside")
    assert not _loadable._inside(str(link), rs) and _loadable._inside(str(link), [Path(os.path.realpath(tmp_path))])


def test_a_base_directory_is_under_models_or_an_operators_folder_and_never_an_adapter_folder(roots):
    home, extra, other = roots
    assert _loadable._base_dir_ok(str(home / "models" / "m"))
    assert _loadable._base_dir_ok(str(extra / "m")) and _loadable._base_dir_ok(str(other / "m"))
    assert not _loadable._base_dir_ok(str(home / "adapters" / "run_1"))
    assert not _loadable._base_dir_ok(str(home / "elsewhere"))


def test_an_operators_folder_around_the_data_root_still_leaves_out_the_adapters(home, monkeypatch):
    monkeypatch.setenv(defaults.SERVE_DIRS_ENV, str(home))
    assert _loadable._base_dir_ok(str(home / "mine")) and _loadable._base_dir_ok(str(home / "models" / "m"))
    assert not _loadable._base_dir_ok(str(home / "adapters" / "run_1")), "an adapter is never a base"


def test_a_base_is_a_served_name_the_runs_own_hub_base_or_a_directory_under_the_roots(roots):
    home, extra, _ = roots
    for name in (*defaults.SERVED_BASES, kit_defaults.KIT_BASE_NAME):
        assert base_problem(name) is None, name
    assert base_problem("org/model-1.5b", run_base="org/model-1.5b") is None
    assert base_problem("org/model-1.5b", run_base="org/other") is not None, "a hub id only as the run's own base"
    assert base_problem("org/model-1.5b") is not None
    assert base_problem(str(home / "models" / "mine")) is None and base_problem(str(extra / "x")) is None
    own = str(home / "models" / "mine")
    assert base_problem(own, run_base=own) is None
    assert base_problem("../x", run_base="../x") is not None, "a path is never a hub id, even as the run's base"
    assert base_problem("org/../x", run_base="org/../x") is not None


def test_a_refused_base_is_told_what_is_accepted_and_never_whether_it_exists(roots, tmp_path):
    home, _, _ = roots
    expected = (f"baseModel={str(tmp_path / 'nowhere')!r} is not a base this platform loads; send one of SERVED_BASES "
                f"({', '.join(defaults.SERVED_BASES)}), {kit_defaults.KIT_BASE_NAME!r}, the base the run was trained on, "
                "or a directory under the platform's model folders, not a run's adapter folder (its operator adds "
                f"folders with {defaults.SERVE_DIRS_ENV})")
    assert base_problem(str(tmp_path / "nowhere")) == expected
    there = tmp_path / "there"
    there.mkdir()
    assert base_problem(str(there)) == expected.replace(str(tmp_path / "nowhere"), str(there))
    long = "x" * 300
    assert base_problem("/" + long).startswith(f"baseModel={('/' + long)[:200]!r} is not")
    for bad in (None, "", "   ", 3):
        assert base_problem(bad) == f"baseModel={bad!r} is not a model name; send one of SERVED_BASES"


def test_the_embedded_platform_serves_a_model_folder_of_the_users_own_but_not_an_adapter_folder(roots, tmp_path):
    home, _, _ = roots
    own = _model(tmp_path / "mine")
    assert base_problem(own, embedded=True) is None and base_problem(own) is not None
    assert base_problem(_model(home / "adapters" / "run_1"), embedded=True) is not None
    assert base_problem(str(tmp_path / "missing"), embedded=True) is not None
    assert base_problem("org/model", embedded=True) is not None, "a hub id is no path of the user's"
    assert _loadable._own_base(own) and not _loadable._own_base("org/model")


def test_a_job_trains_on_a_hub_id_a_directory_under_the_roots_or_embedded_a_model_of_the_users(roots, tmp_path):
    home, extra, _ = roots
    assert launch_base_problem("org/model") is None and launch_base_problem(kit_defaults.KIT_BASE_NAME) is None
    assert launch_base_problem(str(home / "models" / "m")) is None and launch_base_problem(str(extra)) is None
    own = _model(tmp_path / "mine")
    assert launch_base_problem(own, embedded=True) is None
    refusal = launch_base_problem(own)
    assert refusal == (
        f"spec base_model={own!r} is not a base this platform trains on; send a hub id such as "
        f"{core_defaults.SERVED_HUB_BASES[0]!r}, {kit_defaults.KIT_BASE_NAME!r}, or a directory under the platform's model "
        f"folders, not a run's adapter folder (its operator adds folders with {defaults.SERVE_DIRS_ENV}; the "
        "embedded platform, with no server configured, trains on a model folder of your own as it is)")
    empty = tmp_path / "empty"
    empty.mkdir()
    said = launch_base_problem(str(empty), embedded=True)
    assert said.startswith(f"spec base_model={str(empty)!r} is a folder without a model in it")
    adapter = _model(home / "adapters" / "run_2")
    assert launch_base_problem(adapter, embedded=True).startswith(f"spec base_model={adapter!r} is not a base")
    assert launch_base_problem(str(home / "adapters" / "run_3")).startswith("spec base_model=")
    assert launch_base_problem("../x", embedded=True).startswith("spec base_model='../x' is a relative path")
    for bad in (None, 3, "a b"):
        assert launch_base_problem(bad, embedded=True).startswith(f"spec base_model={str(bad)[:200]!r} is not"), bad
    assert launch_base_problem("/" + "y" * 300).startswith(f"spec base_model={('/' + 'y' * 300)[:200]!r} is not")


def test_an_adapter_is_its_own_runs_or_under_an_operators_folder(roots, tmp_path):
    home, extra, other = roots
    from whileai.core.paths import adapter_dir

    assert adapter_problem(None, None) is None and adapter_problem(None, "run_1") is None
    assert adapter_problem("/x", None) == ("an adapter comes from a run: send adapterRunId (a run of yours whose job "
                                           "saved an adapter)")
    own = adapter_dir("run_1")
    assert adapter_problem(str(own), "run_1") is None and adapter_problem(str(Path(own) / "sub"), "run_1") is None
    assert adapter_problem(str(extra / "a"), "run_1") is None and adapter_problem(str(other / "a"), "run_1") is None
    refused = adapter_problem(str(adapter_dir("run_2")), "run_1")
    assert refused == (
        f"adapter={str(adapter_dir('run_2'))!r} is not the adapter of run run_1: the platform serves the adapter a "
        f"job saved for the run (under its adapter store) or one under a folder its operator added with "
        f"{defaults.SERVE_DIRS_ENV}; send the run's own adapter (wai.serve(run, name) does)")
    assert adapter_problem(str(home / "models" / "m"), "run_1") is not None, "the models folder holds no adapters"
    assert adapter_problem(5, "run_1").startswith("adapter='5' is not the adapter of run run_1")
    assert adapter_problem("/" + "z" * 300, "run_1").startswith(f"adapter={('/' + 'z' * 300)[:200]!r} is not")


def test_a_hub_id_is_one_or_two_plain_names(roots):
    for name in ("model", "org/model", "Org-1/model_v2.5", "a.b/c-d"):
        assert _loadable._is_hub_id(name), name
    for name in ("", "/model", "org/", "org/model/x", "org/../model", "..", "a..b", "-x", "org/-x", "a b", "~/m",
                 "org/model\n"):
        assert not _loadable._is_hub_id(name), name
