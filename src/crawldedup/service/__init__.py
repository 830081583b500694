"""The fingerprint service: ``crawldedup serve`` (HTTP/JSON over one AsyncDeduplicator) and its clients.

``protocol`` is the wire format both sides share (no I/O); ``limits`` every bound a server
enforces; ``front`` the HTTP/1.1 server that enforces them; ``app`` the ASGI application;
``openapi`` its OpenAPI document; ``server`` runs it; ``client`` holds :class:`ServiceClient` and
:class:`AsyncServiceClient`. The server needs the ``service`` extra; the clients need httpx.
"""

from typing import Any

__all__ = ["AsyncServiceClient", "ServiceClient"]


def __getattr__(name: str) -> Any:
    # The clients need the extra (httpx, orjson): imported on first use, so that the limits
    # (crawldedup serve --help) need nothing of it.
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from . import client
    except ModuleNotFoundError as missing:
        raise ImportError(f"crawldedup's service needs {missing.name}: pip install 'crawldedup[service]'") from None
    return getattr(client, name)
