"""Deadlines uvicorn does not give the gateway: the request line and headers, then the body.

uvicorn (0.55, h11) bounds only the idle time *between* requests (``timeout_keep_alive``, armed
when a response completes). A client that connects and sends nothing, trickles its headers a
byte at a time, or announces a body and never sends it holds its connection forever (measured
with raw sockets: all three were still open after 20 s). So:

- :class:`HeaderDeadline` is uvicorn's own h11 protocol with one timer more: armed when a
  connection opens and when the first byte of a further request arrives, cancelled when h11 has
  the complete request head. If it fires first, a client that began a request head is answered
  ``408 Request Timeout`` (RFC 9110 15.5.9; written on the transport directly, since h11 has no
  request to answer, and the connection is closed right after); a connection that sent nothing is
  closed without a word (an unsolicited 408 could be read as the answer to a request a client is
  only about to send on a connection it keeps ready).
- The body is read whole by the gateway's guard (``app.Gateway._body``) under ``anyio.fail_after``:
  late is a 408 and the connection is closed (the body is incomplete, so it cannot be kept).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


def header_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol class with a ``seconds`` deadline on each request's head."""
    return type("HeaderDeadline", (HeaderDeadline,), {"header_timeout": seconds})


class HeaderDeadline(H11Protocol):
    header_timeout = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_begun = False  # bytes of the pending request head have arrived

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # the first bytes of a further request on a kept-alive connection
            self._arm()
            self._head_begun = self._head_begun or bool(data)
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # h11 has the whole head: the app's deadlines take over
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        self._head_begun = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._head_begun:
                self.transport.write(timeout_response(self.header_timeout))
            self.transport.close()  # after the buffered 408 is written


def timeout_response(seconds: float) -> bytes:
    """The whole 408 answer to a request head not received within ``seconds`` (the guard's JSON error shape)."""
    body = json.dumps({"error": f"request head not received within {seconds:g} s"}).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
