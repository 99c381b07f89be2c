"""Alembic's environment for the store: always run by whileai.platform.store.migrate on a connection it opened.

The connection arrives in ``config.attributes["connection"]`` inside a transaction
the caller began (and locked: SQLite's write lock, PostgreSQL's advisory lock),
so every revision of one upgrade commits or rolls back together.
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
