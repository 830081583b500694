"""Running the service: safe binding, the bearer token, the descriptors, and a clean stop on SIGTERM.

The server is the service's own HTTP/1.1 front (:mod:`.front`, on httptools) on a uvloop event
loop when installed, else asyncio's. SIGTERM or SIGINT stop it gracefully: no new connection is
accepted, the requests in flight are answered, then the Deduplicator is closed (its state file
flushed) and the process exits 0.
"""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import socket
import sys
from typing import Any, Callable, Coroutine, Optional

from .app import ServiceApp
from .front import Front

#: Seconds SIGTERM waits for the requests in flight before closing their connections.
DRAIN_SECONDS = 30
#: Connections waiting to be accepted.
LISTEN_BACKLOG = 2048
#: Descriptors kept beside the connections and the store's: the state file, logs, the loop's own.
DESCRIPTOR_MARGIN = 32
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
    """Whether SIGTERM or SIGINT came, from the start (while the store opens) to the end of serving."""

    def __init__(self) -> None:
        self.requested = False
        self._event: Optional[asyncio.Event] = None

    def __call__(self) -> None:
        self.requested = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        """Until the signal comes (at once if it came already)."""
        if self._event is None:
            self._event = asyncio.Event()
        if self.requested:
            return
        await self._event.wait()


def run(main: Callable[[Stop], Coroutine[Any, Any, None]]) -> None:
    """Run ``main(stop)`` on :func:`new_event_loop`, SIGTERM and SIGINT ending it gracefully (see :func:`serve`)."""
    loop = new_event_loop()
    stop = Stop()
    signals = (signal.SIGTERM, signal.SIGINT)
    # Given back at the end: uvloop's remove_signal_handler leaves its own behind (asyncio's
    # restores the defaults), and a process that served in-process would lose Ctrl-C.
    previous = {sig: signal.getsignal(sig) for sig in signals}
    try:
        for sig in signals:
            loop.add_signal_handler(sig, stop)
    except NotImplementedError:  # pragma: no cover  (Windows: signal.signal instead)
        for sig in signals:
            signal.signal(sig, lambda signum, frame: loop.call_soon_threadsafe(stop))
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main(stop))
    finally:
        for sig in signals:
            try:
                loop.remove_signal_handler(sig)
            except NotImplementedError:  # pragma: no cover
                pass
            handler = previous[sig]
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        asyncio.set_event_loop(None)
        loop.close()


def fit_descriptors(max_connections: int, reserved: int) -> int:
    """The connections the process's descriptors allow: the soft limit raised to the hard one
    first, ``reserved`` kept for the store's connections and files; at most ``max_connections``.

    :raises ValueError: when not even one connection fits.
    """
    if sys.platform == "win32":  # pragma: no cover  (no RLIMIT_NOFILE)
        return max_connections
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + reserved + DESCRIPTOR_MARGIN
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):  # pragma: no cover  (a platform that refuses)
            pass
    if soft == resource.RLIM_INFINITY:
        return max_connections
    room = soft - reserved - DESCRIPTOR_MARGIN
    if room < 1:
        raise ValueError(f"{soft} file descriptors (ulimit -n) leave no room for a connection beside the store's")
    return min(max_connections, room)


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

    :param announce: called once the server answers.
    """
    front = Front(app, app.limits, lambda status: app.http_metrics.observe("http", status, 0.0))
    await front.start(sock, LISTEN_BACKLOG)
    announce()
    await stop.wait()
    await front.stop(DRAIN_SECONDS)
