"""Every model or tokenizer load in whileai/ says ``local_files_only``, so nothing reaches the hub unasked.

The test session sets ``HF_HUB_OFFLINE=1`` (conftest), which would hide a load that forgot the flag:
a user's machine has no such variable, and there the load would query the hub. So the check is
static (every ``from_pretrained(`` call in the package passes ``local_files_only=``), plus one load
in a process without the offline variables whose network is cut, which must be refused without a
single connection.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from _runner_helpers import ROOT

#: loads that lack the flag today, each with why it is so far harmless; fix the call, then remove it here
_PENDING: dict[tuple[str, str], str] = {}


def _loads_without_the_flag() -> set[tuple[str, str]]:
    """(file, call) for each ``X.from_pretrained(...)`` call under whileai/ without ``local_files_only=``."""
    found = set()
    for path in sorted((ROOT / "whileai").rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "from_pretrained"
                    and not any(k.arg == "local_files_only" for k in node.keywords)):
                found.add((path.relative_to(ROOT).as_posix(), ast.get_source_segment(text, node) or ""))
    return found


def test_every_from_pretrained_in_the_package_passes_local_files_only():
    missing = _loads_without_the_flag() - set(_PENDING)
    assert not missing, ("pass local_files_only= (whileai.jobs._loading.local_only() in a job, True elsewhere) to: "
                         + "; ".join(f"{path}: {call}" for path, call in sorted(missing)))


def test_the_pending_list_only_names_loads_still_lacking_the_flag():
    fixed = set(_PENDING) - _loads_without_the_flag()
    assert not fixed, f"these now pass local_files_only: remove them from _PENDING: {sorted(fixed)}"


def test_the_scan_sees_a_load_without_the_flag():
    tree = ast.parse("AutoModel.from_pretrained(name)\nAutoModel.from_pretrained(name, local_files_only=True)\n")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert [any(k.arg == "local_files_only" for k in c.keywords) for c in calls] == [False, True]


_CUT_NETWORK = textwrap.dedent("""
    import socket
    import traceback
    tried = []
    def cut(*args, **kwargs):
        stack = "".join(traceback.format_stack())
        tried.append("agent registry" if "_detect_agent" in stack else "model files")
        raise OSError("the network is cut by the test")
    socket.getaddrinfo = cut
    socket.socket.connect = cut
    from transformers import AutoConfig
    from whileai.jobs._loading import pretrained
    try:
        pretrained(AutoConfig, "whileai-test/no-such-model")
    except FileNotFoundError as exc:
        print("refused:", exc)
    print("model files:", tried.count("model files"))
    print("agent registry:", tried.count("agent registry"))
""")


def _load_with_the_network_cut() -> str:
    """A job's load of an uncached hub name in a process with no offline variable set and its sockets cut."""
    from whileai.core.defaults import HUB_ALLOW_ENV

    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", HUB_ALLOW_ENV)}
    env["HF_HOME"] = tempfile.mkdtemp()  # no cached registry of huggingface_hub's from an earlier process
    done = subprocess.run([sys.executable, "-c", _CUT_NETWORK], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_job_load_of_an_uncached_hub_name_is_refused_without_asking_the_hub_for_it():
    """No offline variable set and the network cut: the job's loader refuses, naming the fix, and never asks the
    hub for the model's files."""
    out = _load_with_the_network_cut()
    assert "refused: base model 'whileai-test/no-such-model' is not on this machine" in out, out
    assert "model files: 0" in out, out


def test_a_job_load_reaches_no_host_at_all():
    """huggingface_hub builds request headers even for a ``local_files_only`` load and, once a day per HF_HOME,
    fetches its agent-harness registry unless its offline switch is on: the job's loader turns it on for the load."""
    out = _load_with_the_network_cut()
    assert "agent registry: 0" in out and "model files: 0" in out, out


def test_the_loaders_offline_switch_is_the_callers_again_afterwards(monkeypatch):
    from huggingface_hub import constants

    from whileai.core.defaults import HUB_ALLOW_ENV
    from whileai.jobs import _loading

    seen = []

    class Probe:
        @staticmethod
        def from_pretrained(path, **kwargs):
            seen.append((constants.HF_HUB_OFFLINE, kwargs["local_files_only"]))
            raise OSError("no such model")

    for allowed, wanted in (("", (True, True)), ("1", (False, False))):
        monkeypatch.setenv(HUB_ALLOW_ENV, allowed)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        with pytest.raises(FileNotFoundError):
            _loading.pretrained(Probe, "whileai-test/no-such-model")
        assert seen.pop() == wanted and constants.HF_HUB_OFFLINE is False
