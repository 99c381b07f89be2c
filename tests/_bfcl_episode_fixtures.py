"""The BFCL episode tests' shared fixtures: BFCL's checker for the module, the sample's entries, their gold rows.

tests/test_episodes_bfcl.py and tests/test_runner_bfcl_episodes.py take them by importing them
(``from _bfcl_episode_fixtures import checker_fixture, ...``); pytest knows them by the names the tests ask for
(``checker``, ``entries``, ``rows``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from _bfcl_checker import EPISODE_CATEGORIES, SAMPLE, load_checker  # noqa: E402
from whileai.domain.rows.bfcl_multi_turn import MultiTurnEntry, read_multi_turn  # noqa: E402


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
