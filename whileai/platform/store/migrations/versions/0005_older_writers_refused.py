"""Older whileai cannot write to the store once it is at this revision (store/_writers.py).

Triggers on every table refuse writes from a connection that does not say it runs this revision or a newer
one; older code says nothing, so a server of it still running, registered or not, fails its next write and
changes nothing. migrate.py installs them again after every later upgrade, at that revision.
"""

from __future__ import annotations

from alembic import op

from whileai.platform.store._writers import refuse_older_writers

revision = "0005_older_writers_refused"
down_revision = "0004_hashed_tombstones"
branch_labels = None
depends_on = None


def upgrade() -> None:
    refuse_older_writers(op.get_bind(), revision)


def downgrade() -> None:
    raise NotImplementedError("older code cannot write to this store; restore the copy made before the upgrade")
