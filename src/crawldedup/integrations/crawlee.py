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

This is the only module that imports crawlee (``pip install crawldedup[crawlee]``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Dict, List, Optional

from crawlee import Request
from crawlee.configuration import Configuration
from crawlee.storage_clients import FileSystemStorageClient, StorageClient

# The base classes of storage clients, as crawlee's guide to writing one imports them.
from crawlee.storage_clients._base import DatasetClient, KeyValueStoreClient, RequestQueueClient
from crawlee.storage_clients.models import AddRequestsResponse, ProcessedRequest, RequestQueueMetadata

from ..dedup import AsyncDeduplicator

__all__ = ["DedupRequestQueueClient", "DedupStorageClient", "KEY_PREFIX"]

#: Put before crawlee's ``unique_key`` when a request is claimed by it rather than by its URL.
KEY_PREFIX = "crawlee:"


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

        :raises StoreUnavailable: when the store stayed unreachable (nothing was queued: crawlee
            fails the request handler that added them, and retries it).
        """
        won = await self._claim(requests)
        fresh = [request for request, ok in zip(requests, won) if ok]
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

    async def _claim(self, requests: Sequence[Request]) -> List[bool]:
        """Per request: won here (or owed), in at most two store round trips."""
        won = [request.unique_key in self._owed for request in requests]
        pending = [i for i, ok in enumerate(won) if not ok]
        by_url = [i for i in pending if requests[i].method == "GET" and not requests[i].payload]
        by_key = [i for i in pending if not (requests[i].method == "GET" and not requests[i].payload)]
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
