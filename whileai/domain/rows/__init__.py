"""Rollout rows: what a row is, how rows are read and keyed, what their actions are against the gold,
which rows a trainer may learn from, and how they fit a base's context."""
