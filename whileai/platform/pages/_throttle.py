"""The sign-in attempt limit: failed sign-ins per client address in a sliding window (SIGNIN_MAX_FAILURES).

One table per app (``app.state``), in memory: a restart forgets it, which costs
an attacker nothing they could use (keys are 256-bit random). Bounded by
SIGNIN_THROTTLE_MAX_CLIENTS addresses.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque

from whileai.platform import defaults

__all__ = ["SigninThrottle"]


class SigninThrottle:
    """``wait(client)``: seconds until ``client`` may try again (0: now); ``failed(client)`` counts one failure."""

    def __init__(self) -> None:
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float] | None:
        times = self._failures.get(client)
        if times is None:
            return None
        while times and times[0] <= now - defaults.SIGNIN_FAILURE_WINDOW_S:
            times.popleft()
        if not times:
            del self._failures[client]
            return None
        return times

    def wait(self, client: str) -> float:
        now = time.monotonic()
        with self._lock:
            times = self._recent(client, now)
            if times is None or len(times) < defaults.SIGNIN_MAX_FAILURES:
                return 0.0
            return max(0.0, times[-defaults.SIGNIN_MAX_FAILURES] + defaults.SIGNIN_FAILURE_WINDOW_S - now)

    def failed(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            times = self._recent(client, now) or deque(maxlen=defaults.SIGNIN_MAX_FAILURES)
            times.append(now)
            self._failures[client] = times
            self._failures.move_to_end(client)
            while len(self._failures) > defaults.SIGNIN_THROTTLE_MAX_CLIENTS:
                self._failures.popitem(last=False)
