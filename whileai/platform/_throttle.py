"""The key-failure limit: failed sign-ins and wrong bearer keys, per client address and per key prefix, with backoff.

A failure is counted against the client's address (the peer, or what
X-Forwarded-For says only when the operator named its proxy with
``--forwarded-allow-ips``) and against the key prefix it tried (the clear part
of a key, API_KEY_PREFIX_CHARS, which names one account's key). Past ``limit``
failures within SIGNIN_FAILURE_WINDOW_S, each further failure must wait
SIGNIN_BACKOFF_S, doubling per failure up to SIGNIN_BACKOFF_MAX_S, before the
next try is looked at: wrong keys are then answered 429 with Retry-After.

Only failures are limited: a correct key or a valid one-time link is always
accepted, so nobody's wrong guesses (sent from the owner's own address, or aimed
at the owner's prefix) lock the owner out. One table per app (``app.state``), in
memory: a restart forgets it, which costs an attacker nothing they could use
(keys are 256-bit random). Bounded by SIGNIN_THROTTLE_MAX_CLIENTS entries.
"""

from __future__ import annotations

import threading
from typing import Any
import time
from collections import OrderedDict, deque

from whileai.platform import defaults

__all__ = ["SigninThrottle", "FailureThrottle", "failure_names"]


def failure_names(client: str, key: str | None = None) -> tuple[str, ...]:
    """What one failure counts against: the client's address, and the key prefix it tried (one account's key)."""
    names = [f"addr:{client}"]
    if key:
        names.append(f"prefix:{key[: defaults.API_KEY_PREFIX_CHARS]}")
    return tuple(names)


class FailureThrottle:
    """``wait(*names)``: seconds until the next failure of any of ``names`` is looked at (0: now);
    ``failed(*names)`` counts one failure against each. ``limit`` failures per window pass without backoff."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """Failures per window that pass without backoff (SIGNIN_MAX_FAILURES unless given)."""
        return defaults.SIGNIN_MAX_FAILURES if self._limit is None else int(self._limit)

    def _recent(self, name: str, now: float) -> deque[float] | None:
        times = self._failures.get(name)
        if times is None:
            return None
        while times and times[0] <= now - defaults.SIGNIN_FAILURE_WINDOW_S:
            times.popleft()
        if not times:
            del self._failures[name]
            return None
        return times

    def _wait_one(self, name: str, now: float) -> float:
        times = self._recent(name, now)
        if times is None or len(times) < self.limit:
            return 0.0
        delay = min(defaults.SIGNIN_BACKOFF_MAX_S, defaults.SIGNIN_BACKOFF_S * 2.0 ** (len(times) - self.limit))
        return max(0.0, times[-1] + delay - now)

    def wait(self, *names: str) -> float:
        now = time.monotonic()
        with self._lock:
            return max((self._wait_one(name, now) for name in names if name), default=0.0)

    def failed(self, *names: str) -> None:
        now = time.monotonic()
        with self._lock:
            for name in names:
                if not name:
                    continue
                times = self._recent(name, now) or deque(maxlen=self.limit + defaults.SIGNIN_BACKOFF_STEPS)
                times.append(now)
                self._failures[name] = times
                self._failures.move_to_end(name)
            while len(self._failures) > defaults.SIGNIN_THROTTLE_MAX_CLIENTS:
                self._failures.popitem(last=False)


#: The sign-in routes' throttle (SIGNIN_MAX_FAILURES); the name the pages have always used.
SigninThrottle = FailureThrottle


def key_names(request: Any, key: str | None = None) -> tuple[str, ...]:
    """What a failure counts against: the client's address, and the key prefix it tried (one account's key)."""
    from whileai.platform import defaults

    names = [f"addr:{request.client.host if request.client else 'unknown'}"]
    if key:
        names.append(f"prefix:{key[: defaults.API_KEY_PREFIX_CHARS]}")
    return tuple(names)
