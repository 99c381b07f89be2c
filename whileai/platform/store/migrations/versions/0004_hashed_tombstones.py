"""A deleted run's tombstone keeps the SHA-256 of its id, not the id (store/_runs.py ``tombstone_key``).

The tombstones written before this revision named the id in clear; each is rewritten to its hash, so no
deleted run's id stays in the store.
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0004_hashed_tombstones"
down_revision = "0003_run_metric_names"
branch_labels = None
depends_on = None

_PREFIX = "run_tombstone:"
_HEX = frozenset("0123456789abcdef")


def _hashed(key: str) -> bool:
    rest = key[len(_PREFIX):]
    return len(rest) == 64 and set(rest) <= _HEX


def upgrade() -> None:
    conn = op.get_bind()
    settings = sa.table("settings", sa.column("key", sa.String), sa.column("value", sa.Text))
    found = conn.execute(sa.select(settings.c.key, settings.c.value).where(settings.c.key.startswith(_PREFIX))).all()
    for key, value in found:
        if _hashed(key):
            continue
        hashed = _PREFIX + hashlib.sha256(key[len(_PREFIX):].encode("utf-8")).hexdigest()
        conn.execute(sa.delete(settings).where(settings.c.key == key))
        if conn.execute(sa.select(settings.c.key).where(settings.c.key == hashed)).first() is None:
            conn.execute(sa.insert(settings).values(key=hashed, value=value))


def downgrade() -> None:
    raise NotImplementedError("a hash cannot be turned back into the run id it retired")
