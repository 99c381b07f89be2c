"""A warm process is "the same install" only while every distribution it has imported from is unchanged
(whileai/platform/launcher/_warm_install.py, checked by _warm_process.py on every request).

The distribution upgraded here is a real one, small and pure Python, laid out in a site folder as pip lays one out
(its package, and a dist-info folder with METADATA, INSTALLER and RECORD); an upgrade removes the old version's
files and writes the new one's, as pip does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from whileai.platform import defaults
from whileai.platform.launcher import _warm, _warm_install
from _job_helpers import wait_for, warm_ready


def _install_probe(site: Path, version: str) -> Path:
    """``whileai_probe`` ``version`` installed into ``site`` (any older one removed first); its dist-info folder."""
    for old in site.glob("whileai_probe-*.dist-info"):
        shutil.rmtree(old)
    shutil.rmtree(site / "whileai_probe", ignore_errors=True)  # its __pycache__ too, as pip removes it
    (site / "whileai_probe").mkdir()
    (site / "whileai_probe" / "__init__.py").write_text(f'VERSION = "{version}"\n')
    info = site / f"whileai_probe-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: whileai-probe\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    files = ["whileai_probe/__init__.py", *(f"{info.name}/{name}" for name in ("METADATA", "INSTALLER", "RECORD"))]
    (info / "RECORD").write_text("".join(f"{file},,\n" for file in files))
    return info


def test_the_install_covers_every_distribution_imported_from_and_sees_an_upgrade(tmp_path, monkeypatch):
    import pydantic  # noqa: F401 - two of the libraries the command line and the jobs run against
    import sqlalchemy  # noqa: F401

    site = tmp_path / "site"
    site.mkdir()
    first = _install_probe(site, "1.0")
    monkeypatch.syspath_prepend(str(site))
    try:
        import whileai_probe  # noqa: F401

        install = _warm_install.loaded()
    finally:
        sys.modules.pop("whileai_probe", None)
    names = {Path(folder).name.partition("-")[0].lower() for folder in install}
    assert {"whileai_probe", "pydantic", "sqlalchemy", "whileai"} <= names
    assert "torch" not in sys.modules or "torch" in names
    assert _warm_install.changed(install) is None
    _install_probe(site, "2.0")
    assert _warm_install.changed(install) == str(first)


def test_a_reinstall_of_the_same_version_is_a_change(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    first = _install_probe(site, "1.0")
    monkeypatch.syspath_prepend(str(site))
    try:
        import whileai_probe  # noqa: F401

        install = _warm_install.loaded()
    finally:
        sys.modules.pop("whileai_probe", None)
    _install_probe(site, "1.0")
    assert _warm_install.changed(install) == str(first)


def _validate_with_probe(work: Path) -> subprocess.CompletedProcess[str]:
    """A command whose reward module says which whileai_probe it runs against."""
    return subprocess.run([sys.executable, "-m", "whileai", "validate", "recipe=grpo_tooluse",
                           "reward=python:probe_reward:score"], capture_output=True, text=True, cwd=work, timeout=300)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.slow
def test_after_an_upgrade_of_a_library_the_warm_process_holds_the_next_command_runs_the_new_one(home, tmp_path,
                                                                                                monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    _install_probe(site, "1.0")
    (site / "sitecustomize.py").write_text("import whileai_probe  # every interpreter here holds it from its start\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    warm_home = tmp_path / "warm-home"  # a warm process of its own: the session's was started without the probe
    warm_home.mkdir()
    monkeypatch.setenv(defaults.WARM_HOME_ENV, str(warm_home))
    work = tmp_path / "work"
    work.mkdir()
    (work / "probe_reward.py").write_text(
        "import sys\n\nimport whileai_probe\n\nprint('whileai_probe', whileai_probe.VERSION, file=sys.stderr)\n\n\n"
        "def score(prompts, completions, **kwargs):\n    return [0.0] * len(completions)\n")
    log = warm_home / "warm" / "warm.log"
    try:
        warm = warm_ready()
        before = _validate_with_probe(work)
        assert before.returncode == 0 and "whileai_probe 1.0" in before.stderr, before.stderr[-2000:]
        assert "command `whileai validate` started" in log.read_text()  # the warm process ran it, on its 1.0
        _install_probe(site, "2.0")
        after = _validate_with_probe(work)
        assert after.returncode == 0 and "whileai_probe 2.0" in after.stderr, after.stderr[-2000:]
        assert "whileai_probe-1.0.dist-info has changed since it was imported; exiting" in log.read_text()
        wait_for(lambda: not _alive(warm), 30, "the warm process of the old install to exit")
    finally:
        _warm.shutdown(warm_home)
