"""The ``mirrored`` line: where each ``report_to`` copy of a run went, for ``show`` and the closing summary."""

from __future__ import annotations

from typing import Any

from whileai.runner._parts import json_object

__all__ = ["mirror_text", "mirrors_line"]


def mirror_text(name: str, entry: dict[str, Any]) -> str:
    """``mlflow (closed, 41 points) at sqlite:///.../mlflow.db``: where the copy went (folder or tracker URL),
    with the errors and the last one when a mirror failed."""
    text = f"{name} ({entry.get('status')}, {entry.get('points', 0)} points"
    if entry.get("errors"):
        text += f", {entry['errors']} error(s): {entry.get('last_error')}"
    where = f" at {entry['to']}" if isinstance(entry.get("to"), str) and entry["to"] else ""
    return text + ")" + where


def mirrors_line(mirrors: dict[str, Any]) -> str:
    """The ``mirrored`` line of ``show`` and of the closing summary (report_to)."""
    return "mirrored   " + ", ".join(mirror_text(name, json_object(entry)) for name, entry in mirrors.items())
