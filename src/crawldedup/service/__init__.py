"""The fingerprint service: ``crawldedup serve`` (HTTP/JSON over one AsyncDeduplicator) and its clients.

``protocol`` is the wire format both sides share (no I/O); ``app`` the ASGI application;
``server`` runs it (uvicorn); ``client`` holds :class:`ServiceClient` and
:class:`AsyncServiceClient`. The server needs the ``service`` extra; the clients need httpx.
"""

from .client import AsyncServiceClient, ServiceClient

__all__ = ["AsyncServiceClient", "ServiceClient"]
