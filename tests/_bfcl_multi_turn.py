"""bfcl-eval's multi-turn checker and backends for the agreement test and benchmarks/bfcl_multi_turn_agreement.py.

From the installed ``bfcl-eval`` wheel when there is one (``pip install --no-deps bfcl-eval``), else from the
copies in tests/data/bfcl/multi_turn/bfcl_eval/ (bfcl-eval 2026.3.23, Apache-2.0, tests/data/bfcl/LICENSE),
loaded under their own module names inside stand-in ``bfcl_eval`` packages (as tests/_bfcl.py does for
``ast_checker``), so the test extra installs anywhere. Either way the checker and the backends are BFCL's
code, unmodified.

The episode tests (tests/test_episodes_bfcl.py, tests/test_runner_bfcl_episodes.py) share the fixtures below:
BFCL's checker loaded for the module, and the sample's entries of EPISODE_CATEGORIES with their gold episode rows.
A test module takes them by importing them (``from _bfcl_multi_turn import checker_fixture, ...``); pytest knows
them by the names the tests ask for (``checker``, ``entries``, ``rows``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from whileai.domain.rows.bfcl_multi_turn import MultiTurnEntry, read_multi_turn

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "bfcl" / "multi_turn"
TRAJECTORIES = SAMPLE / "trajectories.jsonl"
VENDORED = SAMPLE / "bfcl_eval"
_PACKAGES = ("bfcl_eval", "bfcl_eval.constants", "bfcl_eval.eval_checker", "bfcl_eval.eval_checker.multi_turn_eval",
             "bfcl_eval.eval_checker.multi_turn_eval.func_source_code")


def installed() -> Path | None:
    """The installed wheel's package folder, or None (also when WHILEAI_BFCL_SAMPLE asks for the copies)."""
    if os.environ.get("WHILEAI_BFCL_SAMPLE"):
        return None
    module = sys.modules.get("bfcl_eval")
    if module is not None and getattr(module, "__file__", None) is None:
        return None  # a stand-in package (this module's or tests/_bfcl.py's) is in place
    try:
        spec = importlib.util.find_spec("bfcl_eval")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def source() -> str:
    return "bfcl-eval wheel" if installed() else "tests/data/bfcl/multi_turn copies"


def data_folder() -> Path:
    """The full data of the wheel when installed, else the committed sample (same layout)."""
    base = installed()
    return base / "data" if base is not None else SAMPLE


def load_checker() -> Any:
    """BFCL's ``multi_turn_checker`` module; its backends import under ``bfcl_eval`` from the same place."""
    if installed() is None:
        for name in _PACKAGES:
            package = sys.modules.get(name)
            if package is None:
                package = types.ModuleType(name)
                package.__path__ = []
                sys.modules[name] = package
            folder = str(VENDORED.joinpath(*name.split(".")[1:]))
            if folder not in package.__path__:
                package.__path__.append(folder)
    return importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")


#: The sample's entries the episode tests read: two categories (a miss_func entry's class withholds a function until a
#: later turn).
EPISODE_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func")


@pytest.fixture(scope="module", autouse=True, name="checker")
def checker_fixture() -> Any:
    """BFCL's checker and backends in this process (the wheel's, else the committed copies)."""
    return load_checker()


@pytest.fixture(scope="module", name="entries")
def entries_fixture() -> list[MultiTurnEntry]:
    """The sample's entries of EPISODE_CATEGORIES."""
    return read_multi_turn(SAMPLE, EPISODE_CATEGORIES)


@pytest.fixture(scope="module", name="rows")
def rows_fixture(entries: list[MultiTurnEntry]) -> list[dict[str, Any]]:
    """Each entry as its gold episode row."""
    from whileai.domain.episodes.bfcl_rows import bfcl_episode_rows

    return bfcl_episode_rows(entries, SAMPLE)
