"""Clients of the fingerprint service with the Deduplicator's method names: sync and asyncio.

Both build the same requests and read the same answers (:class:`Exchange`, from
:mod:`~crawldedup.service.protocol`); they differ only in how the bytes travel (httpx's
``Client`` or ``AsyncClient``, one pool of kept-alive connections each). A request that
cannot reach the server (refused connection, connect timeout) or that the server answers 503
(its store is down: nothing was recorded) is retried under a :class:`~crawldedup.RetryPolicy`,
then raised as :class:`~crawldedup.StoreUnavailable`. A request sent whose answer was lost is
not retried (the server may have recorded it): it is raised as StoreUnavailable at once, and a
claim retried by the caller then answers "not won" for what the lost call won.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Optional, Sequence, Tuple, Type, TypeVar, Union, cast

from ..dedup import ClaimBatch
from ..stores.base import RetryPolicy, StoreUnavailable
from .protocol import CALLS, invalid_urls, listed, read_answer, request_body


def _httpx() -> Any:
    """httpx, which the clients talk through, or an ImportError that says how to install it."""
    try:
        import httpx
    except ModuleNotFoundError:
        raise ImportError("crawldedup's service clients need httpx: pip install 'crawldedup[service]'") from None
    return httpx


T = TypeVar("T")
#: Seconds a call may take before it fails (a 100,000-URL claim takes about one second).
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class Exchange(Generic[T]):
    """One call: the client method it is, where it goes, its body, and how its answer is read."""

    name: str
    path: str
    body: bytes
    read: Callable[[Dict[str, Any]], T]


def _exchange(name: str, read: Callable[[Dict[str, Any]], T], **fields: Any) -> Exchange[T]:
    path, body = request_body(name, **fields)
    return Exchange(name, path, body, read)


def _batch(urls: Sequence[Any]) -> List[Any]:
    if isinstance(urls, (str, bytes)):
        raise TypeError(f"urls must be a list of URLs, not a single {type(urls).__name__}")
    return list(urls)


class Requests:
    """The requests of the Deduplicator's methods, and how each answer becomes their result.

    :param lease_token: the client's secret that names its leases at the service: sent with its
        leased claims and with every done, release and renew (docs/service.md, "Leases").
    """

    def __init__(self, lease_token: str) -> None:
        self.lease_token = lease_token

    def _leasing(self, lease: Optional[float]) -> Optional[str]:
        return self.lease_token if lease is not None else None

    def claim_batch(self, urls: Sequence[str], base: Optional[str], lease: Optional[float]) -> Exchange[ClaimBatch]:
        return _exchange(
            "claim_batch",
            lambda f: ClaimBatch(listed(f["won"]), f["canonical"], invalid_urls(f["errors"])),
            urls=_batch(urls),
            base=base,
            lease=lease,
            lease_token=self._leasing(lease),
        )

    def claim_many(self, urls: Sequence[str], lease: Optional[float]) -> Exchange[List[bool]]:
        return _exchange(
            "claim_batch", lambda f: listed(f["won"]), urls=_batch(urls), lease=lease, lease_token=self._leasing(lease)
        )

    @staticmethod
    def claim_keys(keys: Sequence[str]) -> Exchange[List[bool]]:
        return _exchange("claim_keys", lambda f: listed(f["first_seen"]), url_fps=_batch(keys))

    @staticmethod
    def seen_keys(keys: Sequence[str]) -> Exchange[List[bool]]:
        return _exchange("seen_keys", lambda f: listed(f["seen"]), url_fps=_batch(keys))

    @staticmethod
    def seen(urls: Sequence[str]) -> Exchange[List[bool]]:
        return _exchange("seen", lambda f: listed(f["seen"]), urls=_batch(urls))

    def settle(self, name: str, urls: Sequence[str], lease: Optional[float] = None) -> Exchange[List[bool]]:
        answer = CALLS[name].answer
        return _exchange(
            name, lambda f: listed(f[answer]), urls=_batch(urls), lease=lease, lease_token=self.lease_token
        )

    def claim_final(
        self, final_urls: Sequence[str], requested: Sequence[Union[str, Sequence[str]]], lease: Optional[float]
    ) -> Exchange[List[bool]]:
        return _exchange(
            "claim_final",
            lambda f: listed(f["won"]),
            final_urls=_batch(final_urls),
            requested=[link if isinstance(link, str) else list(link) for link in _batch(requested)],
            lease=lease,
            lease_token=self._leasing(lease),
        )

    @staticmethod
    def seen_through_redirects(urls: Sequence[str]) -> Exchange[List[bool]]:
        return _exchange("seen_through_redirects", lambda f: listed(f["seen"]), urls=_batch(urls))

    def expired(self, limit: int, lease: Optional[float]) -> Exchange[List[str]]:
        return _exchange(
            "expired",
            lambda f: [str(url) for url in f["urls"]],
            limit=limit,
            lease=lease,
            lease_token=self._leasing(lease),
        )


#: What :meth:`_Client._judge` answers for an attempt to make again.
RETRY = object()


class _Client:
    """What both clients share: the address, the token, the retry policy, the judging of an attempt."""

    _unsent: Tuple[Type[BaseException], ...] = ()

    def __init__(
        self,
        url: str,
        *,
        token: Optional[str],
        timeout: float,
        retry: Optional[RetryPolicy],
        lease_token: Optional[str],
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be a URL starting with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self.retry = retry if retry is not None else RetryPolicy()
        self._headers = {"content-type": "application/json"}
        if token is not None:
            self._headers["authorization"] = f"Bearer {token}"
        self._timeout = timeout
        #: The secret that names this client's leases at the service (docs/service.md, "Leases").
        self.lease_token = lease_token if lease_token is not None else secrets.token_hex(16)
        self.requests = Requests(self.lease_token)

    def _judge(
        self,
        exchange: Exchange[T],
        attempt: int,
        status: int = 0,
        body: bytes = b"",
        error: Optional[BaseException] = None,
    ) -> Any:
        """What attempt ``attempt`` of ``exchange`` gives: its result, :data:`RETRY`, or an exception raised.

        :param error: the transport's error instead of an answer (``status`` and ``body``).
        """
        if error is None:
            if status != 503 or attempt >= self.retry.attempts:
                return exchange.read(read_answer(exchange.name, status, body, self.url))
        elif not isinstance(error, self._unsent):  # sent, but no answer: it may have been recorded
            reason = f"{type(error).__name__}: {error} (the call may have been recorded)"
            raise StoreUnavailable(self.url, attempt, reason) from error
        elif attempt >= self.retry.attempts:
            raise StoreUnavailable(self.url, attempt, f"{type(error).__name__}: {error}") from error
        return RETRY

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"


class ServiceClient(_Client):
    """A ``crawldedup serve`` service, called like a :class:`~crawldedup.Deduplicator` (thread-safe).

    :param url: the service, such as ``http://127.0.0.1:8707``.
    :param token: its bearer token, when it asks for one.
    :param timeout: seconds one call may take.
    :param retry: retries of a call that did not reach the service or that it answered 503.
    :param lease_token: the secret (32 to 128 hex digits) that names this client's leases: only
        a client with it settles them (``done``, ``release``, ``renew``). Default: a new random
        one; keep :attr:`lease_token` and give it again to settle leases after a restart.
    :raises ValueError: for a URL that is not http(s).
    :raises ImportError: without httpx (``pip install 'crawldedup[service]'``).
    """

    def __init__(
        self,
        url: str,
        *,
        token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: Optional[RetryPolicy] = None,
        lease_token: Optional[str] = None,
    ) -> None:
        httpx = _httpx()
        super().__init__(url, token=token, timeout=timeout, retry=retry, lease_token=lease_token)
        self._httpx = httpx
        self._unsent = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
        self._http = httpx.Client(base_url=self.url, headers=self._headers, timeout=timeout)

    def _send(self, exchange: Exchange[T]) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.post(exchange.path, content=exchange.body)
                outcome = self._judge(exchange, attempt, response.status_code, response.content)
            except self._httpx.HTTPError as exc:
                outcome = self._judge(exchange, attempt, error=exc)
            if outcome is not RETRY:
                return cast(T, outcome)
            time.sleep(self.retry.delay(attempt))

    def claim(self, url: str, lease: Optional[float] = None) -> bool:
        """Claim one URL; True for exactly one caller across all the service's clients."""
        return self.claim_many([url], lease)[0]

    def claim_many(self, urls: Sequence[str], lease: Optional[float] = None) -> List[bool]:
        """Claim a batch; per URL, True when this caller won it (see :meth:`Deduplicator.claim_many`)."""
        return self._send(self.requests.claim_many(urls, lease))

    def claim_batch(self, urls: Sequence[str], base: Optional[str] = None, lease: Optional[float] = None) -> ClaimBatch:
        """Claim a batch: per URL, won, its canonical form, and why the invalid ones were refused."""
        return self._send(self.requests.claim_batch(urls, base, lease))

    def claim_keys(self, keys: Sequence[str]) -> List[bool]:
        """Claim precomputed keys as they are (``POST /mark_seen``); per key, True when first seen."""
        return self._send(self.requests.claim_keys(keys))

    def seen_keys(self, keys: Sequence[str]) -> List[bool]:
        """Whether precomputed keys were claimed (``POST /is_seen``); claims nothing."""
        return self._send(self.requests.seen_keys(keys))

    def seen(self, urls: Sequence[str]) -> List[bool]:
        """Whether URLs were claimed (canonicalized by the service); claims nothing."""
        return self._send(self.requests.seen(urls))

    def claim_final(
        self, final_urls: Sequence[str], requested: Sequence[Union[str, Sequence[str]]], lease: Optional[float] = None
    ) -> List[bool]:
        """After redirected fetches: per fetch, True when its final page is new (``POST
        /v1/claim_final``; see :meth:`Deduplicator.claim_final`)."""
        return self._send(self.requests.claim_final(final_urls, requested, lease))

    def seen_through_redirects(self, urls: Sequence[str]) -> List[bool]:
        """Whether URLs are recorded as redirecting to a claimed page (``POST /v1/seen_through_redirects``)."""
        return self._send(self.requests.seen_through_redirects(urls))

    def done(self, urls: Sequence[str]) -> List[bool]:
        """Make leased URLs visited for good; per URL, True when done (see :meth:`Deduplicator.done`)."""
        return self._send(self.requests.settle("done", urls))

    def release(self, urls: Sequence[str]) -> List[bool]:
        """Free leased URLs (a failed fetch to retry); per URL, True when released."""
        return self._send(self.requests.settle("release", urls))

    def renew(self, urls: Sequence[str], lease: float) -> List[bool]:
        """Move the deadline of leases to ``lease`` seconds from now; per URL, True when renewed."""
        return self._send(self.requests.settle("renew", urls, lease))

    def expired(self, limit: int = 1_000, lease: Optional[float] = None) -> List[str]:
        """Canonical URLs of expired leases, each handed back once (see :meth:`Deduplicator.expired`)."""
        return self._send(self.requests.expired(limit, lease))

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncServiceClient(_Client):
    """A ``crawldedup serve`` service, called like an AsyncDeduplicator (one event loop).

    Arguments and errors as :class:`ServiceClient`.
    """

    def __init__(
        self,
        url: str,
        *,
        token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: Optional[RetryPolicy] = None,
        lease_token: Optional[str] = None,
    ) -> None:
        httpx = _httpx()
        super().__init__(url, token=token, timeout=timeout, retry=retry, lease_token=lease_token)
        self._httpx = httpx
        self._unsent = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
        self._http = httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=timeout)

    async def _send(self, exchange: Exchange[T]) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.post(exchange.path, content=exchange.body)
                outcome = self._judge(exchange, attempt, response.status_code, response.content)
            except self._httpx.HTTPError as exc:
                outcome = self._judge(exchange, attempt, error=exc)
            if outcome is not RETRY:
                return cast(T, outcome)
            await asyncio.sleep(self.retry.delay(attempt))

    async def claim(self, url: str, lease: Optional[float] = None) -> bool:
        """Claim one URL; True for exactly one caller across all the service's clients."""
        return (await self.claim_many([url], lease))[0]

    async def claim_many(self, urls: Sequence[str], lease: Optional[float] = None) -> List[bool]:
        """Claim a batch; per URL, True when this caller won it."""
        return await self._send(self.requests.claim_many(urls, lease))

    async def claim_batch(
        self, urls: Sequence[str], base: Optional[str] = None, lease: Optional[float] = None
    ) -> ClaimBatch:
        """Claim a batch: per URL, won, its canonical form, and why the invalid ones were refused."""
        return await self._send(self.requests.claim_batch(urls, base, lease))

    async def claim_keys(self, keys: Sequence[str]) -> List[bool]:
        """Claim precomputed keys as they are (``POST /mark_seen``)."""
        return await self._send(self.requests.claim_keys(keys))

    async def seen_keys(self, keys: Sequence[str]) -> List[bool]:
        """Whether precomputed keys were claimed (``POST /is_seen``); claims nothing."""
        return await self._send(self.requests.seen_keys(keys))

    async def seen(self, urls: Sequence[str]) -> List[bool]:
        """Whether URLs were claimed (canonicalized by the service); claims nothing."""
        return await self._send(self.requests.seen(urls))

    async def claim_final(
        self, final_urls: Sequence[str], requested: Sequence[Union[str, Sequence[str]]], lease: Optional[float] = None
    ) -> List[bool]:
        """See :meth:`ServiceClient.claim_final`."""
        return await self._send(self.requests.claim_final(final_urls, requested, lease))

    async def seen_through_redirects(self, urls: Sequence[str]) -> List[bool]:
        """See :meth:`ServiceClient.seen_through_redirects`."""
        return await self._send(self.requests.seen_through_redirects(urls))

    async def done(self, urls: Sequence[str]) -> List[bool]:
        """Make leased URLs visited for good; per URL, True when done."""
        return await self._send(self.requests.settle("done", urls))

    async def release(self, urls: Sequence[str]) -> List[bool]:
        """Free leased URLs; per URL, True when released."""
        return await self._send(self.requests.settle("release", urls))

    async def renew(self, urls: Sequence[str], lease: float) -> List[bool]:
        """Move the deadline of leases to ``lease`` seconds from now; per URL, True when renewed."""
        return await self._send(self.requests.settle("renew", urls, lease))

    async def expired(self, limit: int = 1_000, lease: Optional[float] = None) -> List[str]:
        """Canonical URLs of expired leases, each handed back once."""
        return await self._send(self.requests.expired(limit, lease))

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncServiceClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
