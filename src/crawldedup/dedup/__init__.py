"""The Deduplicator: canonicalize, fingerprint, ask the local filter, send only its misses to a store.

One batch of URLs costs at most one round trip to the store::

    raw URLs -> canonicalize_many -> hash_many (fingerprints) -> local filter
             -> misses (and sampled or verified hits) -> store.claim_and_read -> local filter

The local filter learns a batch's URLs only after the store has answered, so a batch that
fails (``StoreUnavailable``) leaves no trace and can be retried as it is.

Two-phase claims (:meth:`Deduplicator.hold_batch`, then :meth:`HeldBatch.commit` or
:meth:`HeldBatch.abandon`): for a caller that must use a page before it counts as seen, as the
CLI writes its line. The local filter learns a held batch only on commit; the store holds it
with a short lease, or takes it back on abandon, or (RedisBloom) hands its URLs back as
*stranded* (see :mod:`crawldedup.dedup.held`).

Leases (``claim_many(urls, lease=seconds)``, then :meth:`Deduplicator.done`,
:meth:`~Deduplicator.release`, :meth:`~Deduplicator.renew`, :meth:`~Deduplicator.expired`):
the local filter only ever holds *lasting* claims. A URL won with a lease enters it when its
lease is done; a URL lost to another worker's open lease never enters it (that lease may
expire and the URL come back, to this worker or any other). So no local filter hides a
released or expired URL, except through its false-positive rate like any new URL.

The folder, one job per module: ``state.py`` (the stamped state file), ``pipeline.py`` (the
claim of one batch, step by step), ``leases.py`` (done, release, renew, expired), ``stats.py``
(the counters), ``held.py`` (two-phase claims), and here the Deduplicator that puts them together.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import replace
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union, cast

import numpy as np

from ..config import DedupConfig
from ..bloom import hash_many
from ..canonical import DEFAULT_POLICY, CanonicalPolicy, InvalidURL, canonicalize_each, canonicalize_many
from .._checks import PathArg, check_batch, check_name, check_path, integer_in, number_in
from ..content import DEFAULT_CONTENT_POLICY, ContentPolicy
from ..content.index_format import MAX_DISTANCE
from ..pages import PAGES_SUFFIX, PageCheck, open_pages
from ..stores.base import ClaimStore, RetryPolicy, check_lease_seconds
from ..stores.factory import LOCAL, open_store
from .content import ContentChecks
from .held import HOLD_SECONDS, HeldBatch, HoldState
from .leases import URL, Leases, lease_store
from .pipeline import ClaimPipeline
from .state import open_state
from .stats import DedupStats, StatsCounter, StatsListener
from ..windows import Clock, system_clock

__all__ = ["ClaimBatch", "DedupStats", "Deduplicator", "HeldBatch", "HoldState", "StatsListener", "open_state"]

#: Default share of local hits checked against the store to measure the local filter's loss.
DEFAULT_SAMPLE_RATE = 0.01
#: Put before a precomputed key (:meth:`Deduplicator.claim_keys`) before it is hashed. A
#: canonical URL never holds a control character (docs/canonical.md), so no key can ever share
#: a fingerprint with a page through its spelling.
KEY_DOMAIN = "\x00key\x00"


class _Batch(NamedTuple):
    """A batch canonicalized and fingerprinted: ``hashes[row]`` is the fingerprint of
    ``valid[row]``, the canonical form of input URL ``positions[row]``."""

    canonical: List[Optional[str]]
    errors: Dict[int, InvalidURL]
    positions: np.ndarray
    valid: List[str]
    hashes: np.ndarray


class ClaimBatch(NamedTuple):
    """Per input URL of one batch: whether this caller won it, its canonical form (None when
    invalid), and why the invalid ones were refused (``errors[i]``)."""

    won: List[bool]
    canonical: List[Optional[str]]
    errors: Dict[int, InvalidURL]


class Deduplicator:
    """Exactly one winner per page across workers: canonicalize, fingerprint, local filter, store.

    Arguments left as None take their value from ``config`` (by default
    :class:`~crawldedup.config.DedupConfig`'s defaults; :meth:`from_env` reads the environment).

    The store is opened (and its namespace checked) before the state file: a Deduplicator that
    cannot reach its store creates no state file. :meth:`claim_batch` claims in one step;
    :meth:`hold_batch` in two, for a caller that must use a page before it counts as seen.

    :param strategy: ``local`` (the local filter alone decides), ``set``, ``sharded-set``,
        ``bloom`` or ``sqlite``.
    :param redis_url: Redis of the ``set``, ``sharded-set`` and ``bloom`` stores.
    :param namespace: the crawl's key prefix in the store.
    :param crawl_round: a round name appended to the namespace (``<namespace>:<round>``), for
        re-inspection crawls that want a fresh dedup space per round.
    :param state: the local filter's file (None: in memory); stamped with the policy and namespace.
    :param capacity: URLs the local filter and the store are sized for.
    :param error_rate: false-positive rate of the local filter (and of RedisBloom).
    :param ttl_days: the recrawl window W in days, in every strategy: a page claimed (or done)
        at time t is seen until at least t + W and won again, by exactly one worker, by
        t + W (1 + 1 / generations) at the latest; 0 = claims never expire.
    :param sqlite_path: database file of the ``sqlite`` store.
    :param policy: the canonical policy (default :data:`~crawldedup.DEFAULT_POLICY`); recorded
        with the namespace and the state file, which refuse another one.
    :param verify_hits: also claim local hits in the store (same round trip), so that a local
        false positive never loses a page.
    :param sample_rate: share of local hits (chosen by fingerprint bits, so the same URLs every
        time) read from the store to measure the local filter's real loss; 0 turns it off.
    :param retry: retries of transient store errors.
    :param store: an open store to use instead of building one from ``strategy``.
    :param config: settings for the arguments left as None.
    :param worker_id: the owner recorded with this Deduplicator's leases (default: 16 random
        hex characters, so two Deduplicators never share leases); 1 to 200 characters from
        ``[A-Za-z0-9_.:/@+=-]``.
    :param generations: the generations G of the window (default 4).
    :param clock: the time source of everything that ages (seconds since the epoch); tests
        pass a :class:`~crawldedup.windows.ManualClock`.
    :param content_distance: k of :meth:`check_content`, in [1, 7]: a page within k bits of
        a fingerprint is near it (recorded with the stored pages, which refuse another k).
    :param content_policy: the content policy the checked SimHashes were made with (default
        :data:`~crawldedup.content.DEFAULT_CONTENT_POLICY`), recorded like k.
    :param pages_path: ``local`` strategy: the journal of :meth:`check_content`'s pages
        (default ``<state>.pages``; in memory without a state file). Give each round of a
        re-inspection crawl its own state file and one ``pages_path``. In a store, the pages
        belong to the namespace without its round, so rounds compare with each other.
    :raises ValueError: for a value out of range (naming its setting and variable).
    :raises FilterFileError: for a state file of another policy or namespace.
    :raises NamespaceConflict: for a store namespace of another policy or store kind.
    :raises StoreUnavailable: when the store cannot be reached.
    """

    def __init__(
        self,
        strategy: Optional[str] = None,
        *,
        redis_url: Optional[str] = None,
        namespace: Optional[str] = None,
        crawl_round: Optional[str] = None,
        state: Optional[PathArg] = None,
        capacity: Optional[int] = None,
        error_rate: Optional[float] = None,
        ttl_days: Optional[float] = None,
        sqlite_path: Optional[PathArg] = None,
        policy: Optional[CanonicalPolicy] = None,
        verify_hits: bool = False,
        sample_rate: float = DEFAULT_SAMPLE_RATE,
        retry: Optional[RetryPolicy] = None,
        store: Optional[ClaimStore] = None,
        config: Optional[DedupConfig] = None,
        worker_id: Optional[str] = None,
        generations: Optional[int] = None,
        clock: Clock = system_clock,
        content_distance: int = 3,
        content_policy: Optional[ContentPolicy] = None,
        pages_path: Optional[PathArg] = None,
    ) -> None:
        #: Owner of this Deduplicator's leases.
        self.worker_id = check_name("worker_id", worker_id) if worker_id is not None else secrets.token_hex(8)
        # Mixed field types; DedupConfig checks each value it receives.
        overrides: Dict[str, Any] = {
            "strategy": strategy, "redis_url": redis_url, "namespace": namespace, "capacity": capacity,
            "error_rate": error_rate, "ttl_days": ttl_days, "generations": generations,
            "state_path": os.fspath(state) if state is not None else None,
            "sqlite_path": os.fspath(sqlite_path) if sqlite_path is not None else None,
        }
        self.config = replace(config or DedupConfig(), **{k: v for k, v in overrides.items() if v is not None})
        number_in("sample_rate", sample_rate, 0, 1)
        self.policy = policy or DEFAULT_POLICY
        self.namespace = self.config.namespace
        if crawl_round is not None:
            self.namespace = f"{self.namespace}:{check_name('crawl_round', crawl_round)}"
        if verify_hits and self.config.strategy == LOCAL and store is None:
            raise ValueError("verify_hits needs a store: the local strategy has none")
        self.verify_hits = bool(verify_hits)
        self.sample_rate = float(sample_rate)
        self._counter = StatsCounter()
        if store is not None and store.policy_digest != self.policy.digest:
            raise ValueError(
                f"the store was opened for canonical policy {store.policy_digest}, "
                f"this Deduplicator uses policy {self.policy.digest}"
            )
        # The store first: a state file is created only once the store was reached and its
        # namespace checked, so an unreachable store leaves no file behind.
        opened = store is None and self.config.strategy != LOCAL
        if opened:
            store = open_store(
                self.config.strategy, namespace=self.namespace, policy_digest=self.policy.digest,
                redis_url=self.config.redis_url, sqlite_path=self.config.sqlite_path,
                capacity=self.config.capacity, error_rate=self.config.error_rate,
                ttl_seconds=self.config.ttl_seconds, retry=retry, window=self.config.window, clock=clock,
            )
        try:
            self.local_filter = open_state(
                self.config.state_path, self.config.capacity, self.config.error_rate, self.policy,
                namespace=self.namespace, window=self.config.window, clock=clock,
            )
        except BaseException:
            if opened and store is not None:
                store.close()
            raise
        #: The shared store; None for the ``local`` strategy.
        self.store: Optional[ClaimStore] = store
        self._pipeline = ClaimPipeline(self.local_filter, store, verify_hits=self.verify_hits,
                                       sample_rate=self.sample_rate, owner=self.worker_id, counter=self._counter)
        integer_in("content_distance", content_distance, 1, MAX_DISTANCE)
        if content_policy is not None and not isinstance(content_policy, ContentPolicy):
            raise TypeError(f"content_policy must be a ContentPolicy, got {type(content_policy).__name__}")
        content_digest = (content_policy or DEFAULT_CONTENT_POLICY).digest
        check_path("pages_path", pages_path)
        if pages_path is None and self.config.state_path is not None:
            pages_path = f"{self.config.state_path}{PAGES_SUFFIX}"
        self._content = ContentChecks(
            lambda: open_pages(self.store, pages_path, namespace=self.config.namespace, max_distance=content_distance,
                               content_digest=content_digest, canonical_digest=self.policy.digest,
                               capacity=self.config.capacity),
            content_distance, lambda urls: self._canonicalize(urls, None),
        )
        self._leases = Leases(store, self.config.strategy, self.local_filter, self.worker_id, self.policy, self._counter)

    @classmethod
    def from_env(cls, environ: Optional[Any] = None, **overrides: Any) -> "Deduplicator":
        """A Deduplicator configured by the environment (read once, here); ``overrides`` win.

        Variables: ``DEDUP_STRATEGY``, ``REDIS_URL``, ``VISITED_TTL_DAYS``, ``BLOOM_CAPACITY``,
        ``BLOOM_ERROR_RATE``, ``CRAWLDEDUP_STATE``, ``CRAWLDEDUP_NAMESPACE``, ``CRAWLDEDUP_SQLITE``.

        :raises ValueError: for a variable that cannot be parsed or is out of range, naming it.
        """
        return cls(config=DedupConfig.from_env(environ), **overrides)

    @property
    def stats(self) -> DedupStats:
        """A snapshot of the counters (no I/O)."""
        return self._counter.snapshot()

    def watch_stats(self, listener: StatsListener) -> None:
        """Follow the counters live: ``listener`` gets the totals now, then every change and the
        time of every claim round trip (as :mod:`crawldedup.metrics` does)."""
        self._counter.watch(listener)

    def claim(self, url: URL, lease: Optional[float] = None) -> bool:
        """Claim one URL; True for exactly one caller across all workers (False when invalid).

        :param lease: see :meth:`claim_batch`.
        :raises StoreUnavailable: when the store stayed unreachable (nothing was recorded).
        """
        return self.claim_batch([url], lease=lease).won[0]

    def claim_many(self, urls: Sequence[URL], lease: Optional[float] = None) -> List[bool]:
        """Claim a batch; per URL, True when this caller won it. Invalid URLs give False.

        :param lease: see :meth:`claim_batch`.
        :raises TypeError: when ``urls`` is a single string.
        :raises StoreUnavailable: when the store stayed unreachable (nothing was recorded).
        """
        return self.claim_batch(urls, lease=lease).won

    def claim_batch(
        self, urls: Sequence[URL], base: Optional[URL] = None, lease: Optional[float] = None, *,
        bases: Optional[Sequence[Optional[URL]]] = None,
    ) -> ClaimBatch:
        """Claim a batch and say, per URL, whether it was won, its canonical form and why it was refused.

        At most one store round trip. Within the batch, the first spelling of a page can win;
        later ones lose.

        :param urls: URLs as found (``str`` or ``bytes``); relative ones need ``base``.
        :param base: the page the relative URLs were found on.
        :param bases: instead of ``base``, one base per URL (None for an absolute URL), such as
            the pages of a ``BASE<TAB>LINK`` frontier; a refused base is reported for its URLs
            (``errors``), not raised.
        :param lease: claim for this many seconds only (in (0, 86400]): the URLs won stay this
            worker's until :meth:`done` makes them visited, :meth:`release` frees them, or the
            lease runs out and :meth:`expired` hands them back. Needs the ``set`` or
            ``sharded-set`` store.
        :raises TypeError: when ``urls`` is a single string.
        :raises InvalidURL: when ``base`` itself is refused.
        :raises ValueError: for a lease out of range, ``bases`` of another length than ``urls``,
            or both ``base`` and ``bases``.
        :raises LeasesUnsupported: for a lease without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable (nothing was recorded).
        """
        if lease is not None:
            lease_store(self.store, self.config.strategy)
            check_lease_seconds(lease)
        batch = self._prepare(urls, base, bases)
        won = np.zeros(len(batch.canonical), dtype=bool)
        if len(batch.positions):
            won[batch.positions[self._claim_and_learn(batch.hashes, batch.valid, lease)]] = True
        return ClaimBatch(won.tolist(), batch.canonical, batch.errors)

    def hold_batch(
        self, urls: Sequence[URL], base: Optional[URL] = None, *, bases: Optional[Sequence[Optional[URL]]] = None,
        hold_seconds: float = HOLD_SECONDS,
    ) -> HeldBatch:
        """Claim a batch in two steps: hold it now, then :meth:`HeldBatch.commit` once its won
        pages are used (written), or :meth:`HeldBatch.abandon` if they cannot be.

        No page of a held batch is seen before its commit: the local filter learns nothing, and
        the store holds the won pages as follows. ``set``, ``sharded-set``: leased for
        ``hold_seconds`` (commit is ``done``, abandon releases; a hold that is neither runs
        out and the pages come back). ``sqlite``: claimed, and abandon deletes the claims.
        ``redisbloom``: claimed for good, and abandon returns their canonical URLs (*stranded*)
        for the caller to keep. ``local``: nothing is recorded until the commit; two holders of
        one local filter can then both win a page (counted in ``stats.won_twice`` at commit).

        Arguments as :meth:`claim_batch`; invalid URLs are never won.

        :param hold_seconds: lease of the held pages in a store with leases, in (0, 86400].
        :raises TypeError: when ``urls`` is a single string.
        :raises InvalidURL: when ``base`` itself is refused.
        :raises ValueError: for ``hold_seconds`` out of range, ``bases`` of another length than
            ``urls``, or both ``base`` and ``bases``.
        :raises StoreUnavailable: when the store stayed unreachable (nothing is held).
        """
        leased = self.store is not None and self.store.supports_leases
        if leased:
            check_lease_seconds(hold_seconds)
        batch = self._prepare(urls, base, bases)
        won = np.zeros(len(batch.canonical), dtype=bool)
        claimed = self._pipeline.claim(batch.hashes, batch.valid, hold_seconds if leased else None)
        won[batch.positions[claimed.won]] = True
        self._counter.add(won=len(claimed.won), lost=len(batch.valid) - len(claimed.won))
        return HeldBatch(
            won.tolist(), batch.canonical, batch.errors, hashes=batch.hashes, valid=batch.valid, claimed=claimed,
            local_filter=self.local_filter, store=self.store, leased=leased, owner=self.worker_id,
            counter=self._counter,
        )

    def _prepare(self, urls: Sequence[URL], base: Optional[URL], bases: Optional[Sequence[Optional[URL]]]) -> _Batch:
        """Canonicalize and fingerprint a batch; count its URLs."""
        if bases is None:
            canonical, errors = self._canonicalize(urls, base)
        else:
            canonical, errors = self._canonicalize_each(urls, base, bases)
        positions = [i for i, c in enumerate(canonical) if c is not None]
        valid = cast(List[str], [canonical[i] for i in positions])  # positions skip the None rows
        self._counter.add(urls=len(canonical), invalid=len(errors))
        return _Batch(canonical, errors, np.asarray(positions, dtype=np.intp), valid, hash_many(valid))

    def claim_keys(self, keys: Sequence[URL]) -> List[bool]:
        """Claim precomputed keys (a request fingerprint, a digest of a POST body...) as they are.

        No canonicalization: equal keys (``str``, or its UTF-8 ``bytes``) are one claim, in
        their own space (:data:`KEY_DOMAIN`), so a key never meets a page's URL. The local
        filter, the store and the statistics are the same as for URLs.

        :returns: per key, True when this caller won it.
        :raises TypeError: for a single string, or a key that is not ``str`` or ``bytes``.
        :raises ValueError: for an empty key.
        :raises StoreUnavailable: when the store stayed unreachable (nothing was recorded).
        """
        check_batch("keys", keys, "keys")
        domained: List[URL] = []
        for key in keys:
            if isinstance(key, str):
                domained.append(KEY_DOMAIN + key)
            elif isinstance(key, bytes):
                domained.append(KEY_DOMAIN.encode("ascii") + key)
            else:
                raise TypeError(f"keys must be str or bytes, got {type(key).__name__}")
            if len(domained[-1]) == len(KEY_DOMAIN):
                raise ValueError("keys must not be empty, got an empty key")
        won = np.zeros(len(domained), dtype=bool)
        if domained:
            won[self._claim_and_learn(hash_many(domained), [], None)] = True
        self._counter.add(urls=len(domained))
        return won.tolist()

    def done(self, urls: Sequence[URL]) -> List[bool]:
        """Make URLs this worker leased visited for good (the store's TTL); per URL, True when done.

        A URL is refused (False, counted in ``stats.refused``, never raised) when this worker
        does not hold its lease: never leased, released, handed back by :meth:`expired`, or
        taken over by another worker after the deadline. A lease past its deadline that nobody
        took over is still done. URLs done enter the local filter.

        :raises TypeError: when ``urls`` is a single string.
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return self._leases.done(urls)

    def release(self, urls: Sequence[URL]) -> List[bool]:
        """Free URLs this worker leased (a failed fetch to retry): anyone's next claim wins them.

        :returns: per URL, True when released, False when this worker did not hold the lease.
        :raises TypeError: when ``urls`` is a single string.
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return self._leases.release(urls)

    def renew(self, urls: Sequence[URL], lease: float) -> List[bool]:
        """Move the deadline of this worker's leases to ``lease`` seconds from now (a long fetch).

        :returns: per URL, True when renewed, False when this worker did not hold the lease.
        :raises TypeError: when ``urls`` is a single string.
        :raises ValueError: for a lease out of (0, 86400].
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return self._leases.renew(urls, lease)

    def expired(self, limit: int = 1_000, lease: Optional[float] = None) -> List[str]:
        """Canonical URLs of leases whose worker never finished, each handed back once (by any caller).

        Without ``lease`` the URLs become free: requeue them, and the next claim of any worker
        wins them. With ``lease`` they are leased to this worker in the same atomic step (no
        claim needed, so no local filter can drop them). Calls until an empty list drain them.

        :param limit: most URLs returned, in [1, 1000000].
        :raises ValueError: for a limit or lease out of range.
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return self._leases.expired(limit, lease)

    def _canonicalize(self, urls: Sequence[URL], base: Optional[URL]) -> Tuple[List[Optional[str]], Dict[int, InvalidURL]]:
        return canonicalize_many(urls, base=base, policy=self.policy)

    def _canonicalize_each(
        self, urls: Sequence[URL], base: Optional[URL], bases: Sequence[Optional[URL]]
    ) -> Tuple[List[Optional[str]], Dict[int, InvalidURL]]:
        if base is not None:
            raise ValueError("give base or bases, not both")
        return canonicalize_each(urls, bases, policy=self.policy)

    def _claim_and_learn(self, hashes: np.ndarray, canonical: List[str], lease: Optional[float]) -> np.ndarray:
        """Claim one batch in one step; the local filter learns its lasting claims at once.

        :returns: the rows won.
        """
        claimed = self._pipeline.claim(hashes, canonical, lease)
        won = claimed.won
        if self.store is None:
            # The filter's own test-and-set decides: of two threads claiming a page, one adds it first.
            won = won[self.local_filter.add_hashes(hashes[won])] if len(won) else won
        elif len(claimed.learn):
            self.local_filter.add_hashes(hashes[claimed.learn])
        self._counter.add(won=len(won), lost=len(hashes) - len(won))
        return won

    def check_content(self, urls: Sequence[URL], fingerprints: Union[np.ndarray, Sequence[int]]) -> List[PageCheck]:
        """Compare each page's content fingerprint with its last one and with other pages'; store it.

        Per URL, a :class:`~crawldedup.pages.PageCheck` whose ``verdict`` is ``new`` (never
        stored), ``unchanged`` (within k bits of the page's last fingerprint), ``duplicate``
        (otherwise within k bits of another page's latest fingerprint: ``duplicate_of`` names
        it, the nearest) or ``changed`` (neither), or ``invalid`` for a URL the canonical policy
        refuses. Spellings of one page are one page. Every valid page's fingerprint becomes its
        latest, in batch order (a page later in the batch sees the ones before it), in one round
        trip: a Redis script, a SQLite transaction, or the local journal's one write
        (``pages_path``). docs/content.md, "Stored pages".

        :param urls: the pages' URLs as fetched (``str`` or ``bytes``).
        :param fingerprints: their SimHashes (:func:`crawldedup.content.simhash`), unsigned 64-bit.
        :raises TypeError: for a single string, or fingerprints that are not ints.
        :raises ValueError: for fingerprints out of range or of another length than ``urls``.
        :raises NamespaceConflict: when the namespace's pages were stored with another k or content policy.
        :raises PageFileError: for a local journal of another k or policy, or a damaged one.
        :raises StoreUnavailable: when the store stayed unreachable (nothing was stored).
        """
        return self._content.check(urls, fingerprints)

    def store_bytes_per_page(self) -> Optional[float]:
        """Bytes per page stored by :meth:`check_content`, measured now (I/O; opens the page store).

        :returns: None while no page is stored.
        :raises StoreUnavailable: when the store cannot be reached.
        """
        return self._content.pages.bytes_per_page()

    def store_bytes_per_url(self) -> Optional[float]:
        """Bytes per claimed URL in the store, measured now (I/O); for ``local``, the filter's bytes per item.

        :returns: None when the store cannot know (the ``set`` store) or holds nothing yet.
        :raises StoreUnavailable: when the store cannot be reached.
        """
        if self.store is None:
            items = self.local_filter.approx_items
            return self.local_filter.num_bits / 8 / items if items else None
        return self.store.bytes_per_url()

    def close(self) -> None:
        """Close the store and the local filter (flushing its file)."""
        try:
            self._content.close()
        finally:
            try:
                if self.store is not None:
                    self.store.close()
            finally:
                self.local_filter.close()

    def __enter__(self) -> "Deduplicator":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.store.description if self.store is not None else "local filter only"
        return f"<Deduplicator strategy={self.config.strategy!r} namespace={self.namespace!r} {where}>"
