"""A seam for tests of crashes: named points where a test may have this process killed outright."""

from __future__ import annotations

import os
import signal

from whileai.platform import defaults


def fault_point(name: str) -> None:
    """Kill this process (SIGKILL, so nothing after it runs) here when FAULT_AT_ENV names ``name``.

    The points sit between two writes that must not be split: what a test finds after the kill is what a
    server killed there for real would leave.
    """
    if os.environ.get(defaults.FAULT_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
