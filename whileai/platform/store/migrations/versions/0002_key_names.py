"""API keys get a name: each data root's local key is its own, named after its machine and folder.

A store shared by several data roots (one PostgreSQL ``--store-url``) keeps one
live key per data root, and ``python -m whileai accounts keys`` says whose each is.
Keys made before this revision have no name.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_key_names"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("name", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("name")
