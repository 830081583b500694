"""``service``: the claims of a ``crawldedup serve`` elsewhere, over HTTP (``CRAWLDEDUP_SERVICE_URL``).

A Deduplicator with this store keeps its own local filter and canonicalizes as usual; only its
local misses travel, as fingerprints, to the service, whose own store answers them. So
``CRAWLDEDUP_STRATEGY=service`` makes every shell (the CLI, the Scrapy dupefilter, crawlee) use a
service by configuration alone, leases and two-phase claims included. On opening, the service
checks that the client's namespace and canonical policy are its own
(:class:`~crawldedup.NamespaceConflict` otherwise): every client of a service follows one policy.

Each request of a plan is ``(step, fields)``, sent as ``POST /v1/store/<step>`` with a JSON
body (docs/service.md); fingerprints travel as base64 of their 16-byte records. A connection
that fails and a 503 (the service's store did not answer) are retried like any store's errors;
the call's token travels with it, and the service hands it to its own store, so a claim the
service applied whose answer was lost is answered, when asked again, as it was applied.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from enum import Enum
from typing import Any, Dict, List, NamedTuple, Optional, Tuple
from urllib.parse import unquote, urlsplit, urlunsplit

import numpy as np

from .._checks import check_name, complaint
from .._plans import Plan, drive
from ..fingerprints import Fingerprints
from .aliases import Aliases
from .base import (
    ClaimAnswers,
    ClaimStore,
    Lease,
    NamespaceConflict,
    RetryPolicy,
    StoreOptions,
    check_policy_digest,
    required,
)
from .urls import redact_url

#: Seconds one call may take (a 100,000-fingerprint claim takes well under one).
TIMEOUT_SECONDS = 60.0


class StoreStep(str, Enum):
    """The calls of this store, each ``POST /v1/store/<step>``."""

    OPEN = "open"
    CLAIM = "claim"
    ALIASES = "aliases"
    SETTLE = "settle"
    EXPIRED = "expired"


class Settle(str, Enum):
    """What a settle call does to leases: :meth:`ClaimStore.finish_leases`, ``release_leases``, ``renew_leases``."""

    DONE = "done"
    RELEASE = "release"
    RENEW = "renew"


class ServiceRequest(NamedTuple):
    """One request of a plan: ``POST /v1/store/<step>`` with these JSON fields."""

    step: StoreStep
    fields: Dict[str, Any]


class ServiceUnreachable(ConnectionError):
    """The service could not be reached or answered 503 (its store did not answer): worth another attempt."""


class ServiceRefused(ValueError):
    """The service refused a call as it was sent (an answer no other attempt changes)."""


def encode_fingerprints(fingerprints: Fingerprints) -> str:
    """Fingerprints as the store calls carry them: base64 of their 16-byte records."""
    return base64.b64encode(fingerprints.tobytes()).decode("ascii")


def decode_fingerprints(name: str, text: Any) -> Fingerprints:
    """The fingerprints of :func:`encode_fingerprints`'s ``text``.

    :raises ValueError: ``<name> must be base64 of 16-byte fingerprints, got ...``.
    """
    raw: Optional[bytes] = None
    if isinstance(text, str):
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) % 16:
        got = (
            f"{len(raw)} bytes" if raw is not None else ("not base64" if isinstance(text, str) else type(text).__name__)
        )
        raise ValueError(complaint(name, "base64 of 16-byte fingerprints", got))
    return Fingerprints(np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(-1, 2))


def check_service_url(url: object) -> str:
    """A service's address, ``http://`` or ``https://`` and a host.

    :raises ValueError: for anything else (the URL's password hidden).
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or not urlsplit(url).hostname:
        shown = redact_url(url) if isinstance(url, str) else url
        raise ValueError(complaint("service_url", "a URL starting with http:// or https:// and a host", shown))
    return url


def split_token(url: str) -> Tuple[str, Optional[str]]:
    """A service URL without its user info, and the bearer token its password carried (``http://:TOKEN@host``)."""
    parts = urlsplit(check_service_url(url))
    if parts.password is None:
        return url.rstrip("/"), None
    plain = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return plain.rstrip("/"), unquote(parts.password)


class ServiceStore(ClaimStore):
    """The store behind a ``crawldedup serve`` at ``url``; the namespace and policy must be the service's.

    The service's store must hold leases (``set`` or ``sharded-set``): the Deduplicator's
    two-phase claims and leases are the service's.

    :param url: the service, such as ``http://127.0.0.1:8707``; ``http://:TOKEN@host:8707``
        carries the service's bearer token (as ``CRAWLDEDUP_SERVICE_URL`` can).
    :param token: the service's bearer token, when it asks for one (instead of the URL's).
    :param asynchronous: connect nothing now (see :class:`~crawldedup.stores.aio.AsyncClaimStore`).
    :raises ImportError: without httpx (``pip install 'crawldedup[service]'``).
    :raises NamespaceConflict: when the service serves another namespace or policy, or keeps no store.
    :raises ServiceRefused: (a ValueError) when the service's store holds no leases.
    :raises StoreUnavailable: when the service (or its store) cannot be reached.
    """

    strategy = "service"
    kind = "service"
    store_errors = (ServiceUnreachable,)
    supports_leases = True
    #: The service's store holds leases, so it is a Redis store: it keeps the alias map too.
    supports_aliases = True

    @classmethod
    def from_options(cls, options: StoreOptions) -> ServiceStore:
        url = required(options.service_url, cls.strategy, "service_url", "CRAWLDEDUP_SERVICE_URL")
        # The window is the service's store's own: claims expire where they are kept.
        return cls(
            url,
            namespace=options.namespace,
            policy_digest=options.policy_digest,
            retry=options.retry,
            asynchronous=options.asynchronous,
        )

    def __init__(
        self,
        url: str,
        *,
        namespace: str,
        policy_digest: str,
        token: Optional[str] = None,
        retry: Optional[RetryPolicy] = None,
        asynchronous: bool = False,
    ) -> None:
        import httpx

        super().__init__(retry, asynchronous=asynchronous)
        self.url, in_url = split_token(url)
        token = token if token is not None else in_url
        self.namespace = check_name("namespace", namespace)
        self.policy_digest = check_policy_digest(policy_digest)
        self._httpx = httpx
        self._headers = {"content-type": "application/json"}
        if token is not None:
            self._headers["authorization"] = f"Bearer {token}"
        self._client: Any = None
        #: This store's secret at the service: its leases there are owned by its worker id *and*
        #: this token, so no other client of the service can settle them (docs/service.md, "Leases").
        self.lease_token = secrets.token_hex(16)
        self._opened = {"namespace": self.namespace, "policy": self.policy_digest}
        #: The strategy of the service's own store, once it answered.
        self.service_strategy = ""
        if asynchronous:
            return
        self._client = httpx.Client(base_url=self.url, headers=self._headers, timeout=TIMEOUT_SECONDS)
        try:
            self.with_retries(lambda: drive(self._open(), self._send))
        except BaseException:
            self._client.close()
            raise

    @property
    def description(self) -> str:
        return f"service store {self.url} namespace {self.namespace!r}"

    # -- the channel ----------------------------------------------------------------------------

    def _send(self, request: ServiceRequest) -> Dict[str, Any]:
        try:
            path, body = self._request(request)
            response = self._client.post(path, content=body)
        except self._httpx.TransportError as exc:
            raise ServiceUnreachable(f"{type(exc).__name__}: {exc}") from exc
        return self._answer(response.status_code, response.content)

    async def _aconnect(self) -> None:
        if self._client is None:
            self._client = self._httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=TIMEOUT_SECONDS)

    async def _asend(self, request: ServiceRequest) -> Dict[str, Any]:
        try:
            path, body = self._request(request)
            response = await self._client.post(path, content=body)
        except self._httpx.TransportError as exc:
            raise ServiceUnreachable(f"{type(exc).__name__}: {exc}") from exc
        return self._answer(response.status_code, response.content)

    def _request(self, request: ServiceRequest) -> Tuple[str, str]:
        """The path and body of ``request``: its fields and the namespace and policy it opened."""
        return f"/v1/store/{request.step.value}", json.dumps({**self._opened, **request.fields})

    def _answer(self, status: int, body: bytes) -> Dict[str, Any]:
        """A reply's fields; its error raised (503: :class:`ServiceUnreachable`, 409: NamespaceConflict)."""
        try:
            fields = json.loads(body)
        except ValueError:
            fields = None
        if not isinstance(fields, dict):
            raise ServiceRefused(f"{self.url} answered HTTP {status} with {len(body)} bytes that are not a JSON object")
        if status == 200 or (status == 409 and "answers" in fields):
            return fields  # a settle's 409: some leases are not this store's, its answers say which
        message = f"{self.url}: {fields.get('error', f'HTTP {status}')}"
        if status == 503:
            raise ServiceUnreachable(message)
        if status == 409:
            raise NamespaceConflict(message)
        raise ServiceRefused(message)

    def close(self) -> None:
        if self._client is not None and not self.asynchronous:
            self._client.close()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- the plans ------------------------------------------------------------------------------

    def _open(self) -> Plan[None]:
        reply = yield ServiceRequest(StoreStep.OPEN, {})
        self.service_strategy = str(reply["strategy"])
        if reply.get("supports_leases") is not True:
            raise ServiceRefused(
                f"{self.url} keeps its claims in a {self.service_strategy} store, which holds no leases: the "
                f"service strategy needs a service on the set or sharded-set store (others: the fingerprint calls)"
            )

    def _exchange(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes
    ) -> Plan[ClaimAnswers]:
        fields: Dict[str, Any] = {
            "claims": encode_fingerprints(claims),
            "reads": encode_fingerprints(reads),
            "token": token.hex(),
        }
        if lease is not None:
            fields["lease"] = {"owner": lease.owner, "seconds": lease.seconds, "urls": list(lease.urls)}
            fields["lease_token"] = self.lease_token
        reply = yield ServiceRequest(StoreStep.CLAIM, fields)
        return ClaimAnswers(_booleans(reply["won"]), _booleans(reply["present"]), tuple(int(i) for i in reply["held"]))

    def _record_aliases(self, aliases: Aliases) -> Plan[None]:
        yield ServiceRequest(
            StoreStep.CLAIM,
            {
                "claims": "",
                "reads": "",
                "aliases": {
                    "requested": encode_fingerprints(aliases.requested),
                    "finals": encode_fingerprints(aliases.finals),
                    "capacity": aliases.capacity,
                },
            },
        )

    def _read_aliases(self, fingerprints: Fingerprints) -> Plan[List[Optional[bytes]]]:
        reply = yield ServiceRequest(StoreStep.ALIASES, {"fingerprints": encode_fingerprints(fingerprints)})
        found = _booleans(reply["found"])
        finals = iter(decode_fingerprints("finals", reply["finals"]).as_bytes())
        return [next(finals) if there else None for there in found]

    def _joined(self, first: ServiceRequest, second: ServiceRequest) -> Tuple[ServiceRequest, Any]:
        """A claim and an alias record as one claim call (its answer is the claim's)."""
        return (
            ServiceRequest(first.step, {**first.fields, "aliases": second.fields["aliases"]}),
            lambda reply: (reply, {}),
        )

    def _settle(
        self, action: str, fingerprints: Fingerprints, owner: str, lease_ms: int, token: bytes
    ) -> Plan[List[bool]]:
        fields: Dict[str, Any] = {
            "action": action,
            "fingerprints": encode_fingerprints(fingerprints),
            "owner": owner,
            "lease_token": self.lease_token,
            "token": token.hex(),
        }
        if action == "renew":
            fields["lease"] = lease_ms / 1000
        reply = yield ServiceRequest(StoreStep.SETTLE, fields)
        return _booleans(reply["answers"])

    def _expired(self, limit: int, owner: str, lease_ms: int) -> Plan[List[str]]:
        fields: Dict[str, Any] = {"limit": limit}
        if lease_ms:
            fields.update(owner=owner, lease=lease_ms / 1000, lease_token=self.lease_token)
        reply = yield ServiceRequest(StoreStep.EXPIRED, fields)
        return [str(url) for url in reply["urls"]]


def _booleans(values: Any) -> List[bool]:
    if not isinstance(values, list) or not all(isinstance(value, bool) for value in values):
        raise ServiceRefused("the service's answer is not a list of booleans")
    return values
