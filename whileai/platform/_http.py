"""How the platform's HTTP server reads requests: uvicorn's h11 protocol with deadlines and a connection cap.

uvicorn closes an idle keep-alive connection, but a connection that sends part of
a request (its head or its body) and then stalls, or trickles a byte at a time,
is held open for as long as the client likes; a thousand of them hold a
thousand sockets, and past the open-file limit nobody else gets in.
:class:`BoundedProtocol` bounds both:

- a request head must be whole PLATFORM_HEADER_TIMEOUT_S after its first byte
  (or the connection's start), and the whole request, body included, within
  PLATFORM_REQUEST_TIMEOUT_S (more for a large body, PLATFORM_BODY_MIN_BYTES_PER_S);
  a connection whose head is late is closed, one whose body is late is
  answered 408 and closed;
- at most :func:`max_connections` connections are open at once; a new one past
  the cap ends the connection whose request has been arriving longest (503 with
  Retry-After), so slow requests cannot keep a prompt client out, and is itself
  answered 503 only when no connection is mid-request.

X-Forwarded-For is read only from the addresses an operator names
(``--forwarded-allow-ips``); by default the peer address is the client.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from whileai.platform import defaults

__all__ = ["BoundedProtocol", "HeaderTimeoutProtocol", "max_connections", "uvicorn_options"]

#: states of h11's view of the client in which its current request has begun and not fully arrived
_ARRIVING = (h11.IDLE, h11.SEND_BODY)


def max_connections() -> int:
    """PLATFORM_MAX_CONNECTIONS, lowered to stay PLATFORM_FD_RESERVE + PLATFORM_ACCEPT_BATCHES *
    PLATFORM_LISTEN_BACKLOG under this process's open-file limit (asyncio accepts up to the backlog per wake-up, and
    several wake-ups can pass before the first batch is counted)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = defaults.PLATFORM_MAX_CONNECTIONS
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft - defaults.PLATFORM_FD_RESERVE
                  - defaults.PLATFORM_ACCEPT_BATCHES * defaults.PLATFORM_LISTEN_BACKLOG)
    return max(cap, 8)


def _raw_answer(status: int, reason: str, message: str, type_: str, retry_after: int | None = None) -> bytes:
    body = json.dumps({"error": {"message": message, "type": type_}}).encode()
    head = [f"HTTP/1.1 {status} {reason}", "content-type: application/json", f"content-length: {len(body)}",
            "connection: close"]
    if retry_after is not None:
        head.append(f"retry-after: {retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class BoundedProtocol(H11Protocol):
    """uvicorn's h11 protocol with the request deadlines and the connection cap of the module docstring."""

    _timer: asyncio.TimerHandle | None = None
    #: monotonic time the request now arriving began (its first byte, or the connection's start); None between requests
    _arriving_since: float | None = None
    _body_deadline_set = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arriving_since = time.monotonic()
        self._arm(defaults.PLATFORM_HEADER_TIMEOUT_S)
        if len(self.connections) > max_connections():
            victim = self._longest_arriving()
            if victim is None:
                self._refuse_busy()
            else:
                victim._refuse_busy()

    def data_received(self, data: bytes) -> None:
        if self._arriving_since is None:  # the first byte of a new request on a kept-alive connection
            self._arriving_since = time.monotonic()
            self._body_deadline_set = False
            self._arm(defaults.PLATFORM_HEADER_TIMEOUT_S)
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY and not self._body_deadline_set:  # the head is in: the body's deadline now
            self._body_deadline_set = True
            self._disarm()
            left = self._arriving_since + self._request_allowance() - time.monotonic()
            self._arm(max(left, 0.0))
        elif state not in _ARRIVING:  # the whole request is in (or the connection is ending)
            self._arriving_since = None
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._arriving_since = None
        super().connection_lost(exc)

    def _request_allowance(self) -> float:
        """PLATFORM_REQUEST_TIMEOUT_S, plus time for a body larger than PLATFORM_UNAUTH_BODY_BYTES."""
        length = 0
        for key, value in self.headers or ():
            if key == b"content-length" and value.isdigit():
                length = int(value)
            elif key == b"transfer-encoding" and b"chunked" in value.lower():
                length = defaults.PLATFORM_MAX_BODY_BYTES
        extra = max(0, min(length, defaults.PLATFORM_MAX_BODY_BYTES) - defaults.PLATFORM_UNAUTH_BODY_BYTES)
        return defaults.PLATFORM_REQUEST_TIMEOUT_S + extra / defaults.PLATFORM_BODY_MIN_BYTES_PER_S

    def _longest_arriving(self) -> BoundedProtocol | None:
        """The other open connection whose request has been arriving longest, or None."""
        found: BoundedProtocol | None = None
        for other in self.connections:
            if other is self or not isinstance(other, BoundedProtocol) or other._arriving_since is None:
                continue
            if other.transport.is_closing():
                continue
            if found is None or other._arriving_since < (found._arriving_since or 0.0):
                found = other
        return found

    def _arm(self, seconds: float) -> None:
        if self._timer is None and not self.transport.is_closing():
            self._timer = self.loop.call_later(seconds, self._deadline)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _response_started(self) -> bool:
        return self.cycle is not None and self.cycle.response_started

    def _end(self, answer: bytes) -> None:
        """Answer ``answer`` (unless a response is already under way) and close the connection."""
        self._disarm()
        self._arriving_since = None
        if self.transport.is_closing():
            return
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE) and not self._response_started():
            self.transport.write(answer)
        self.transport.close()

    def _deadline(self) -> None:
        self._timer = None
        if self.conn.their_state not in _ARRIVING or self._arriving_since is None:
            return  # the request arrived meanwhile
        if self.conn.their_state is h11.IDLE:
            self._end(b"")  # no whole head yet: closed, as a server does with a stalled head (nothing to answer)
            return
        self._end(_raw_answer(
            408, "Request Timeout",
            "the request did not arrive whole within its deadline (PLATFORM_HEADER_TIMEOUT_S for the head, "
            "PLATFORM_REQUEST_TIMEOUT_S for head and body); send the whole request at once", "request_timeout"))

    def _refuse_busy(self) -> None:
        self._end(_raw_answer(
            503, "Service Unavailable",
            f"the server is holding its most connections at once ({max_connections()}, PLATFORM_MAX_CONNECTIONS); "
            "retry in a moment", "server_busy", retry_after=1))


#: The former name, from when the protocol bounded only the request head.
HeaderTimeoutProtocol = BoundedProtocol


def uvicorn_options(forwarded_allow_ips: str | None = None) -> dict[str, Any]:
    """The uvicorn.Config settings every platform server uses: the bounded protocol, no access log, and
    X-Forwarded-For read only from ``forwarded_allow_ips`` (comma-separated addresses; None trusts nobody)."""
    trusted = (forwarded_allow_ips or "").strip()
    return {"http": BoundedProtocol, "access_log": False, "proxy_headers": bool(trusted),
            "forwarded_allow_ips": trusted or None, "backlog": defaults.PLATFORM_LISTEN_BACKLOG}
