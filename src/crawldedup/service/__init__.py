"""The fingerprint service: ``crawldedup serve`` (HTTP/JSON over one AsyncDeduplicator) and its clients.

``protocol`` is the wire format both sides share (no I/O); ``app`` the ASGI application;
``server`` runs it (uvicorn); ``client`` holds :class:`ServiceClient` and
:class:`AsyncServiceClient`. The server needs the ``service`` extra; the clients need httpx.
"""

try:
    from .client import AsyncServiceClient, ServiceClient
except ModuleNotFoundError as missing:  # a core install: the extra brings orjson and httpx
    raise ImportError(f"crawldedup's service needs {missing.name}: pip install 'crawldedup[service]'") from None

__all__ = ["AsyncServiceClient", "ServiceClient"]
