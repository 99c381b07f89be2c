"""bfcl-eval's multi-turn checker and backends, for benchmarks/bfcl_multi_turn_agreement.py and the BFCL episode tests.

From the installed ``bfcl-eval`` wheel when there is one (``pip install --no-deps bfcl-eval``), else from the
copies in tests/data/bfcl/multi_turn/bfcl_eval/ (bfcl-eval 2026.3.23, Apache-2.0, tests/data/bfcl/LICENSE),
loaded under their own module names inside stand-in ``bfcl_eval`` packages (as benchmarks/_bfcl_single_turn.py does for
``ast_checker``), so the test extra installs anywhere. Either way the checker and the backends are BFCL's
code, unmodified.

The episode tests' shared fixtures, built on this loader, are in tests/_bfcl_episode_fixtures.py, so that the
benchmark needs no pytest.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Any

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
        return None  # a stand-in package (this module's or benchmarks/_bfcl_single_turn.py's) is in place
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


#: The sample's categories the episode tests read (tests/_bfcl_episode_fixtures.py): a miss_func entry's class
#: withholds a function until a later turn.
EPISODE_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func")
