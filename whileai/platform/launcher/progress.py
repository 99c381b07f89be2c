"""The layout of a Modal job's progress store: written by the job (whileai.jobs.modal_app), read by the launcher.

Entry ``progress_key(job_id, n)`` is the job's n-th recorded request (0-based);
``count_key(job_id)`` holds how many there are. Zero-padded so keys sort in order.
"""

from __future__ import annotations

__all__ = ["progress_key", "count_key"]


def progress_key(job_id: str, seq: int) -> str:
    return f"{job_id}:{seq:09d}"


def count_key(job_id: str) -> str:
    return f"{job_id}:n"
