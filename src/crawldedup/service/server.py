"""Running the service: safe binding, the bearer token, uvicorn, and a clean stop on SIGTERM.

The server is uvicorn with its httptools parser and a uvloop event loop when they are
installed (the ``service`` extra installs both where they build), else its pure-Python h11
parser and asyncio's loop. SIGTERM or SIGINT stop it gracefully: no new connection is accepted,
the requests in flight are answered, then the Deduplicator is closed (its state file flushed)
and the process exits 0.
"""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import socket
from typing import Any, Callable, Coroutine, Optional

import uvicorn

from .app import ServiceApp

#: Seconds SIGTERM waits for the requests in flight before closing their connections.
DRAIN_SECONDS = 30
#: Seconds an idle kept-alive connection stays open (a crawler's client reuses it between batches).
KEEP_ALIVE_SECONDS = 30
#: Connections waiting to be accepted (uvicorn's default).
LISTEN_BACKLOG = 2048
#: Longest token file read (a token is a line of a few dozen characters).
MAX_TOKEN_BYTES = 4096


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str) -> str:
    """The bearer token in ``path``: its first line, without surrounding blanks.

    :raises ValueError: for an empty token, or one with characters a header cannot carry.
    :raises OSError: when the file cannot be read.
    """
    with open(path, "rb") as file:
        text = file.read(MAX_TOKEN_BYTES + 1)
    if len(text) > MAX_TOKEN_BYTES:
        raise ValueError(f"--token-file {path}: a token must be at most {MAX_TOKEN_BYTES} bytes")
    lines = text.decode("ascii", errors="replace").strip().splitlines()
    token = lines[0].strip() if lines else ""
    if not token or not all(33 <= ord(c) < 127 for c in token):
        raise ValueError(f"--token-file {path}: the token must be one line of printable ASCII without spaces")
    return token


def check_bind(host: str, token: Optional[str]) -> None:
    """Refuse to serve an address other machines can reach without a token.

    :raises ValueError: for a non-loopback ``host`` and no token.
    """
    if token is None and not is_loopback(host):
        raise ValueError(
            f"--host {host} can be reached from other machines: give --token-file, "
            f"so that only clients with the token are answered"
        )


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when installed (the faster one), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover  (Windows, PyPy: no uvloop)
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Stop:
    """Whether SIGTERM or SIGINT came: before the server takes the signals over (while the store
    opens), or after it gave them back (uvicorn raises the one that stopped it once more)."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.requested = True


def run(main: Callable[[Stop], Coroutine[Any, Any, None]]) -> None:
    """Run ``main(stop)`` on :func:`new_event_loop`, SIGTERM and SIGINT ending it gracefully (see :func:`serve`)."""
    loop = new_event_loop()
    stop = Stop()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main(stop))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        asyncio.set_event_loop(None)
        loop.close()


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port), bound before the server starts so
    that a taken port is an ``OSError`` here, with its reason.

    :raises OSError: when the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def address(sock: socket.socket) -> str:
    """``http://host:port`` of a listening socket."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def serve(app: ServiceApp, sock: socket.socket, stop: Stop, announce: Callable[[], None]) -> None:
    """Serve ``app`` on the listening ``sock`` until SIGTERM or SIGINT, then answer what is in flight.

    :param announce: called once the server answers and has taken over the signals.
    """
    config = uvicorn.Config(
        app,
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
        date_header=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=DRAIN_SECONDS,
        http="httptools" if _has_httptools() else "h11",
    )
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    if server.started:
        announce()
        server.should_exit = server.should_exit or stop.requested  # a signal that came before
    await serving


def _has_httptools() -> bool:
    try:
        import httptools  # noqa: F401
    except ImportError:  # pragma: no cover  (PyPy: h11)
        return False
    return True
