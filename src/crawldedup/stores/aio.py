"""The asyncio shell of a claim store: the same plans as the blocking store, awaited.

A store's logic (validation, the requests of a batch, how replies are read, which errors are
retried, the tokens that resume a call) is written once, in its :class:`ClaimStore` class, as
plans (:mod:`crawldedup._plans`). This class drives those plans through the store's async
channel (``redis.asyncio`` clients; SQLite in a worker thread) and sleeps between attempts
with :func:`asyncio.sleep`, so that nothing here blocks the event loop.

A call cancelled while its request is in flight may have been applied by the store: its
token is kept (as after :class:`StoreUnavailable`), so the same request made again resumes it
and gets the answers the store gave (on the stores with receipts: ``set``, ``sharded-set``,
``redisbloom``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List, Optional, TypeVar, Union

from .._plans import Worker, adrive, inline
from .aliases import Aliases
from .base import ClaimAnswers, ClaimStore, FingerprintsLike, Lease, StoreCall

T = TypeVar("T")

#: Largest call whose requests are built and read on the event loop: a Redis batch costs about
#: 0.7 us per fingerprint to build (10,000 claims: 6.8 ms here), so these stay under 1 ms.
INLINE_FINGERPRINTS = 1_000


class AsyncClaimStore:
    """A claim store for asyncio code: :class:`ClaimStore`'s methods as coroutines.

    Opened on first use (or by :meth:`open` / ``async with``); :meth:`aclose` releases it.

    :param store: a store made with ``asynchronous=True`` (its logic; nothing opened yet), as
        :func:`crawldedup.stores.factory.open_async_store` makes them.
    :param worker: the thread that builds and reads large calls (default: one of its own).
    :raises ValueError: for a store made for blocking calls.
    """

    def __init__(self, store: ClaimStore, worker: Optional[Worker] = None) -> None:
        if not store.asynchronous:
            raise ValueError(f"{store.description} was opened for blocking calls: make it with asynchronous=True")
        #: The store's logic, shared with the blocking API (its attributes describe the store).
        self.store = store
        #: Where large calls are built and read, off the event loop.
        self.worker = worker if worker is not None else Worker()
        self._opened = False
        self._opening: Optional[asyncio.Lock] = None  # made inside the loop (Python 3.9 binds it)

    @property
    def description(self) -> str:
        """Where the store lives, safe to print (no password)."""
        return self.store.description

    @property
    def strategy(self) -> str:
        """The strategy name of the store (``set``, ``sqlite``...)."""
        return self.store.strategy

    @property
    def policy_digest(self) -> str:
        """Digest of the canonical policy the store's fingerprints follow."""
        return self.store.policy_digest

    @property
    def supports_leases(self) -> bool:
        """Whether the store can hold claims for a limited time."""
        return self.store.supports_leases

    @property
    def supports_aliases(self) -> bool:
        """Whether the store keeps the alias map of redirects."""
        return self.store.supports_aliases

    @property
    def supports_unclaim(self) -> bool:
        """Whether the store can take back a lasting claim."""
        return self.store.supports_unclaim

    async def open(self) -> AsyncClaimStore:
        """Connect and open the namespace (once; concurrent callers wait for the first).

        :raises NamespaceConflict: when the namespace was made by another store or policy.
        :raises StoreUnavailable: when the store cannot be reached.
        """
        if self._opened:
            return self
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if not self._opened:
                await self.with_retries(self.store._aconnect)
                try:
                    await self.with_retries(lambda: adrive(self.store._open(), self.store._asend))
                except BaseException:
                    await self.store.aclose()
                    raise
                self._opened = True
        return self

    async def with_retries(self, call: Callable[[], Awaitable[T]]) -> T:
        """:meth:`ClaimStore.with_retries`, awaiting each attempt and the waits between them."""
        attempt = 0
        while True:
            attempt += 1
            try:
                result = await call()
            except self.store.store_errors as exc:
                await asyncio.sleep(self.store._failed_attempt(exc, attempt))
                continue
            self.store._answered()
            return result

    async def _perform(self, call: Union[StoreCall[T], T], token: Optional[bytes] = None) -> T:
        return await self.perform(call, token) if isinstance(call, StoreCall) else call

    async def perform(self, call: StoreCall[T], token: Optional[bytes] = None) -> T:
        """See :meth:`ClaimStore.perform`: another layer's call over this store's channel, awaited.

        :param token: as :meth:`claim_and_read`'s.
        """
        await self.open()
        plan = call.plan
        resume = self.worker if call.size > INLINE_FINGERPRINTS else inline
        with self.store._call_token(call.resume_key, token) as used:
            return await self.with_retries(lambda: adrive(plan(used), self.store._asend, resume))

    async def claim_and_read(
        self,
        claims: FingerprintsLike,
        reads: FingerprintsLike = (),
        *,
        lease: Optional[Lease] = None,
        token: Optional[bytes] = None,
        aliases: Optional[Aliases] = None,
    ) -> ClaimAnswers:
        """See :meth:`ClaimStore.claim_and_read`.

        :param token: the call's token, from a caller that keeps it across its own retries (the
            fingerprint service passes its client's): the same call made again with it is
            answered as it was applied. None: the store's own.
        """
        return await self._perform(self.store._claim_call(claims, reads, lease, aliases), token)

    async def read_aliases(self, fingerprints: FingerprintsLike) -> List[Optional[bytes]]:
        """See :meth:`ClaimStore.read_aliases`."""
        return await self._perform(self.store._aliases_call(fingerprints))

    async def claim_many(self, fingerprints: FingerprintsLike) -> List[bool]:
        """See :meth:`ClaimStore.claim_many`."""
        return (await self.claim_and_read(fingerprints, ())).won

    async def contains_many(self, fingerprints: FingerprintsLike) -> List[bool]:
        """See :meth:`ClaimStore.contains_many`."""
        return (await self.claim_and_read((), fingerprints)).present

    async def finish_leases(
        self, fingerprints: FingerprintsLike, owner: str, *, token: Optional[bytes] = None
    ) -> List[bool]:
        """See :meth:`ClaimStore.finish_leases`; ``token`` as :meth:`claim_and_read`'s."""
        return await self._perform(self.store._settle_call("done", fingerprints, owner, None), token)

    async def release_leases(
        self, fingerprints: FingerprintsLike, owner: str, *, token: Optional[bytes] = None
    ) -> List[bool]:
        """See :meth:`ClaimStore.release_leases`; ``token`` as :meth:`claim_and_read`'s."""
        return await self._perform(self.store._settle_call("release", fingerprints, owner, None), token)

    async def renew_leases(
        self, fingerprints: FingerprintsLike, owner: str, seconds: float, *, token: Optional[bytes] = None
    ) -> List[bool]:
        """See :meth:`ClaimStore.renew_leases`; ``token`` as :meth:`claim_and_read`'s."""
        return await self._perform(self.store._settle_call("renew", fingerprints, owner, seconds), token)

    async def expired_leases(
        self, limit: int, owner: Optional[str] = None, seconds: Optional[float] = None
    ) -> List[str]:
        """See :meth:`ClaimStore.expired_leases`."""
        return await self._perform(self.store._expired_call(limit, owner, seconds))

    async def unclaim_many(self, fingerprints: FingerprintsLike) -> None:
        """See :meth:`ClaimStore.unclaim_many`."""
        await self._perform(self.store._unclaim_call(fingerprints))

    async def bytes_per_url(self) -> Optional[float]:
        """See :meth:`ClaimStore.bytes_per_url`."""
        return await self._perform(self.store._measure())

    async def aclose(self) -> None:
        """Release the store's connections (and its worker thread)."""
        try:
            await self.store.aclose()
        finally:
            self.worker.close()
            self._opened = False

    async def __aenter__(self) -> AsyncClaimStore:
        return await self.open()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AsyncClaimStore {self.description}>"
