"""The fingerprint service as a plain ASGI application over one AsyncDeduplicator.

No web framework: the service has a fixed table of calls (:data:`~.protocol.CALLS`), and a
dictionary lookup routes them. Measured on the 2-core machine this was chosen on (wrk, 16
connections, one-key ``/mark_seen``, uvicorn with httptools and uvloop, 2 runs each): the plain
ASGI app 30,700-30,900 requests/s, the same behind Starlette 19,100-19,300, aiohttp 18,500-23,400,
granian (one worker, one thread) 21,100-24,500. With 1,000 keys per request the JSON work
dominates and all four stay within 4,600-6,400 requests/s.

The application parses and checks each request (:func:`~.protocol.parse_body`), calls the
Deduplicator method of the same name, and maps its exceptions to statuses in one table
(:func:`~.protocol.status_of`). It holds no dedup logic of its own.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Tuple

import orjson
from prometheus_client import Counter, Histogram

from .._checks import is_integer
from ..canonical.policy import policy_conflict
from ..fingerprints import Fingerprints
from ..metrics import LATENCY_BUCKETS_SECONDS, DedupMetrics
from ..stores.aliases import Aliases, check_max_aliases
from ..stores.base import Lease, NamespaceConflict
from ..stores.service import decode_fingerprints, encode_fingerprints
from .protocol import (
    CALL_AT,
    CALLS,
    MAX_BATCH,
    MAX_BODY_BYTES,
    RETRY_AFTER_SECONDS,
    STORE_CALL_AT,
    STORE_CALLS,
    BadRequest,
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

LOG = logging.getLogger("crawldedup.service")
_JSON: Headers = [(b"content-type", b"application/json")]


class HTTPMetrics:
    """The service's own metrics (requests and their latency), beside the Deduplicator's in their registry."""

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

    def observe(self, call: str, status: int, seconds: float) -> None:
        self.requests.labels(call, str(status)).inc()
        self.latency.labels(call).observe(seconds)


class ServiceApp:
    """The ASGI application: ``POST`` calls of :data:`~.protocol.CALLS`, ``GET /healthz`` and ``GET /metrics``.

    :param dedup: the AsyncDeduplicator that answers every call.
    :param metrics: the Deduplicator's metrics (``dedup`` attached); ``/metrics`` answers them
        and the service's own (:class:`HTTPMetrics`).
    :param token: the bearer token every request must carry (None: no token asked).
    :param max_body_bytes: larger bodies are answered 413 without being read to the end.
    :param max_batch: most URLs or keys in one call (more: 413).
    """

    def __init__(
        self,
        dedup: Any,
        metrics: DedupMetrics,
        *,
        token: Optional[str] = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self.dedup = dedup
        self.metrics = metrics
        self.http_metrics = HTTPMetrics(metrics)
        self._authorization = f"Bearer {token}".encode() if token is not None else None
        self.max_body_bytes = max_body_bytes
        self.max_batch = max_batch
        self._handlers: Dict[str, Callable[[Dict[str, Any]], Awaitable[Any]]] = {
            "seen_keys": lambda f: dedup.seen_keys(f["url_fps"]),
            "claim_keys": lambda f: dedup.claim_keys(f["url_fps"]),
            "claim_batch": self._claim_batch,
            "seen": lambda f: dedup.seen(f["urls"]),
            "done": lambda f: dedup.done(f["urls"]),
            "release": lambda f: dedup.release(f["urls"]),
            "renew": lambda f: dedup.renew(f["urls"], f["lease"]),
            "expired": lambda f: dedup.expired(**f),
            "claim_final": lambda f: dedup.claim_final(f["final_urls"], f["requested"], f.get("lease")),
            "seen_through_redirects": lambda f: dedup.seen_through_redirects(f["urls"]),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the server opens and closes the Deduplicator itself
            return
        started = time.perf_counter()
        path, method = scope["path"], scope["method"]
        name = CALL_AT.get(path) or _OTHER_CALLS.get(path, "unknown")
        try:
            status, headers, body = await self._answer(name, method, scope, receive)
        except Exception as exc:  # each error gets its status from one table; the rest is a bug of ours
            status = status_of(exc) or 500
            headers, body = list(_JSON), error_body(exc)
            if status == 503:
                headers.append((b"retry-after", str(RETRY_AFTER_SECONDS).encode()))
            elif status == 401:
                headers.append((b"www-authenticate", b'Bearer realm="crawldedup"'))
            elif status == 500:
                LOG.exception("%s %s failed", method, path)
                body = error_body(RuntimeError("internal error (logged by the server)"))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        self.http_metrics.observe(name, status, time.perf_counter() - started)

    async def _answer(self, name: str, method: str, scope: Scope, receive: Receive) -> Tuple[int, Headers, bytes]:
        """Status, headers and body of one request; raises what :func:`~.protocol.status_of` maps."""
        self._authorize(scope)
        if name == "unknown":
            raise BadRequest(f"no such call: {scope['path']} (see docs/service.md)", status=404)
        expected = "GET" if name in ("healthz", "metrics") else "POST"
        if method != expected:
            return (
                405,
                [*_JSON, (b"allow", expected.encode())],
                error_body(BadRequest(f"{scope['path']} takes {expected}, got {method}")),
            )
        if name == "metrics":
            text, content_type = self.metrics.exposition()
            return 200, [(b"content-type", content_type.encode())], text
        if name == "healthz":
            return await self._health()
        if name.startswith(_STORE):
            step = name[len(_STORE) :]
            fields = parse_body(STORE_CALLS[step], await self._body(scope, receive), self.max_batch)
            return 200, list(_JSON), orjson.dumps(await self._store_call(step, fields))
        fields = parse_body(CALLS[name], await self._body(scope, receive), self.max_batch)
        answer = await self._handlers[name](fields)
        extra: Dict[str, Any] = {}
        if name == "claim_batch":
            answer, extra = answer
        return 200, list(_JSON), orjson.dumps(answer_body(CALLS[name], fields, answer, **extra))

    def _authorize(self, scope: Scope) -> None:
        if self._authorization is None:
            return
        given = next((value for key, value in scope["headers"] if key == b"authorization"), b"")
        if not hmac.compare_digest(given, self._authorization):
            raise Unauthorized("this service needs its bearer token: Authorization: Bearer <token>")

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        """The request body, refused (413) past :attr:`max_body_bytes` before reading it all."""
        limit = self.max_body_bytes
        too_large = BadRequest(f"the body must be at most {limit:,} bytes", status=413)
        declared = next((value for key, value in scope["headers"] if key == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_large
        chunks: List[bytes] = []
        size = 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    async def _claim_batch(self, fields: Dict[str, Any]) -> Tuple[List[bool], Dict[str, Any]]:
        batch = await self.dedup.claim_batch(fields["urls"], fields.get("base"), fields.get("lease"))
        errors = {str(position): " ".join(str(error).split()) for position, error in batch.errors.items()}
        return batch.won, {"canonical": batch.canonical, "errors": errors}

    async def _store_call(self, step: str, fields: Dict[str, Any]) -> Dict[str, Any]:
        """A call of the ``service`` store of a client's Deduplicator, answered by this service's store."""
        store = self.dedup.store
        if store is None:
            raise NamespaceConflict(
                "this service keeps no store (strategy local): use the fingerprint calls, not the service strategy"
            )
        if step == "open":
            if fields["namespace"] == self.dedup.namespace and fields["policy"] != self.dedup.policy.digest:
                # The client continues a crawl: it is the one to pass the other policy (or start anew).
                raise NamespaceConflict(
                    f"this service serves namespace {self.dedup.namespace!r} with "
                    f"{policy_conflict(self.dedup.policy.digest, fields['policy'])}"
                )
            if (fields["namespace"], fields["policy"]) != (self.dedup.namespace, self.dedup.policy.digest):
                raise NamespaceConflict(
                    f"this service serves namespace {self.dedup.namespace!r} under canonical policy "
                    f"{self.dedup.policy.digest}, not namespace {fields['namespace']!r} under {fields['policy']}"
                )
            return {"strategy": store.strategy, "supports_leases": store.supports_leases}
        token = _token(fields.get("token"))
        if step == "claim":
            answers = await store.claim_and_read(
                decode_fingerprints("claims", fields["claims"]),
                decode_fingerprints("reads", fields["reads"]),
                lease=_lease(fields.get("lease")),
                token=token,
                aliases=_aliases(fields.get("aliases")),
            )
            return {"won": answers.won, "present": answers.present, "held": list(answers.held)}
        if step == "aliases":
            finals = await store.read_aliases(decode_fingerprints("fingerprints", fields["fingerprints"]))
            return {
                "found": [final is not None for final in finals],
                "finals": encode_fingerprints(Fingerprints.of([final for final in finals if final is not None])),
            }
        if step == "settle":
            fingerprints = decode_fingerprints("fingerprints", fields["fingerprints"])
            owner, action = fields["owner"], fields["action"]
            if action == "renew":
                if "lease" not in fields:
                    raise BadRequest("missing field 'lease' (renew)")
                settled = await store.renew_leases(fingerprints, owner, fields["lease"], token=token)
            elif action == "done":
                settled = await store.finish_leases(fingerprints, owner, token=token)
            else:
                settled = await store.release_leases(fingerprints, owner, token=token)
            return {"answers": settled}
        return {"urls": await store.expired_leases(fields["limit"], fields.get("owner"), fields.get("lease"))}

    async def _health(self) -> Tuple[int, Headers, bytes]:
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
            return 503, [*_JSON, (b"retry-after", str(RETRY_AFTER_SECONDS).encode())], orjson.dumps(report)
        report["status"] = "ok"
        return 200, list(_JSON), orjson.dumps(report)


_STORE = "store_"
#: The calls other than the fingerprint calls: path -> their name (in metrics).
_OTHER_CALLS = {
    "/healthz": "healthz",
    "/metrics": "metrics",
    **{path: _STORE + step for path, step in STORE_CALL_AT.items()},
}


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


def _aliases(terms: Any) -> Optional[Aliases]:
    """A store call's aliases of redirects, or None."""
    if terms is None:
        return None
    if set(terms) != {"requested", "finals", "capacity"} or not is_integer(terms["capacity"]):
        raise BadRequest(
            f"aliases must be an object with requested, finals (base64 of 16-byte fingerprints) and "
            f"capacity (an integer), got the fields {sorted(terms)}"
        )
    return Aliases(
        decode_fingerprints("aliases.requested", terms["requested"]),
        decode_fingerprints("aliases.finals", terms["finals"]),
        check_max_aliases(terms["capacity"]),
    )


def _lease(terms: Any) -> Optional[Lease]:
    """A store call's lease terms, or None."""
    if terms is None:
        return None
    if set(terms) != {"owner", "seconds", "urls"}:
        raise BadRequest(f"lease must be an object with owner, seconds and urls, got the fields {sorted(terms)}")
    if not isinstance(terms["urls"], list):
        raise BadRequest("lease.urls must be a list of strings")
    return Lease(terms["owner"], terms["seconds"], terms["urls"])


#: The key ``/healthz`` reads to see that the store answers (a read: nothing is claimed).
HEALTH_KEY = "crawldedup-healthz"
