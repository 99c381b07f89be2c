"""The platform's rule for what it may load from disk on an account's say-so (whileai/platform/_loadable.py), tested
directly, and through the command line on the embedded platform: a merged export serves as a base there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from whileai.platform import defaults
from whileai.platform._loadable import base_problem
from _runner_helpers import tiny_base, whileai


def _own_folder(tmp_path: Path) -> str:
    """A model folder of the user's own, outside the platform's folders (as ``export RUN --merged DIR`` writes)."""
    folder = tmp_path / "merged"
    shutil.copytree(tiny_base(), folder)
    return str(folder)


def test_the_embedded_platform_serves_a_model_folder_of_the_users_own_and_a_server_does_not(home, tmp_path):
    folder = _own_folder(tmp_path)
    assert base_problem(folder, None, embedded=True) is None
    assert base_problem(folder, "another-base", embedded=True) is None  # an adapter's run trained elsewhere too
    refused = base_problem(folder, None, embedded=False)
    assert refused is not None and defaults.SERVE_DIRS_ENV in refused


def test_no_platform_serves_a_folder_without_a_model_or_a_runs_adapter_folder_as_a_base(home, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    adapter = home / "adapters" / "run_0123456789abcdef"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    for path in (empty, adapter, tmp_path / "missing"):
        for embedded in (True, False):
            assert base_problem(str(path), None, embedded=embedded) is not None, (path, embedded)
    assert base_problem("../x", None, embedded=True) is not None


def test_the_command_line_serves_a_folder_as_a_base_on_the_embedded_platform(home, tmp_path):
    folder = _own_folder(tmp_path)
    served = whileai("serve", folder, "--name", "merged-base", "--json")
    assert served.returncode == 0, served.stderr[-2000:]
    assert json.loads(served.stdout)["baseModel"] == str(Path(folder).resolve())
    listed = whileai("models", "--json")
    assert [m["name"] for m in json.loads(listed.stdout)["models"]] == ["merged-base"], listed.stderr[-2000:]
