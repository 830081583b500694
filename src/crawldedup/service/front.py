"""The service's HTTP/1.1 front: llhttp (httptools) parses, and every limit holds before the application runs.

uvicorn, the server before, bounds none of what an attacker sends first: its httptools parser
buffers request headers without limit (1 GiB of headers took a server to 1,096 MiB), a
connection's timer starts only after its first request (slowloris and idle connections were
never closed), and bodies of all connections together are not bounded. h11's
``max_incomplete_event_size`` bounds the headers, but not their time, the connections or the
bodies, so each server would need the rest anyway; this front does all of it on the parser
uvicorn used, and the claim path measured as fast (docs/service.md, "Limits").

Per connection, one request at a time: its line and headers within ``max_head_bytes``,
``max_headers`` and ``max_request_line``; its body within ``max_body_bytes`` (refused from
``Content-Length`` before it is read); all of it within ``read_timeout`` of the accept or of the
request's first byte (408, then closed); the answer read by the client within ``read_timeout``
too; then ``keep_alive`` seconds idle at most. Across connections: at most ``max_connections``
(one more is answered 503 with ``Retry-After`` and closed), and at most ``max_buffered_bytes`` of
bodies and unsent answers: past it, a connection's next bytes are not read until others' are
answered (back-pressure: the kernel's buffers and then the client wait; its read timer runs on,
so that bytes held are never held longer than ``read_timeout``). Every refusal is the service's
JSON error (``{"error": ...}``).
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections import deque
from http import HTTPStatus
from typing import Any, Awaitable, Callable, Deque, List, MutableMapping, Optional, Set, Tuple

import httptools

from .limits import Limits
from .protocol import RETRY_AFTER_SECONDS, error_body

Headers = List[Tuple[bytes, bytes]]
App = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]
#: Transport bytes waiting to be sent past which an answer waits for the client to read.
WRITE_HIGH_WATER = 64 * 1024


class Refusal(Exception):
    """A request the front answers itself, with this status and message, then closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def response(status: int, headers: Headers, body: bytes, close: bool) -> bytes:
    """An HTTP/1.1 response's bytes."""
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())]
    lines += [name + b": " + value + b"\r\n" for name, value in headers]
    if close:
        lines.append(b"connection: close\r\n")
    lines += [b"\r\n", body]
    return b"".join(lines)


def error_response(status: int, message: str, extra: Optional[Headers] = None) -> bytes:
    """The service's JSON error as a whole response that closes the connection."""
    body = error_body(RuntimeError(message))
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), *(extra or [])]
    return response(status, headers, body, close=True)


RETRY_AFTER = (b"retry-after", b"%d" % RETRY_AFTER_SECONDS)


class Budget:
    """Bytes of bodies and unsent answers held across connections; connections that pass it wait their turn."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiting: Deque[Connection] = deque()

    def take(self, size: int) -> bool:
        """Count ``size`` bytes held; False once past the limit (the caller then waits)."""
        self.used += size
        return self.used <= self.limit

    def give(self, size: int) -> None:
        """``size`` bytes freed: the connections waiting go on, first come first, while there is room."""
        self.used -= size
        while self.waiting and self.used < self.limit:
            self.waiting.popleft().budget_freed()


class Request:
    """One request as the parser hands it over."""

    __slots__ = ("url", "headers", "chunks", "size", "method", "version", "keep_alive")

    def __init__(self) -> None:
        self.url = b""
        self.headers: Headers = []
        self.chunks: List[bytes] = []
        self.size = 0
        self.method = "GET"
        self.version = "1.1"
        self.keep_alive = True


class Front:
    """The HTTP/1.1 server of one application and its :class:`Limits`.

    :param app: an ASGI application (``http`` scopes only); it gets each request's whole body
        in one ``http.request`` message.
    :param on_refusal: told the status of each request the front answers itself (for metrics).
    """

    def __init__(self, app: App, limits: Limits, on_refusal: Callable[[int], None] = lambda status: None) -> None:
        self.app = app
        self.limits = limits
        self.on_refusal = on_refusal
        self.budget = Budget(limits.max_buffered_bytes)
        self.connections: Set[Connection] = set()
        self.stopping = False
        self._server: Optional[asyncio.AbstractServer] = None

    async def start(self, sock: Any, backlog: int) -> None:
        """Serve the listening socket ``sock`` with room for ``backlog`` connections waiting to be accepted."""
        loop = asyncio.get_running_loop()
        # The loop listens on ``sock`` again, with its own backlog (100) unless given this one.
        self._server = await loop.create_server(lambda: Connection(self), sock=sock, backlog=backlog)

    async def stop(self, drain_seconds: float) -> None:
        """Accept nothing more, answer the requests in flight (up to ``drain_seconds``), close every connection."""
        self.stopping = True
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.close_when_idle()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + drain_seconds
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.02)
        for connection in list(self.connections):
            connection.abort()


class Connection(asyncio.Protocol):
    """One client connection: its parser, its limits and timers, its requests answered one at a time."""

    def __init__(self, front: Front) -> None:
        self.front = front
        self.limits = front.limits
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: Optional[asyncio.Transport] = None
        self.request: Optional[Request] = None
        self.ready: Deque[Request] = deque()
        self.answering = False
        self.in_head = True  # the bytes that come belong to a request's line and headers
        self.head_bytes = 0
        self.held = 0  # bytes of this connection counted in the front's budget
        self.paused: Set[str] = set()
        self.timer: Optional[asyncio.TimerHandle] = None
        self.idle = False
        self.closing = False
        self.writable: Optional[asyncio.Future[None]] = None
        self.peer: Any = None

    # -- asyncio's side ------------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:  # an asyncio.Transport, or uvloop's
        front = self.front
        if front.stopping or len(front.connections) >= self.limits.max_connections:
            transport.write(
                error_response(
                    503,
                    f"the service is at its limit of {self.limits.max_connections:,} connections: try again",
                    [RETRY_AFTER],
                )
            )
            transport.close()
            front.on_refusal(503)
            return
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        front.connections.add(self)
        self._arm(self.limits.read_timeout)  # from the accept: no time to idle before the first request

    def data_received(self, data: bytes) -> None:
        if self.transport is None or self.closing:
            return
        if self.idle:  # a kept-alive connection's next request begins: its read timer starts
            self.idle = False
            self._arm(self.limits.read_timeout)
        if self.in_head:
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as error:
            refusal = error.__context__
            if isinstance(refusal, Refusal):
                self.refuse(refusal.status, str(refusal))
            else:
                raise
            return
        except httptools.HttpParserUpgrade:
            self.refuse(400, "protocol upgrades are not served: send HTTP/1.1 requests")
            return
        except httptools.HttpParserError as error:
            self.refuse(400, f"malformed HTTP request: {' '.join(str(error).split())}")
            return
        if self.in_head and self.head_bytes > self.limits.max_head_bytes:
            self.refuse(431, f"the request line and headers must be at most {self.limits.max_head_bytes:,} bytes")

    def eof_received(self) -> Optional[bool]:
        if self.answering or self.ready:  # a client that shut its side down still gets its answers
            self.closing = True
            return True
        return None

    def pause_writing(self) -> None:
        if self.writable is None or self.writable.done():
            self.writable = self.loop.create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.front.connections.discard(self)
        self._disarm()
        self.closing = True
        if self in self.front.budget.waiting:
            self.front.budget.waiting.remove(self)
        self.ready.clear()
        self._give(self.held)
        self.resume_writing()

    # -- the parser's side ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.request = Request()

    def on_url(self, url: bytes) -> None:
        assert self.request is not None
        self.request.url += url
        if len(self.request.url) > self.limits.max_request_line:
            raise Refusal(414, f"the request target must be at most {self.limits.max_request_line:,} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.request is not None
        headers = self.request.headers
        headers.append((name.lower(), value.strip(b" \t")))
        if len(headers) > self.limits.max_headers:
            raise Refusal(431, f"a request may carry at most {self.limits.max_headers} headers")

    def on_headers_complete(self) -> None:
        request = self.request
        assert request is not None
        self.in_head = False
        request.method = self.parser.get_method().decode("ascii")
        request.version = self.parser.get_http_version()
        limit = self.limits.max_body_bytes
        for name, value in request.headers:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                raise Refusal(413, f"the body must be at most {limit:,} bytes")
            if name == b"expect" and value.lower() == b"100-continue" and request.version == "1.1":
                assert self.transport is not None
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, chunk: bytes) -> None:
        request = self.request
        assert request is not None
        request.size += len(chunk)
        if request.size > self.limits.max_body_bytes:
            raise Refusal(413, f"the body must be at most {self.limits.max_body_bytes:,} bytes")
        request.chunks.append(chunk)
        self.held += len(chunk)
        if not self.front.budget.take(len(chunk)) and "budget" not in self.paused:
            # Its read timer runs on: a connection that holds bytes and waits must not hold them for ever.
            self.front.budget.waiting.append(self)
            self._pause("budget")

    def on_message_complete(self) -> None:
        request = self.request
        assert request is not None
        self.request = None
        self.in_head, self.head_bytes = True, 0
        request.keep_alive = self.parser.should_keep_alive()
        self.ready.append(request)
        self._disarm()  # its answer's time is the service's, not the client's
        self._pause("answering")  # one request at a time; pipelined ones already read wait in ``ready``
        if not self.answering:
            self.answering = True
            self.loop.create_task(self._answer())

    # -- answering -----------------------------------------------------------------------------

    async def _answer(self) -> None:
        """Answer the requests read, in order, then wait for the next one (or close)."""
        try:
            while self.ready and self.transport is not None and not self.transport.is_closing():
                request = self.ready.popleft()
                status, headers, body = await self._call(request)
                close = not request.keep_alive or self.front.stopping or (self.closing and not self.ready)
                self.transport.write(response(status, headers, body, close))
                self.held += len(body)
                self.front.budget.take(len(body))
                if close:
                    self.transport.close()
                    return
                await self._drained()
                self._give(request.size + len(body))
        finally:
            self.answering = False
        if self.transport is not None and not self.transport.is_closing():
            if self.closing or self.front.stopping:
                self.transport.close()
                return
            self._resume("answering")
            self.idle = self.head_bytes == 0 and self.request is None
            self._arm(self.limits.keep_alive if self.idle else self.limits.read_timeout)

    async def _call(self, request: Request) -> Tuple[int, Headers, bytes]:
        """The application's answer to ``request``: status, headers and body."""
        try:
            parsed = httptools.parse_url(request.url)
        except httptools.HttpParserInvalidURLError:
            return 400, [(b"content-type", b"application/json")], error_body(RuntimeError("malformed request target"))
        raw_path = parsed.path or b"/"
        path = raw_path.decode("latin-1")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.version,
            "method": request.method,
            "scheme": "http",
            "path": urllib.parse.unquote(path) if "%" in path else path,
            "raw_path": raw_path,
            "query_string": parsed.query or b"",
            "root_path": "",
            "headers": request.headers,
            "client": self.peer,
        }
        body = b"".join(request.chunks)
        request.chunks = []
        answer: List[Any] = [500, [], []]

        async def receive() -> MutableMapping[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answer[0], answer[1] = message["status"], list(message.get("headers", ()))
            else:
                answer[2].append(message.get("body", b""))

        await self.front.app(scope, receive, send)
        return answer[0], answer[1], b"".join(answer[2])

    async def _drained(self) -> None:
        """Wait until the client read the answer down to :data:`WRITE_HIGH_WATER` (abort after ``read_timeout``)."""
        if self.writable is None or self.writable.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.writable), self.limits.read_timeout)
        except asyncio.TimeoutError:
            self.abort()

    # -- limits and timers ---------------------------------------------------------------------

    def refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with ``message`` and close; nothing more is read."""
        self.front.on_refusal(status)
        self.closing = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(error_response(status, message))
            self.transport.close()

    def budget_freed(self) -> None:
        """The budget has room again: read on."""
        self._resume("budget")

    def close_when_idle(self) -> None:
        """Close now unless a request is being read or answered (a stopping server)."""
        if not self.answering and not self.ready and self.request is None and self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _expired(self) -> None:
        """The read timer or the keep-alive ran out: 408 for a request begun, then close."""
        self.timer = None
        if self.transport is None or self.transport.is_closing():
            return
        if self.idle or (self.head_bytes == 0 and self.request is None):
            self.transport.close()
        else:
            self.refuse(408, f"the request was not received within {self.limits.read_timeout:g} s")

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self.timer = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _give(self, size: int) -> None:
        size = min(size, self.held)
        self.held -= size
        if size:
            self.front.budget.give(size)

    def _pause(self, reason: str) -> None:
        if not self.paused and self.transport is not None:
            self.transport.pause_reading()
        self.paused.add(reason)

    def _resume(self, reason: str) -> None:
        self.paused.discard(reason)
        if not self.paused and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
