"""The store's schema revisions, oldest first (0001_baseline, then one file per change; see docs/architecture.md)."""
