"""The asyncio Deduplicator: the same steps as the blocking one, with the store call awaited.

Every operation is one of :class:`~crawldedup.dedup.core.DedupCore`'s plans; this class only
drives them (:func:`crawldedup._plans.adrive`), sending each store call through an
:class:`~crawldedup.stores.aio.AsyncClaimStore`. The CPU stretches of a plan (canonicalizing,
hashing, the local filter) run on the event loop when the batch is small and in one worker
thread (the store's, :class:`crawldedup._plans.Worker`) when it is not, so that a large batch
never stalls the loop: the compiled hashing and filter probes release the GIL, and the compiled
canonicalization holds it for about 0.2 us per URL (docs/async.md gives the loop's measured lag).

Cancellation: a task cancelled while its claim is in flight leaves the local filter as it was
(it learns a batch only from the store's answer) and counts one ``cancelled_batches``. Without
a lease, the store may have applied the claim: its pages may then be won by nobody who knows
it. With a lease, they come back through :meth:`AsyncDeduplicator.expired` once it runs out.
"""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional, Sequence, TypeVar, Union

import numpy as np

from .._plans import Plan, Worker, adrive, inline
from ..canonical import HAS_EXTENSION as COMPILED_CANONICAL
from ..pages import PageCheck
from ..stores.aio import AsyncClaimStore
from ..stores.factory import open_async_store
from .core import Chain, ClaimBatch, DedupCore
from .leases import URL
from .pipeline import StoreAsk

T = TypeVar("T")

#: Largest batch whose CPU stretches run on the event loop; larger ones run in a thread. A URL
#: costs about 0.2 us to canonicalize compiled and 10 us in pure Python (10,000 URLs of
#: bench/test_bench_canonical.py's kind, this machine), so these batches stay near 0.2 ms and
#: 0.6 ms: less than a thread's hand-off costs the loop, never a stall.
INLINE_URLS = 1_000 if COMPILED_CANONICAL else 64


class AsyncDeduplicator(DedupCore[AsyncClaimStore]):
    """:class:`~crawldedup.dedup.Deduplicator` for asyncio: the same constructor, settings,
    environment (:meth:`from_env`), strategies, answers and statistics, with coroutines.

    The constructor does no I/O: the store is reached and the state file opened by
    :meth:`open`, by ``async with``, or by the first call. :meth:`aclose` closes both.
    Safe to share between the tasks of one event loop.

    :param store: an open :class:`~crawldedup.stores.aio.AsyncClaimStore` to use instead of
        building one from ``strategy``; the other arguments as the Deduplicator's.
    :raises ValueError: for a value out of range (naming its setting and variable).
    """

    def _made(self) -> None:
        #: The thread of large batches: the store's, so that one thread competes with the loop.
        self._worker = self.store.worker if self.store is not None else Worker()
        self._opened = False
        self._opening: Optional[asyncio.Lock] = None  # made inside the loop (Python 3.9 binds it)

    def _make_store(self, strategy: str, **arguments: Any) -> AsyncClaimStore:
        return open_async_store(strategy, **arguments)

    async def open(self) -> AsyncDeduplicator:
        """Reach the store (its namespace checked), then open the state file; once.

        :raises FilterFileError: for a state file of another policy or namespace.
        :raises NamespaceConflict: for a store namespace of another policy or store kind.
        :raises StoreUnavailable: when the store cannot be reached (no state file is made).
        """
        if self._opened:
            return self
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._opened:
                return self
            if self.store is not None:
                await self.store.open()
            try:
                await adrive(self._seed_plan(), self._ask, self._worker)  # a seed is written to a file
                await asyncio.get_running_loop().run_in_executor(
                    None, self._open_state
                )  # a new file reserves its blocks
            except BaseException:
                self._close_seed()
                if self._owns_store and self.store is not None:
                    await self.store.aclose()
                raise
            self._opened = True
        return self

    async def _ask(self, ask: StoreAsk) -> Any:
        """Send one ask of a plan to the store, awaited."""
        return await getattr(self.store, ask.method)(*ask.args, **ask.kwargs)

    async def _run(self, plan: Plan[T], size: int, *, claim: bool = False) -> T:
        """Drive ``plan`` (of ``size`` URLs) to its answer; count a cancelled claim."""
        await self.open()
        try:
            return await adrive(plan, self._ask, self._worker if size > INLINE_URLS else inline)
        except asyncio.CancelledError:
            if claim:
                self._counter.add(cancelled_batches=1)
            raise

    async def claim(self, url: URL, lease: Optional[float] = None) -> bool:
        """See :meth:`Deduplicator.claim`."""
        return (await self.claim_batch([url], lease=lease)).won[0]

    async def claim_many(self, urls: Sequence[URL], lease: Optional[float] = None) -> List[bool]:
        """See :meth:`Deduplicator.claim_many`."""
        return (await self.claim_batch(urls, lease=lease)).won

    async def claim_batch(
        self,
        urls: Sequence[URL],
        base: Optional[URL] = None,
        lease: Optional[float] = None,
        *,
        bases: Optional[Sequence[Optional[URL]]] = None,
        owner: Optional[str] = None,
    ) -> ClaimBatch:
        """See :meth:`Deduplicator.claim_batch`; a cancelled call counts in ``stats.cancelled_batches``."""
        return await self._run(self._claim_plan(urls, base, lease, bases, owner), len(urls), claim=True)

    async def claim_keys(self, keys: Sequence[URL]) -> List[bool]:
        """See :meth:`Deduplicator.claim_keys`."""
        return await self._run(self._keys_plan(keys), len(keys), claim=True)

    async def seen(self, urls: Sequence[URL]) -> List[bool]:
        """See :meth:`Deduplicator.seen`."""
        return await self._run(self._seen_plan(urls), len(urls))

    async def claim_final(
        self,
        final_urls: Sequence[URL],
        requested: Sequence[Chain],
        lease: Optional[float] = None,
        *,
        owner: Optional[str] = None,
    ) -> List[bool]:
        """See :meth:`Deduplicator.claim_final`; a cancelled call counts in ``stats.cancelled_batches``."""
        return await self._run(self._final_plan(final_urls, requested, lease, owner), len(final_urls), claim=True)

    async def seen_through_redirects(self, urls: Sequence[URL]) -> List[bool]:
        """See :meth:`Deduplicator.seen_through_redirects`."""
        return await self._run(self._through_plan(urls), len(urls))

    async def seen_keys(self, keys: Sequence[URL]) -> List[bool]:
        """See :meth:`Deduplicator.seen_keys`."""
        return await self._run(self._seen_keys_plan(keys), len(keys))

    async def done(self, urls: Sequence[URL], *, owner: Optional[str] = None) -> List[bool]:
        """See :meth:`Deduplicator.done`."""
        await self.open()
        return await self._run(self._leases.done(urls, owner), len(urls))

    async def release(self, urls: Sequence[URL], *, owner: Optional[str] = None) -> List[bool]:
        """See :meth:`Deduplicator.release`."""
        await self.open()
        return await self._run(self._leases.release(urls, owner), len(urls))

    async def renew(self, urls: Sequence[URL], lease: float, *, owner: Optional[str] = None) -> List[bool]:
        """See :meth:`Deduplicator.renew`."""
        await self.open()
        return await self._run(self._leases.renew(urls, lease, owner), len(urls))

    async def expired(
        self, limit: int = 1_000, lease: Optional[float] = None, *, owner: Optional[str] = None
    ) -> List[str]:
        """See :meth:`Deduplicator.expired`."""
        await self.open()
        return await self._run(self._leases.expired(limit, lease, owner), 0)

    async def check_content(
        self, urls: Sequence[URL], fingerprints: Union[np.ndarray, Sequence[int]]
    ) -> List[PageCheck]:
        """See :meth:`Deduplicator.check_content`. A call cancelled while its exchange is in
        flight leaves the pages as the store left them: a batch applied whole or not at all
        (one script, one transaction, one lock). On Redis its token is kept, so the same batch
        checked again gets the verdicts of the applied call; on SQLite and ``local``, a batch
        that was applied is then compared with itself (its pages come back ``unchanged``)."""
        size = len(urls) if self._content.opened else INLINE_URLS + 1  # the first call reads a local journal
        return await self._run(self._content.plan(urls, fingerprints), size)

    async def store_bytes_per_page(self) -> Optional[float]:
        """See :meth:`Deduplicator.store_bytes_per_page`."""
        return await self._run(self._content.measure(), INLINE_URLS + 1)

    async def store_bytes_per_url(self) -> Optional[float]:
        """See :meth:`Deduplicator.store_bytes_per_url`."""
        await self.open()
        if self.store is None:
            return self._filter_bytes_per_item()
        return await self.store.bytes_per_url()

    async def aclose(self) -> None:
        """Close the page store, the store and the local filter (flushing its file)."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self._content.close)  # a local journal is compacted
        finally:
            try:
                if self.store is not None:
                    await self.store.aclose()
            finally:
                self._close_seed()
                if self._opened:
                    await loop.run_in_executor(None, self.local_filter.close)  # flushes the file
                    if self._local_aliases is not None:
                        self._local_aliases.close()
                self._worker.close()
                self._opened = False

    async def __aenter__(self) -> AsyncDeduplicator:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
