"""How the platform's HTTP server reads requests: uvicorn's h11 protocol with a deadline for the request head.

uvicorn closes an idle keep-alive connection, but a connection that sends part of
a request line or headers and then stalls (or trickles a byte at a time) is held
open for as long as the client likes; a thousand of them hold a thousand sockets.
:class:`HeaderTimeoutProtocol` gives each request head PLATFORM_HEADER_TIMEOUT_S
from its first byte (or from the connection's start) to arrive whole, then
closes the connection. A body, once the head is in, is the route's business.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from whileai.platform import defaults

__all__ = ["HeaderTimeoutProtocol", "uvicorn_options"]


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head is not complete in time."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # a request head has begun and is not complete yet
            self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None and not self.transport.is_closing():
            self._head_timer = self.loop.call_later(defaults.PLATFORM_HEADER_TIMEOUT_S, self._head_timeout)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():  # still no whole request head
            self.transport.close()


def uvicorn_options() -> dict[str, Any]:
    """The uvicorn.Config settings every platform server uses (the header deadline, no access log)."""
    return {"http": HeaderTimeoutProtocol, "access_log": False}
