"""The store's schema revisions (Alembic scripts), run by whileai.platform.store.migrate; no alembic.ini needed."""
