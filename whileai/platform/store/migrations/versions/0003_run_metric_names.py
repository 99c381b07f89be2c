"""A run's distinct metric names, in a table of their own (RUN_METRIC_NAMES_MAX).

Runs from before this revision have no row: their names are read once from their
points when their next batch arrives, so nothing needs filling in here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_run_metric_names"
down_revision = "0002_key_names"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_metric_names",
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("names", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_metric_names")
