"""Stores the platform's data tests share: a fresh SQLite store per test, the PostgreSQL one, the data root's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from whileai.platform.store import Store


def sqlite_store(folder: Path) -> Iterator[Store]:
    """A fresh SQLite store in ``folder``, closed after the test (use as a fixture body)."""
    s = Store(f"sqlite:///{folder / 'p.db'}")
    yield s
    s.close()


def postgres_store() -> Store:
    """The store on WHILEAI_TEST_POSTGRES_URL; skipped where there is none, unless WHILEAI_REQUIRE_POSTGRES=1."""
    url = os.environ.get("WHILEAI_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    try:
        s = Store(url)
        s.count_accounts()
    except Exception as exc:
        if os.environ.get("WHILEAI_REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip(f"no PostgreSQL at {url} ({type(exc).__name__})")
    return s


@contextlib.contextmanager
def data_root_store() -> Iterator[Store]:
    """The store of the data root the test runs on (``store_url()``), opened beside the platform's and closed after."""
    from whileai.platform.store import store_url

    store = Store(store_url())
    try:
        yield store
    finally:
        store.close()
