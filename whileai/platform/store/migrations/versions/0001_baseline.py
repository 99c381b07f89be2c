"""Baseline: the store's schema as it was when revisions began (what ``create_all`` made until then).

Its tables are frozen here, not read from the models, so later revisions change
them from this known start. It is the one idempotent revision: a store made
before revisions existed (no ``alembic_version`` table) runs it too, and gets
only the tables, columns and indexes it lacks (e.g. ``page_tokens.key_hash``,
which stores of commit 6c8f21a do not have); then it is stamped like any other.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None

_BigPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_meta = sa.MetaData()


def _t(name: str, *items: Any) -> sa.Table:
    return sa.Table(name, _meta, *items)


_t("accounts",
   sa.Column("id", sa.String(32), primary_key=True),
   sa.Column("name", sa.String(200), nullable=False),
   sa.Column("created_at", sa.Float, nullable=False))
_t("api_keys",
   sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
   sa.Column("account_id", sa.String(32), sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True),
   sa.Column("prefix", sa.String(32), nullable=False, index=True),
   sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
   sa.Column("created_at", sa.Float, nullable=False))
_t("job_keys",
   sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
   sa.Column("account_id", sa.String(32), nullable=False, index=True),
   sa.Column("job_id", sa.String(32), nullable=False, index=True),
   sa.Column("prefix", sa.String(32), nullable=False, index=True),
   sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
   sa.Column("created_at", sa.Float, nullable=False))
_t("settings",
   sa.Column("key", sa.String(100), primary_key=True),
   sa.Column("value", sa.Text, nullable=False))
_t("datasets",
   sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
   sa.Column("id", sa.String(32), nullable=False, unique=True),
   sa.Column("account_id", sa.String(32), nullable=False, index=True),
   sa.Column("name", sa.String(400)),
   sa.Column("rows_json", sa.Text, nullable=False),
   sa.Column("row_count", sa.Integer, nullable=False),
   sa.Column("content_hash", sa.String(64), nullable=False),
   sa.Column("split", sa.String(100)),
   sa.Column("sibling", sa.String(32)),
   sa.Column("created_at", sa.Float, nullable=False),
   sa.Column("updated_at", sa.Float, nullable=False),
   sa.UniqueConstraint("account_id", "content_hash"))
_t("runs",
   sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
   sa.Column("id", sa.String(32), nullable=False, unique=True),
   sa.Column("account_id", sa.String(32), nullable=False),
   sa.Column("name", sa.String(400)),
   sa.Column("kind", sa.String(100)),
   sa.Column("status", sa.String(16), nullable=False),
   sa.Column("dataset", sa.String(400)),
   sa.Column("after_dataset", sa.String(400)),
   sa.Column("config_json", sa.Text, nullable=False),
   sa.Column("summary_json", sa.Text, nullable=False),
   sa.Column("error", sa.Text),
   sa.Column("step", sa.BigInteger, nullable=False),
   sa.Column("total_steps", sa.BigInteger),
   sa.Column("created_at", sa.Float, nullable=False),
   sa.Column("updated_at", sa.Float, nullable=False),
   sa.Column("finished_at", sa.Float),
   sa.Index("ix_runs_account_pk", "account_id", "pk"))
_t("points",
   sa.Column("pk", _BigPK, primary_key=True, autoincrement=True),
   sa.Column("run_id", sa.String(32), nullable=False),
   sa.Column("step", sa.BigInteger),
   sa.Column("ts", sa.Float, nullable=False),
   sa.Column("metrics", sa.Text, nullable=False),
   sa.Index("ix_points_run_ts", "run_id", "ts"))
_t("point_batches",
   sa.Column("run_id", sa.String(32), primary_key=True),
   sa.Column("batch_id", sa.String(200), primary_key=True),
   sa.Column("count", sa.Integer, nullable=False),
   sa.Column("created_at", sa.Float, nullable=False))
_t("models",
   sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
   sa.Column("account_id", sa.String(32), nullable=False, index=True),
   sa.Column("name", sa.String(200), nullable=False),
   sa.Column("base_model", sa.String(400)),
   sa.Column("adapter", sa.Text),
   sa.Column("adapter_run_id", sa.String(32)),
   sa.Column("version", sa.Integer, nullable=False),
   sa.Column("created_at", sa.Float, nullable=False),
   sa.Column("updated_at", sa.Float, nullable=False),
   sa.UniqueConstraint("account_id", "name"))
_t("jobs",
   sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
   sa.Column("id", sa.String(32), nullable=False, unique=True),
   sa.Column("account_id", sa.String(32), nullable=False, index=True),
   sa.Column("run_id", sa.String(32), index=True),
   sa.Column("kind", sa.String(100)),
   sa.Column("target", sa.String(100)),
   sa.Column("status", sa.String(16), nullable=False),
   sa.Column("pid", sa.Integer),
   sa.Column("call_id", sa.String(400)),
   sa.Column("spec_json", sa.Text, nullable=False),
   sa.Column("heartbeat_at", sa.Float),
   sa.Column("error", sa.Text),
   sa.Column("created_at", sa.Float, nullable=False),
   sa.Column("updated_at", sa.Float, nullable=False),
   sa.Column("finished_at", sa.Float))
_t("page_tokens",
   sa.Column("token_hash", sa.String(64), primary_key=True),
   sa.Column("account_id", sa.String(32), nullable=False, index=True),
   sa.Column("kind", sa.String(16), nullable=False),
   sa.Column("created_at", sa.Float, nullable=False),
   sa.Column("expires_at", sa.Float, nullable=False, index=True),
   sa.Column("key_hash", sa.String(64), nullable=True))


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    existing = set(inspector.get_table_names())
    for table in _meta.sorted_tables:
        if table.name not in existing:
            table.create(bind)  # with its indexes
            continue
        have = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in have:
                continue
            if not column.nullable:
                raise RuntimeError(
                    f"the store's table {table.name} lacks the required column {column.name}, which an upgrade "
                    "cannot fill in; this store was not made by whileai, or by a version older than any released"
                )
            op.add_column(table.name, column._copy())
        indexes = {ix["name"] for ix in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexes:
                index.create(bind)


def downgrade() -> None:
    raise NotImplementedError("the baseline is the first revision; there is nothing older to go back to")
