"""The fingerprint service as a plain ASGI application over one AsyncDeduplicator.

No web framework: the service has a fixed table of calls (:data:`~.protocol.CALLS` and
:data:`~.protocol.STORE_CALLS`), and a dictionary lookup routes them. Measured on the 2-core
machine this was chosen on (wrk, 16 connections, one-key ``/mark_seen``, uvicorn with httptools
and uvloop, 2 runs each): the plain ASGI app 30,700-30,900 requests/s, the same behind Starlette
19,100-19,300, aiohttp 18,500-23,400, granian (one worker, one thread) 21,100-24,500.

The application parses and checks each request (:func:`~.protocol.parse_body`), calls the
Deduplicator method of the same name, and maps its exceptions to statuses in one table
(:func:`~.protocol.status_of`). It holds no dedup logic of its own. Its limits: at most
``store_connections`` calls reach the store at once (the others wait up to ``store_wait``
seconds, then 503 with ``Retry-After``), at most ``max_batch`` items a call, and each lease
belongs to the client whose lease token took it (docs/service.md, "Leases").
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, NamedTuple, Optional, Tuple

import orjson
from prometheus_client import Counter, Gauge, Histogram

from .. import __version__
from .._checks import is_integer
from ..canonical.policy import policy_conflict
from ..fingerprints import Fingerprints
from ..metrics import LATENCY_BUCKETS_SECONDS, DedupMetrics
from ..stores.aliases import Aliases, check_max_aliases
from ..stores.base import Lease, NamespaceConflict
from ..stores.service import Settle, StoreStep, decode_fingerprints, encode_fingerprints
from .limits import Limits
from .openapi import openapi_document
from .protocol import (
    CALLS,
    RETRY_AFTER_SECONDS,
    STORE_CALLS,
    BadRequest,
    Call,
    ServiceBusy,
    Unauthorized,
    answer_body,
    error_body,
    parse_body,
    status_of,
)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Headers = List[Tuple[bytes, bytes]]
Fields = Dict[str, Any]

LOG = logging.getLogger("crawldedup.service")
_JSON: Headers = [(b"content-type", b"application/json")]


class Answer(NamedTuple):
    """A call's answer: the JSON object and its status (200, or 409 for leases that are not the
    caller's), or instead of JSON a text and its content type (``/metrics``)."""

    fields: Dict[str, Any]
    status: int = 200
    text: Optional[Tuple[bytes, str]] = None


class Route(NamedTuple):
    """What answers one path: its name (in metrics), its method, its handler and its body's format."""

    name: str
    method: str
    handler: Callable[[Fields], Awaitable[Answer]]
    call: Optional[Call] = None
    #: Whether the handler may reach the store (then it waits its turn for a store connection).
    store: bool = True


class HTTPMetrics:
    """The service's own metrics, beside the Deduplicator's in their registry."""

    def __init__(self, metrics: DedupMetrics) -> None:
        registry = metrics.registry
        self.requests = Counter(
            "crawldedup_http_requests",
            "HTTP requests answered, by call and status code",
            ("call", "code"),
            registry=registry,
        )
        self.latency = Histogram(
            "crawldedup_http_request_duration_seconds",
            "Time from a request's arrival to its answer, by call",
            ("call",),
            buckets=LATENCY_BUCKETS_SECONDS,
            registry=registry,
        )
        self.lease_conflicts = Counter(
            "crawldedup_http_lease_conflicts",
            "Leases a call asked to settle that the caller does not hold (answered 409), by call",
            ("call",),
            registry=registry,
        )
        self.build_info = Gauge(
            "crawldedup_build_info", "The crawldedup version serving (always 1)", ("version",), registry=registry
        )
        self.build_info.labels(__version__).set(1)

    def observe(self, call: str, status: int, seconds: float) -> None:
        self.requests.labels(call, str(status)).inc()
        self.latency.labels(call).observe(seconds)


def lease_owner(lease_token: str, worker: str = "") -> str:
    """The owner, in the store, of the leases a client takes with ``lease_token`` (and its ``worker`` id).

    A digest, so that the store never holds the token and no client can name another's leases
    without its token; the same token gives the same owner on every server and after a restart.
    """
    digest = hashlib.sha256(f"{lease_token.lower()}/{worker}".encode()).hexdigest()
    return f"client-{digest[:32]}"


class ServiceApp:
    """The ASGI application: ``POST`` calls of :data:`~.protocol.CALLS` and :data:`~.protocol.STORE_CALLS`,
    ``GET /healthz``, ``/metrics`` and ``/v1/openapi.json``.

    :param dedup: the AsyncDeduplicator that answers every call.
    :param metrics: the Deduplicator's metrics (``dedup`` attached); ``/metrics`` answers them
        and the service's own (:class:`HTTPMetrics`).
    :param token: the bearer token every request must carry (None: no token asked).
    :param open_healthz: answer ``/healthz`` without the token (its status alone: no data).
    :param limits: the service's bounds (its ``max_batch``, ``store_connections`` and ``store_wait`` here).
    """

    def __init__(
        self,
        dedup: Any,
        metrics: DedupMetrics,
        *,
        token: Optional[str] = None,
        open_healthz: bool = False,
        limits: Optional[Limits] = None,
    ) -> None:
        self.dedup = dedup
        self.metrics = metrics
        self.http_metrics = HTTPMetrics(metrics)
        self._token = token.encode() if token is not None else None
        self.open_healthz = open_healthz
        self.limits = limits if limits is not None else Limits()
        self._store_turns: Optional[asyncio.Semaphore] = None  # made inside the loop (Python 3.9 binds it)
        routes = [
            Route("healthz", "GET", self._health),
            Route("metrics", "GET", self._metrics, store=False),
            Route("openapi", "GET", self._openapi, store=False),
            *(Route(name, "POST", handler, CALLS[name]) for name, handler in self._calls().items()),
            *(
                Route(f"store_{step.value}", "POST", handler, STORE_CALLS[step])
                for step, handler in self._store_calls().items()
            ),
        ]
        self._routes: Dict[str, Route] = {_path(route): route for route in routes}

    def _calls(self) -> Dict[str, Callable[[Fields], Awaitable[Answer]]]:
        """The client calls: method name -> handler."""
        dedup = self.dedup
        return {
            "seen_keys": lambda f: self._answered("seen_keys", f, dedup.seen_keys(f["url_fps"])),
            "claim_keys": lambda f: self._answered("claim_keys", f, dedup.claim_keys(f["url_fps"])),
            "claim_batch": self._claim_batch,
            "seen": lambda f: self._answered("seen", f, dedup.seen(f["urls"])),
            "done": lambda f: self._settled("done", dedup.done(f["urls"], owner=_owner(f))),
            "release": lambda f: self._settled("release", dedup.release(f["urls"], owner=_owner(f))),
            "renew": lambda f: self._settled("renew", dedup.renew(f["urls"], f["lease"], owner=_owner(f))),
            "expired": self._expired,
            "claim_final": self._claim_final,
            "seen_through_redirects": lambda f: self._answered(
                "seen_through_redirects", f, dedup.seen_through_redirects(f["urls"])
            ),
        }

    def _store_calls(self) -> Dict[StoreStep, Callable[[Fields], Awaitable[Answer]]]:
        """The calls of a client's ``service`` store: step -> handler."""
        return {
            StoreStep.OPEN: self._store_open,
            StoreStep.CLAIM: self._store_claim,
            StoreStep.ALIASES: self._store_aliases,
            StoreStep.SETTLE: self._store_settle,
            StoreStep.EXPIRED: self._store_expired,
        }

    # -- HTTP ------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the server opens and closes the Deduplicator itself
            return
        started = time.perf_counter()
        route = self._routes.get(scope["path"])
        name = route.name if route is not None else "unknown"
        try:
            status, headers, body = await self._answer(route, scope, receive)
        except Exception as exc:  # each error gets its status from one table; the rest is a bug of ours
            status = status_of(exc) or 500
            headers, body = list(_JSON), error_body(exc)
            if status == 503:
                headers.append((b"retry-after", b"%d" % RETRY_AFTER_SECONDS))
            elif status == 401:
                headers.append((b"www-authenticate", b'Bearer realm="crawldedup"'))
            elif status == 500:
                LOG.exception("%s %s failed", scope["method"], scope["path"])
                body = error_body(RuntimeError("internal error (logged by the server)"))
        headers.append((b"content-length", b"%d" % len(body)))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        self.http_metrics.observe(name, status, time.perf_counter() - started)

    async def _answer(self, route: Optional[Route], scope: Scope, receive: Receive) -> Tuple[int, Headers, bytes]:
        """Status, headers and body of one request; raises what :func:`~.protocol.status_of` maps."""
        authorized = self._authorized(scope)
        if not authorized and not (self.open_healthz and route is not None and route.name == "healthz"):
            raise Unauthorized("this service needs its bearer token: Authorization: Bearer <token>")
        if route is None:
            raise BadRequest(f"no such call: {scope['path']} (see docs/service.md)", status=404)
        if scope["method"] != route.method:
            return (
                405,
                [*_JSON, (b"allow", route.method.encode())],
                error_body(BadRequest(f"{scope['path']} takes {route.method}, got {scope['method']}")),
            )
        handler = route.handler if authorized else self._status  # a probe without the token: the status alone
        fields: Fields = {}
        if route.call is not None:
            fields = parse_body(route.call, await _body(receive), self.limits.max_batch)
        if route.store:
            async with _Turn(self._turns(), self.limits.store_wait):
                answer = await handler(fields)
        else:
            answer = await handler(fields)
        if answer.text is not None:
            text, content_type = answer.text
            return answer.status, [(b"content-type", content_type.encode())], text
        return answer.status, [*_JSON, *_retry_after(answer.status)], orjson.dumps(answer.fields)

    def _authorized(self, scope: Scope) -> bool:
        """Whether the request carries the token (``Authorization: Bearer <token>``, the scheme in any case)."""
        if self._token is None:
            return True
        given = next((value for key, value in scope["headers"] if key == b"authorization"), b"")
        scheme, _, credentials = given.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._token)

    def _turns(self) -> asyncio.Semaphore:
        if self._store_turns is None:
            self._store_turns = asyncio.Semaphore(self.limits.store_connections)
        return self._store_turns

    # -- the client calls ------------------------------------------------------------------------

    async def _answered(self, name: str, fields: Fields, answer: Awaitable[List[bool]]) -> Answer:
        return Answer(answer_body(CALLS[name], fields, await answer))

    async def _claim_batch(self, fields: Fields) -> Answer:
        lease = fields.get("lease")
        extra: Dict[str, Any] = {}
        owner = None
        if lease is not None:  # the caller's lease token names its leases (a new one when it has none)
            extra["lease_token"] = fields.get("lease_token") or secrets.token_hex(16)
            owner = lease_owner(extra["lease_token"])
        batch = await self.dedup.claim_batch(fields["urls"], fields.get("base"), lease, owner=owner)
        errors = {str(position): " ".join(str(error).split()) for position, error in batch.errors.items()}
        return Answer({"won": batch.won, "canonical": batch.canonical, "errors": errors, **extra})

    async def _claim_final(self, fields: Fields) -> Answer:
        lease = fields.get("lease")
        extra: Dict[str, Any] = {}
        owner = None
        if lease is not None:
            extra["lease_token"] = fields.get("lease_token") or secrets.token_hex(16)
            owner = lease_owner(extra["lease_token"])
        won = await self.dedup.claim_final(fields["final_urls"], fields["requested"], lease, owner=owner)
        return Answer({"won": won, **extra})

    async def _expired(self, fields: Fields) -> Answer:
        lease = fields.get("lease")
        if lease is not None and "lease_token" not in fields:
            raise BadRequest("missing field 'lease_token' (expired with a lease hands the URLs to its token's owner)")
        owner = _owner(fields) if lease is not None else None
        return Answer({"urls": await self.dedup.expired(fields.get("limit", 1_000), lease, owner=owner)})

    async def _settled(self, name: str, settled: Awaitable[List[bool]]) -> Answer:
        """A lease call's answers; 409 when some leases are not the caller's (counted)."""
        answers = await settled
        return self._judged(name, CALLS[name].answer, answers)

    def _judged(self, name: str, field: str, answers: List[bool]) -> Answer:
        refused = answers.count(False)
        if not refused:
            return Answer({field: answers})
        self.http_metrics.lease_conflicts.labels(name).inc(refused)
        return Answer(
            {
                "error": f"{refused:,} of {len(answers):,} leases are not held by this lease token "
                f"(another client's, run out, never taken, or an invalid URL): '{field}' says which",
                field: answers,
            },
            409,
        )

    # -- the calls of a client's service store ---------------------------------------------------

    def _store(self) -> Any:
        """The store behind the Deduplicator, for the store calls."""
        store = self.dedup.store
        if store is None:
            raise NamespaceConflict(
                "this service keeps no store (strategy local): use the fingerprint calls, not the service strategy"
            )
        return store

    def _check_opened(self, fields: Fields) -> None:
        """Refuse (409) a store call of another namespace or canonical policy than the service's."""
        namespace, policy = self.dedup.namespace, self.dedup.policy.digest
        if fields["namespace"] == namespace and fields["policy"] != policy:
            # The client continues a crawl: it is the one to pass the other policy (or start anew).
            raise NamespaceConflict(
                f"this service serves namespace {namespace!r} with {policy_conflict(policy, fields['policy'])}"
            )
        if (fields["namespace"], fields["policy"]) != (namespace, policy):
            raise NamespaceConflict(
                f"this service serves namespace {namespace!r} under canonical policy {policy}, not namespace "
                f"{fields['namespace']!r} under {fields['policy']}"
            )

    def _fingerprints(self, name: str, text: Any) -> Fingerprints:
        fingerprints = decode_fingerprints(name, text)
        if len(fingerprints) > self.limits.max_batch:
            raise BadRequest(
                f"{name} must hold at most {self.limits.max_batch:,} fingerprints, got {len(fingerprints):,}", 413
            )
        return fingerprints

    async def _store_open(self, fields: Fields) -> Answer:
        store = self._store()
        self._check_opened(fields)
        return Answer({"strategy": store.strategy, "supports_leases": store.supports_leases})

    async def _store_claim(self, fields: Fields) -> Answer:
        store = self._store()
        self._check_opened(fields)
        answers = await store.claim_and_read(
            self._fingerprints("claims", fields["claims"]),
            self._fingerprints("reads", fields["reads"]),
            lease=self._lease(fields),
            token=_token(fields.get("token")),
            aliases=self._aliases(fields.get("aliases")),
        )
        return Answer({"won": answers.won, "present": answers.present, "held": list(answers.held)})

    async def _store_aliases(self, fields: Fields) -> Answer:
        store = self._store()
        self._check_opened(fields)
        finals = await store.read_aliases(self._fingerprints("fingerprints", fields["fingerprints"]))
        return Answer(
            {
                "found": [final is not None for final in finals],
                "finals": encode_fingerprints(Fingerprints.of([final for final in finals if final is not None])),
            }
        )

    async def _store_settle(self, fields: Fields) -> Answer:
        store = self._store()
        self._check_opened(fields)
        fingerprints = self._fingerprints("fingerprints", fields["fingerprints"])
        owner, token = _owner(fields, fields["owner"]), _token(fields.get("token"))
        action = Settle(fields["action"])
        if action is Settle.RENEW:
            if "lease" not in fields:
                raise BadRequest("missing field 'lease' (renew)")
            answers = await store.renew_leases(fingerprints, owner, fields["lease"], token=token)
        elif action is Settle.DONE:
            answers = await store.finish_leases(fingerprints, owner, token=token)
        else:
            answers = await store.release_leases(fingerprints, owner, token=token)
        return self._judged(f"store_{action.value}", "answers", answers)

    async def _store_expired(self, fields: Fields) -> Answer:
        store = self._store()
        self._check_opened(fields)
        if fields["limit"] > self.limits.max_batch:
            raise BadRequest(f"limit must be at most {self.limits.max_batch:,}", 413)
        owner, lease = fields.get("owner"), fields.get("lease")
        if lease is not None:
            if owner is None or "lease_token" not in fields:
                raise BadRequest("expired with a lease needs its owner and lease_token")
            owner = _owner(fields, owner)
        return Answer({"urls": await store.expired_leases(fields["limit"], owner, lease)})

    def _lease(self, fields: Fields) -> Optional[Lease]:
        """A store claim's lease terms (owned by the caller's lease token), or None."""
        terms = fields.get("lease")
        if terms is None:
            return None
        if set(terms) != {"owner", "seconds", "urls"}:
            raise BadRequest(f"lease must be an object with owner, seconds and urls, got the fields {sorted(terms)}")
        if not isinstance(terms["urls"], list) or not isinstance(terms["owner"], str):
            raise BadRequest("lease.owner must be a string and lease.urls a list of strings")
        if "lease_token" not in fields:
            raise BadRequest("missing field 'lease_token' (a leased claim names its owner's token)")
        return Lease(_owner(fields, terms["owner"]), terms["seconds"], terms["urls"])

    def _aliases(self, terms: Any) -> Optional[Aliases]:
        """A store claim's aliases of redirects, or None."""
        if terms is None:
            return None
        if set(terms) != {"requested", "finals", "capacity"} or not is_integer(terms["capacity"]):
            raise BadRequest(
                f"aliases must be an object with requested, finals (base64 of 16-byte fingerprints) and "
                f"capacity (an integer), got the fields {sorted(terms)}"
            )
        return Aliases(
            self._fingerprints("aliases.requested", terms["requested"]),
            self._fingerprints("aliases.finals", terms["finals"]),
            check_max_aliases(terms["capacity"]),
        )

    # -- the rest ----------------------------------------------------------------------------

    async def _metrics(self, fields: Fields) -> Answer:
        return Answer({}, text=self.metrics.exposition())

    async def _openapi(self, fields: Fields) -> Answer:
        return Answer(openapi_document())

    async def _status(self, fields: Fields) -> Answer:
        """``/healthz`` for a probe without the token: whether the store answers, nothing else."""
        answer = await self._health(fields)
        return Answer({"status": answer.fields["status"]}, answer.status)

    async def _health(self, fields: Fields) -> Answer:
        """200 when the store answers (and the local filter's fill), else 503."""
        local = self.dedup.local_filter
        report: Dict[str, Any] = {
            "strategy": self.dedup.config.strategy,
            "namespace": self.dedup.namespace,
            "policy": self.dedup.policy.digest,
            "filter_fill": local.fill_ratio,
            "filter_items": local.approx_items,
            "filter_capacity": local.capacity,
        }
        try:
            await self.dedup.seen_keys([HEALTH_KEY])
        except Exception as exc:  # StoreUnavailable and its kin: the store cannot answer
            if status_of(exc) != 503:
                raise
            report.update(status="unavailable", store=" ".join(str(exc).split()))
            return Answer(report, 503)
        report["status"] = "ok"
        return Answer(report)


class _Turn:
    """A turn at the store: one of its connections, waited for at most ``seconds`` (then :class:`ServiceBusy`)."""

    def __init__(self, turns: asyncio.Semaphore, seconds: float) -> None:
        self.turns, self.seconds = turns, seconds

    async def __aenter__(self) -> None:
        try:
            await asyncio.wait_for(self.turns.acquire(), self.seconds)
        except asyncio.TimeoutError:
            raise ServiceBusy(
                f"the service is busy: every store connection stayed in use for {self.seconds:g} s; try again"
            ) from None

    async def __aexit__(self, *exc_info: Any) -> None:
        self.turns.release()


async def _body(receive: Receive) -> bytes:
    """The request's body (the front bounded it before the application ran)."""
    chunks: List[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _path(route: Route) -> str:
    if route.call is not None:
        return route.call.path
    return {"healthz": "/healthz", "metrics": "/metrics", "openapi": "/v1/openapi.json"}[route.name]


def _retry_after(status: int) -> Headers:
    return [(b"retry-after", b"%d" % RETRY_AFTER_SECONDS)] if status == 503 else []


def _owner(fields: Fields, worker: str = "") -> str:
    """The store owner of a call's leases: its lease token's (and its worker id's, for a store call)."""
    return lease_owner(fields["lease_token"], worker)


def _token(text: Any) -> Optional[bytes]:
    """A store call's token (hex), or None."""
    if text is None:
        return None
    try:
        token = bytes.fromhex(text)
    except ValueError:
        token = b""
    if not 8 <= len(token) <= 64:
        raise BadRequest("token must be 8 to 64 bytes as hex digits")
    return token


#: The key ``/healthz`` reads to see that the store answers (a read: nothing is claimed).
HEALTH_KEY = "crawldedup-healthz"
