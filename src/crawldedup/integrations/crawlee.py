"""crawlee-python integration: a storage client whose request queues fetch each page once.

crawlee deduplicates requests by their ``unique_key`` inside one request queue. This adapter
plugs into crawlee's own extension point for that, the storage client: it wraps any storage
client (by default crawlee's file-system one), and each request queue it opens claims the
requests added to it through an :class:`~crawldedup.AsyncDeduplicator` before they enter the
queue. Only the requests this process won are queued; the others are answered as already
present, as crawlee's own queue answers a repeated ``unique_key``. So several crawlee
processes sharing one store fetch each page once, and a restarted crawler refetches nothing.

.. code-block:: python

    from crawlee.crawlers import ParselCrawler
    from crawldedup import AsyncDeduplicator
    from crawldedup.integrations.crawlee import DedupStorageClient

    crawler = ParselCrawler(storage_client=DedupStorageClient(AsyncDeduplicator.from_env()))

What a request is keyed by: a GET request without a payload, by its URL canonicalized by the
Deduplicator's policy (so ``?utm_source=...``, a fragment, a default port or the host's case do
not make another page); any other request, and one whose URL the policy refuses, by crawlee's
``unique_key`` (``crawlee:<unique_key>``, claimed with :meth:`~crawldedup.AsyncDeduplicator.claim_keys`).

Redirects: crawlee's HTTP clients follow them inside one fetch, so a short link to a page
fetched already costs a second body fetch, and a page behind a redirect is never claimed under
its final URL. :class:`DedupHttpClient` follows them itself, hop by hop, and applies the rule
that a fetch chain owns one claim (:meth:`~crawldedup.AsyncDeduplicator.claim_final`) before
each hop's fetch: a redirect to another spelling of the page the chain holds goes on, a redirect
to another page claims it, and a chain that would land on a page another request holds stops
before its fetch (the request is handled, its page is not fetched twice)::

    crawler = ParselCrawler(storage_client=DedupStorageClient(dedup), http_client=DedupHttpClient(dedup))

This is the only module that imports crawlee (``pip install crawldedup[crawlee]``).
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple
from urllib.parse import urljoin, urlsplit

from .._extras import needs_extra

with needs_extra("crawldedup.integrations.crawlee", "crawlee"):
    from crawlee import Request
    from crawlee.configuration import Configuration
    from crawlee.errors import ContextPipelineInterruptedError
    from crawlee.http_clients import HttpClient, HttpCrawlingResult, HttpResponse, ImpitHttpClient
    from crawlee.storage_clients import FileSystemStorageClient, StorageClient

    # The base classes of storage clients, as crawlee's guide to writing one imports them.
    from crawlee.storage_clients._base import DatasetClient, KeyValueStoreClient, RequestQueueClient
    from crawlee.storage_clients.models import AddRequestsResponse, ProcessedRequest, RequestQueueMetadata

from ..canonical import canonicalize_many

if TYPE_CHECKING:
    from crawlee._types import HttpMethod  # crawlee names the type of its methods there only
from ..dedup import AsyncDeduplicator

__all__ = ["DedupHttpClient", "DedupRequestQueueClient", "DedupStorageClient", "KEY_PREFIX", "MAX_REDIRECTS"]

#: Put before crawlee's ``unique_key`` when a request is claimed by it rather than by its URL.
KEY_PREFIX = "crawlee:"
#: Redirects one fetch follows at most (crawlee's own clients follow 20).
MAX_REDIRECTS = 20
#: The statuses of an HTTP redirect (the Fetch Standard's redirect statuses).
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Headers of one origin only, dropped when a redirect leaves it (as browsers and crawlee do).
_ORIGIN_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
#: Headers of a request body, dropped when a redirect turns the request into a GET.
_BODY_HEADERS = frozenset(
    {"content-encoding", "content-language", "content-location", "content-type", "content-length"}
)


def _by_url(request: Request) -> bool:
    """Whether a request is claimed by its canonical URL (a GET without a payload)."""
    return request.method == "GET" and not request.payload


def _keyed(request: Request, key: str) -> Request:
    """``request`` queued under ``key``."""
    return request if request.unique_key == key else request.model_copy(update={"unique_key": key})


class DedupRequestQueueClient(RequestQueueClient):
    """A request queue client that claims requests before its inner client queues them.

    Everything but adding requests is the inner client's. A request claimed here that the inner
    client then leaves unprocessed (crawlee adds it again later) is remembered, and queued
    without a second claim when it comes back, so that it is not taken for another worker's.

    :param inner: the request queue client that holds the queue.
    :param dedup: the Deduplicator that claims the requests (opened on first use).
    """

    def __init__(self, inner: RequestQueueClient, dedup: AsyncDeduplicator) -> None:
        self.inner = inner
        self.dedup = dedup
        #: unique_key of requests won here that the inner client did not take yet.
        self._owed: Dict[str, None] = {}

    async def add_batch_of_requests(
        self, requests: Sequence[Request], *, forefront: bool = False
    ) -> AddRequestsResponse:
        """Claim ``requests``, then queue the ones won here (and those owed) in the inner client.

        A GET request won here is queued under its canonical URL as ``unique_key``: crawlee's
        own key lowercases the whole URL, and would take a page whose path differs only in case
        from another's (``/s/aB``, ``/s/Ab``) for that one, and never hand it out.

        :raises StoreUnavailable: when the store stayed unreachable (nothing was queued: crawlee
            fails the request handler that added them, and retries it).
        """
        keys = self._keys(requests)
        won = await self._claim(requests, keys)
        fresh = [_keyed(request, key) for request, key, ok in zip(requests, keys, won) if ok]
        seen = [
            ProcessedRequest(unique_key=request.unique_key, was_already_present=True, was_already_handled=True)
            for request, ok in zip(requests, won)
            if not ok
        ]
        if not fresh:
            return AddRequestsResponse(processed_requests=seen, unprocessed_requests=[])
        response = await self.inner.add_batch_of_requests(fresh, forefront=forefront)
        for request in fresh:
            self._owed.pop(request.unique_key, None)
        for unprocessed in response.unprocessed_requests:
            self._owed[unprocessed.unique_key] = None
        return AddRequestsResponse(
            processed_requests=[*response.processed_requests, *seen], unprocessed_requests=response.unprocessed_requests
        )

    def _keys(self, requests: Sequence[Request]) -> List[str]:
        """The key each request is queued (and owed) under: a GET's canonical URL, else its own ``unique_key``."""
        keys = [request.unique_key for request in requests]
        by_url = [i for i, request in enumerate(requests) if _by_url(request)]
        if by_url:
            canonical = canonicalize_many([requests[i].url for i in by_url], policy=self.dedup.policy).urls
            for i, url in zip(by_url, canonical):
                if url is not None:
                    keys[i] = url
        return keys

    async def _claim(self, requests: Sequence[Request], keys: Sequence[str]) -> List[bool]:
        """Per request: won here (or owed), in at most two store round trips."""
        won = [key in self._owed for key in keys]
        pending = [i for i, ok in enumerate(won) if not ok]
        by_url = [i for i in pending if _by_url(requests[i])]
        by_key = [i for i in pending if not _by_url(requests[i])]
        if by_url:
            batch = await self.dedup.claim_batch([requests[i].url for i in by_url])
            for position, i in enumerate(by_url):
                won[i] = batch.won[position]
            by_key += [by_url[position] for position in batch.errors]  # refused by the policy
        if by_key:
            for i, ok in zip(
                by_key, await self.dedup.claim_keys([KEY_PREFIX + requests[i].unique_key for i in by_key])
            ):
                won[i] = ok
        return won

    async def get_metadata(self) -> RequestQueueMetadata:
        return await self.inner.get_metadata()

    async def drop(self) -> None:
        await self.inner.drop()

    async def purge(self) -> None:
        await self.inner.purge()

    async def get_request(self, unique_key: str) -> Optional[Request]:
        return await self.inner.get_request(unique_key)

    async def fetch_next_request(self) -> Optional[Request]:
        return await self.inner.fetch_next_request()

    async def mark_request_as_handled(self, request: Request) -> Optional[ProcessedRequest]:
        return await self.inner.mark_request_as_handled(request)

    async def reclaim_request(self, request: Request, *, forefront: bool = False) -> Optional[ProcessedRequest]:
        return await self.inner.reclaim_request(request, forefront=forefront)

    async def is_empty(self) -> bool:
        return await self.inner.is_empty()

    async def is_finished(self) -> bool:
        return await self.inner.is_finished()


def _origin(url: str) -> Tuple[str, Optional[str], Optional[int]]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def _redirected_method(status: int, method: HttpMethod) -> HttpMethod:
    """The method of a redirect's next request, as the Fetch Standard says (HTTP-redirect fetch)."""
    if (status in (301, 302) and method == "POST") or (status == 303 and method not in ("GET", "HEAD")):
        return "GET"
    return method


class DedupHttpClient(HttpClient):
    """An HTTP client for crawlee's crawlers that claims each redirect's page before fetching it.

    It sends every request through ``inner`` one hop at a time and follows HTTP redirects itself
    (301, 302, 303, 307, 308): before a GET hop is fetched, its URL is claimed for the fetch
    chain with :meth:`~crawldedup.AsyncDeduplicator.claim_final`. A hop to another spelling of
    the page the chain holds goes on; a hop to another page is fetched only if the chain won it;
    otherwise the request stops there, before any body is fetched twice (crawlee marks it
    handled: its page is another request's). ``request.loaded_url`` is the URL fetched last.
    :meth:`send_request` and :meth:`stream` (the crawling context's own requests) go to ``inner``
    as they are.

    :param dedup: the AsyncDeduplicator that claims (the one of the crawler's
        :class:`DedupStorageClient`, so that a page is claimed once, whichever way it came).
    :param inner: a crawlee HTTP client that does NOT follow redirects itself (default:
        ``ImpitHttpClient(follow_redirects=False)``, crawlee's default client).
    :param max_redirects: the most redirects one fetch follows.
    """

    def __init__(
        self, dedup: AsyncDeduplicator, inner: Optional[HttpClient] = None, *, max_redirects: int = MAX_REDIRECTS
    ) -> None:
        super().__init__()
        self.dedup = dedup
        self.inner = inner if inner is not None else ImpitHttpClient(follow_redirects=False)
        self.max_redirects = max_redirects

    async def crawl(
        self,
        request: Request,
        *,
        session: Any = None,
        proxy_info: Any = None,
        statistics: Any = None,
        timeout: Optional[timedelta] = None,
    ) -> HttpCrawlingResult:
        """Fetch ``request``, following its redirects and claiming each hop's page first.

        :raises ContextPipelineInterruptedError: when a redirect leads to a page another request
            holds (crawlee handles the request without processing it).
        :raises StoreUnavailable: when the store stayed unreachable (crawlee retries the request).
        """
        deadline = time.monotonic() + timeout.total_seconds() if timeout is not None else None
        url, method, payload = request.url, request.method, request.payload
        headers = dict(request.headers) if request.headers else {}
        chain = [url]
        for _ in range(self.max_redirects + 1):
            left = None if deadline is None else timedelta(seconds=max(deadline - time.monotonic(), 0.0))
            response = await self.inner.send_request(
                url,
                method=method,
                headers=headers,
                payload=payload,
                session=session,
                proxy_info=proxy_info,
                timeout=left,
            )
            location = response.headers.get("location")
            target = urljoin(url, location) if response.status_code in _REDIRECTS and location else None
            if target is None or urlsplit(target).scheme not in ("http", "https"):
                break
            next_method = _redirected_method(response.status_code, method)
            if next_method != method:
                method, payload = next_method, None
                headers = {name: value for name, value in headers.items() if name.lower() not in _BODY_HEADERS}
            if _origin(target) != _origin(url):
                headers = {name: value for name, value in headers.items() if name.lower() not in _ORIGIN_HEADERS}
            if method == "GET" and not payload and not (await self.dedup.claim_final([target], requested=[chain]))[0]:
                raise ContextPipelineInterruptedError(
                    f"crawldedup: {request.url} redirects to {target}, a page another request holds"
                )
            chain.append(target)
            url = target
        else:
            raise ContextPipelineInterruptedError(
                f"crawldedup: {request.url}: more than {self.max_redirects} redirects"
            )
        if statistics is not None:
            statistics.register_status_code(response.status_code)
        request.loaded_url = url
        return HttpCrawlingResult(http_response=response)

    async def send_request(self, url: str, **options: Any) -> HttpResponse:
        return await self.inner.send_request(url, **options)

    def stream(self, url: str, **options: Any) -> AbstractAsyncContextManager[HttpResponse]:
        return self.inner.stream(url, **options)

    async def cleanup(self) -> None:
        await self.inner.cleanup()

    async def __aenter__(self) -> DedupHttpClient:
        await self.inner.__aenter__()
        self._active = True
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self._active = False
        await self.inner.__aexit__(*exc_info)  # the inner client cleans up


class DedupStorageClient(StorageClient):
    """crawlee's storage client with request queues that claim through ``dedup`` first.

    Datasets and key-value stores are the inner client's, untouched.

    :param dedup: the AsyncDeduplicator shared by every queue this client opens.
    :param inner: the storage client that keeps the data (default: crawlee's file-system one;
        give it ``purge_on_start=False`` in crawlee's configuration to resume a crawl).
    """

    def __init__(self, dedup: AsyncDeduplicator, inner: Optional[StorageClient] = None) -> None:
        self.dedup = dedup
        self.inner = inner if inner is not None else FileSystemStorageClient()

    def get_storage_client_cache_key(self, configuration: Configuration) -> Hashable:
        # Queues opened through this client differ from the inner client's own: another key.
        return (type(self).__name__, self.inner.get_storage_client_cache_key(configuration), id(self.dedup))

    async def create_dataset_client(
        self,
        *,
        id: Optional[str] = None,
        name: Optional[str] = None,  # noqa: A002
        alias: Optional[str] = None,
        configuration: Optional[Configuration] = None,
    ) -> DatasetClient:
        return await self.inner.create_dataset_client(id=id, name=name, alias=alias, configuration=configuration)

    async def create_kvs_client(
        self,
        *,
        id: Optional[str] = None,
        name: Optional[str] = None,  # noqa: A002
        alias: Optional[str] = None,
        configuration: Optional[Configuration] = None,
    ) -> KeyValueStoreClient:
        return await self.inner.create_kvs_client(id=id, name=name, alias=alias, configuration=configuration)

    async def create_rq_client(
        self,
        *,
        id: Optional[str] = None,
        name: Optional[str] = None,  # noqa: A002
        alias: Optional[str] = None,
        configuration: Optional[Configuration] = None,
    ) -> DedupRequestQueueClient:
        inner = await self.inner.create_rq_client(id=id, name=name, alias=alias, configuration=configuration)
        return DedupRequestQueueClient(inner, self.dedup)

    def get_rate_limit_errors(self) -> Dict[int, int]:
        return self.inner.get_rate_limit_errors()
