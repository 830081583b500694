"""What one ``crawldedup serve`` lets its clients use: every limit, with its default and its option.

A server in front of a crawl fleet must hold its memory, descriptors and time per client
whatever the clients send, so each resource has a bound (docs/service.md, "Limits"):
:class:`Limits` holds them, the HTTP front (:mod:`.front`) and the application (:mod:`.app`)
enforce them, and ``crawldedup serve`` sets them from its options.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Dict

#: The bounds a service enforces, as ``crawldedup serve`` options: field -> (option, help).
OPTIONS: Dict[str, str] = {
    "max_connections": "open connections; one more is answered 503 with Retry-After and closed",
    "max_head_bytes": "bytes of a request's line and headers (more: 431)",
    "max_headers": "headers of one request (more: 431)",
    "max_request_line": "bytes of a request's target (more: 414)",
    "max_body_bytes": "bytes of one request's body (more: 413, from Content-Length before it is read)",
    "max_buffered_bytes": "bytes of request bodies and unsent answers held across all connections; past it, "
    "connections wait before their next bytes are read",
    "max_batch": "URLs, keys or fingerprints of one call (more: 413)",
    "read_timeout": "seconds from a connection's accept, or a kept-alive request's first byte, to its last "
    "byte (headers and body); also the longest an answer may wait to be read",
    "keep_alive": "seconds a connection may stay idle between requests",
    "store_connections": "store calls at once (the store's connection pool); more wait their turn",
    "store_wait": "seconds a request may wait for a store connection before a 503 with Retry-After",
}


@dataclass(frozen=True)
class Limits:
    """Every bound of one service; the defaults are the documented ones (docs/service.md)."""

    #: Past 1,000 crawler connections a service wants another server beside it.
    max_connections: int = 1024
    #: Request line and headers: an HTTP client sends a few hundred bytes.
    max_head_bytes: int = 16 * 1024
    max_headers: int = 100
    max_request_line: int = 8 * 1024
    #: 16 MiB holds 100,000 URLs of 160 bytes.
    max_body_bytes: int = 16 << 20
    #: Bodies being received or answered plus answers not yet read, all connections together.
    max_buffered_bytes: int = 64 << 20
    max_batch: int = 100_000
    #: A 1,000-URL batch (100 KB) takes milliseconds; a slow client gets seconds, not minutes.
    read_timeout: float = 10.0
    #: A crawler's client reuses its connection between batches.
    keep_alive: float = 30.0
    #: redis-py's pool holds 100 connections; a request over that waits instead of failing.
    store_connections: int = 100
    store_wait: float = 5.0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"--{field.name.replace('_', '-')} must be a positive number, got {value!r}")
        if self.max_body_bytes > self.max_buffered_bytes:
            raise ValueError(
                f"--max-body-bytes ({self.max_body_bytes:,}) must not be over --max-buffered-bytes "
                f"({self.max_buffered_bytes:,}): such a body could never be read"
            )
