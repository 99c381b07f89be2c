"""A job's row keeps the platform's bookkeeping in a column of its own (``jobs.platform_json``), beside its spec.

Before this revision the platform wrote its keys into the job's spec (``spec_json``): where the worker ran, when it
started, the judges it resolved, where a ``python:`` reward is imported from, how far a Modal job was replayed.
Each row's keys of the platform are moved into ``platform_json`` here, so the spec left behind is the run's spec
alone and the row reads as ``whileai.core.jobrow.JobPlatform``. Copies of columns the row has anyway (``pid``,
``call_id``) and the log's path (derived from the job id since) are dropped. The keys are frozen here, as they
were written, not read from the model.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0006_job_platform_fields"
down_revision = "0005_older_writers_refused"
branch_labels = None
depends_on = None

#: the keys the platform wrote into a job's spec that move to platform_json
_MOVED = ("host", "launched_at", "pid_started", "pulled", "gold", "reward_rm", "reward_path", "key_hash")
#: the keys it wrote there that other columns hold (pid, call_id) or that are derived (log: from the job id)
_DROPPED = ("log", "pid", "call_id")


def upgrade() -> None:
    op.add_column("jobs", sa.Column("platform_json", sa.Text, nullable=False, server_default="{}"))
    conn = op.get_bind()
    jobs = sa.table("jobs", sa.column("pk", sa.Integer), sa.column("spec_json", sa.Text),
                    sa.column("platform_json", sa.Text))
    for pk, text in conn.execute(sa.select(jobs.c.pk, jobs.c.spec_json)).all():
        try:
            spec = json.loads(text) if text else None
        except ValueError:
            continue  # not JSON: nothing of the platform's to find in it
        if not isinstance(spec, dict) or not set(spec) & {*_MOVED, *_DROPPED}:
            continue
        moved = {key: spec[key] for key in _MOVED if spec.get(key) is not None}
        kept = {key: value for key, value in spec.items() if key not in (*_MOVED, *_DROPPED)}
        conn.execute(sa.update(jobs).where(jobs.c.pk == pk).values(spec_json=_text(kept), platform_json=_text(moved)))


def _text(value: dict) -> str:
    """As the store writes JSON (``store.values.canonical_json``): compact, key order kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def downgrade() -> None:
    raise NotImplementedError("older code cannot write to this store; restore the copy made before the upgrade")
