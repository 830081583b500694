"""The blocking Deduplicator: the plans of :class:`~crawldedup.dedup.core.DedupCore`, driven by
blocking calls to its store (:func:`~crawldedup._plans.drive`)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

import numpy as np

from .._plans import drive
from ..pages import PageCheck
from ..stores.base import ClaimStore, check_lease_seconds
from ..stores.factory import open_store
from .core import (
    Chain,
    ClaimBatch,
    DedupCore,
    Prepared,
    prepare_batch,
)
from .held import HOLD_SECONDS, HeldBatch
from .leases import URL
from .pipeline import StoreAsk


class Deduplicator(DedupCore[ClaimStore]):
    """Exactly one winner per page across workers: canonicalize, fingerprint, local filter, store.

    Arguments left as None take their value from ``config`` (by default
    :class:`~crawldedup.config.DedupConfig`'s defaults; :meth:`from_env` reads the environment).

    The store is opened (and its namespace checked) before the state file: a Deduplicator that
    cannot reach its store creates no state file. :meth:`claim_batch` claims in one step;
    :meth:`hold_batch` in two, for a caller that must use a page before it counts as seen.

    :param strategy: ``exact`` (the local state decides alone: a Bloom filter in front of the
        exact tier on disk, no page lost), ``local`` (the Bloom filter alone decides: a false
        positive loses its page, up to ``error_rate`` of the new pages), or a store: ``set``,
        ``sharded-set``, ``redisbloom``, ``sqlite``, ``postgres`` or ``service``
        (docs/stores.md); with no ``state``, the local state is kept in memory only.
    :param redis_url: Redis of the ``set``, ``sharded-set`` and ``redisbloom`` stores.
    :param namespace: the crawl's key prefix in the store.
    :param crawl_round: a round name appended to the namespace (``<namespace>:<round>``), for
        re-inspection crawls that want a fresh dedup space per round.
    :param state: the local filter's file (None: in memory, forgotten when the process ends;
        ``crawldedup filter`` keeps ``./crawldedup.bloom``); stamped with the policy and namespace.
    :param capacity: URLs the local filter and the store are sized for.
    :param error_rate: false-positive rate of the local filter (and of RedisBloom).
    :param ttl_days: the recrawl window W in days, in every strategy: a page claimed (or done)
        at time t is seen until at least t + W and won again, by exactly one worker, by
        t + W (1 + 1 / generations) at the latest; 0 = claims never expire.
    :param sqlite_path: database file of the ``sqlite`` store.
    :param service_url: the ``crawldedup serve`` of the ``service`` store (docs/service.md).
    :param postgres_url: the database of the ``postgres`` store (``postgresql://user:password@host/db``).
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
    :param max_aliases: the bound of the alias map of redirects that :meth:`claim_final`
        records into (per namespace; docs/stores.md, "Aliases"), in [1, 2**32].
    :param local_tier: with a store, what answers before it: ``exact`` (a local hit is
        confirmed by the exact tier beside the state file: no round trip, no page lost) or
        ``bloom`` (the Bloom filter alone: its false positives lose their pages, up to
        ``error_rate`` of the new ones); default ``exact`` for a new state file, an existing
        one's own (docs/stores.md, "The local tier").
    :param pages_path: ``local`` strategy: the journal of :meth:`check_content`'s pages
        (default ``<state>.pages``; in memory without a state file). Give each round of a
        re-inspection crawl its own state file and one ``pages_path``. In a store, the pages
        belong to the namespace without its round, so rounds compare with each other.
    :raises ValueError: for a value out of range or of the wrong type (naming its setting and
        variable; a wrong type is also a ``TypeError``).
    :raises TypeError: for a ``policy`` that is neither a :class:`~crawldedup.CanonicalPolicy`
        nor a policy's name, or a path that is not a ``str`` or path-like object.
    :raises FilterFileError: for a state file of another policy, namespace, window or tier.
    :raises ExactFileError: for an exact tier that is missing or damaged (naming the file).
    :raises NamespaceConflict: for a store namespace of another policy or store kind.
    :raises StoreUnavailable: when the store cannot be reached.
    """

    def _made(self) -> None:
        try:
            drive(self._seed_plan(), self._ask)
            self._open_state()
        except BaseException:
            self._close_seed()
            if self._owns_store and self.store is not None:
                self.store.close()
            raise

    def _make_store(self, strategy: str, **arguments: Any) -> ClaimStore:
        return open_store(strategy, **arguments)

    def _ask(self, ask: StoreAsk) -> Any:
        """Send one ask of a plan to the store, blocking."""
        return getattr(self.store, ask.method)(*ask.args, **ask.kwargs)

    def claim(self, url: URL, lease: Optional[float] = None) -> bool:
        """Claim one URL; True for exactly one caller across all workers (False when invalid).

        :param lease: see :meth:`claim_batch`.
        :raises TypeError: for a URL that is not ``str`` or ``bytes`` (an invalid one is False).
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
        self,
        urls: Sequence[URL],
        base: Optional[URL] = None,
        lease: Optional[float] = None,
        *,
        bases: Optional[Sequence[Optional[URL]]] = None,
        owner: Optional[str] = None,
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
        :param owner: whose lease it is (default: this worker's ``worker_id``); a server that
            takes leases for several clients names each client here and in :meth:`done`,
            :meth:`release`, :meth:`renew` and :meth:`expired`.
        :raises TypeError: when ``urls`` is a single string.
        :raises InvalidURL: when ``base`` itself is refused.
        :raises ValueError: for a lease out of range, ``bases`` of another length than ``urls``,
            or both ``base`` and ``bases``.
        :raises LeasesUnsupported: for a lease without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable (nothing was recorded).
        """
        return drive(self._claim_plan(urls, base, lease, bases, owner), self._ask)

    def hold_batch(
        self,
        urls: Sequence[URL],
        base: Optional[URL] = None,
        *,
        bases: Optional[Sequence[Optional[URL]]] = None,
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
        self._check_hold(hold_seconds)
        return self.hold_prepared(prepare_batch(urls, base, bases, self.policy), hold_seconds=hold_seconds)

    def hold_prepared(self, batch: Prepared, *, hold_seconds: float = HOLD_SECONDS) -> HeldBatch:
        """:meth:`hold_batch` of a batch that :func:`prepare_batch` canonicalized and
        fingerprinted elsewhere (another thread or process) with this Deduplicator's policy.

        :raises TypeError: for a batch that is not a :class:`~crawldedup.dedup.Prepared`.
        :raises ValueError: for ``hold_seconds`` out of range.
        :raises StoreUnavailable: when the store stayed unreachable (nothing is held).
        """
        if not isinstance(batch, Prepared):
            raise TypeError(f"batch must be a Prepared batch (prepare_batch), got {type(batch).__name__}")
        leased = self._check_hold(hold_seconds)
        batch = self._counted(batch)
        won = np.zeros(len(batch.canonical), dtype=bool)
        claimed = drive(self._pipeline.claim(batch.hashes, batch.valid, hold_seconds if leased else None), self._ask)
        held_until = self._clock() + hold_seconds if leased else None
        won[batch.positions[claimed.won]] = True
        self._counter.add(won=len(claimed.won), lost=len(batch.valid) - len(claimed.won))
        return HeldBatch(
            won.tolist(),
            batch.canonical,
            batch.errors,
            hashes=batch.hashes,
            valid=batch.valid,
            claimed=claimed,
            local_filter=self.local_filter,
            store=self.store,
            leased=leased,
            owner=self.worker_id,
            counter=self._counter,
            held_until=held_until,
        )

    def _check_hold(self, hold_seconds: float) -> bool:
        """Whether held pages are leased (then ``hold_seconds`` is checked)."""
        leased = self.store is not None and self.store.supports_leases
        if leased:
            check_lease_seconds(hold_seconds)
        return leased

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
        return drive(self._keys_plan(keys), self._ask)

    def seen(self, urls: Sequence[URL]) -> List[bool]:
        """Whether each URL's page was claimed, by anyone; claims nothing (read only).

        The local filter answers its hits (a false positive says seen: at most its error rate;
        every URL is read from the store with ``verify_hits``), the store its misses, in one
        round trip. A URL under an open lease is claimed. Invalid URLs give False. Nothing is
        counted in :attr:`stats`.

        :raises TypeError: when ``urls`` is a single string.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return drive(self._seen_plan(urls), self._ask)

    def claim_final(
        self,
        final_urls: Sequence[URL],
        requested: Sequence[Chain],
        lease: Optional[float] = None,
        *,
        owner: Optional[str] = None,
    ) -> List[bool]:
        """After a redirect, per fetch chain: True when its page is the chain's to process (the same
        page as a URL the chain holds, or a new page won now), False when another caller holds the
        page the chain landed on (drop it: counted in ``stats.redirected_known``) or it is invalid.

        A fetch chain owns one claim. ``requested[i]`` is the URL the chain claimed before its
        first fetch, or every URL it holds, first to last (a chain that claimed each hop's page
        on the way, as :meth:`claim_final` does when called before each hop's fetch). A final URL
        whose canonical form is one of theirs is the same page: True, without a claim (a slash
        added or removed by the server, tracking parameters stripped, the host's case). Any other
        final URL is claimed as :meth:`claim_many` claims (two chains that land on one page: one
        wins, whichever link led to it). Each chain URL of another canonical form is recorded as an
        alias of the final page in the namespace's alias map (bounded by ``max_aliases``; forgotten
        with the recrawl window), in the same round trip, so that :meth:`seen_through_redirects`
        answers a later link to it without a fetch.

        Call it before fetching a redirect's target (the ``Location``) to fetch no page twice, or
        after the chain's last fetch, with what it requested.

        :param final_urls: the URLs the chains landed on, or are about to fetch (``str`` or ``bytes``).
        :param requested: per final URL, the URL its chain requested, or the URLs it holds.
        :param lease: as :meth:`claim_batch`'s: the new pages won are leased to this worker.
        :param owner: as :meth:`claim_batch`'s.
        :raises TypeError: when either is a single string, or a chain is not a URL or a sequence of URLs.
        :raises ValueError: for lists of different lengths, or a lease out of range.
        :raises LeasesUnsupported: for a lease without a store that supports leases.
        :raises AliasesUnsupported: for a store that keeps no alias map (every store of crawldedup keeps one).
        :raises StoreUnavailable: when the store stayed unreachable (nothing was recorded).
        """
        return drive(self._final_plan(final_urls, requested, lease, owner), self._ask)

    def seen_through_redirects(self, urls: Sequence[URL]) -> List[bool]:
        """Whether each URL is recorded as redirecting to a page that is claimed (read only).

        True when :meth:`claim_final` recorded the URL as requested for a final page (the alias
        map) and that page is claimed now: a link to it needs no fetch. The URL's own claim is
        not asked (:meth:`seen` asks it). At most two round trips: the aliases, then the claims
        of the final pages the local filter does not hold. Invalid URLs give False.

        :raises TypeError: when ``urls`` is a single string.
        :raises AliasesUnsupported: for a store that keeps no alias map (every store of crawldedup keeps one).
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return drive(self._through_plan(urls), self._ask)

    def seen_keys(self, keys: Sequence[URL]) -> List[bool]:
        """Whether each precomputed key was claimed (:meth:`claim_keys`); claims nothing, as :meth:`seen`.

        :raises TypeError: for a single string, or a key that is not ``str`` or ``bytes``.
        :raises ValueError: for an empty key.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return drive(self._seen_keys_plan(keys), self._ask)

    def done(self, urls: Sequence[URL], *, owner: Optional[str] = None) -> List[bool]:
        """Make URLs this worker leased visited for good (the store's TTL); per URL, True when done.

        ``owner``: as :meth:`claim_batch`'s (default: this worker). A URL is refused (False,
        counted in ``stats.refused``, never raised) when this worker does not hold its lease:
        never leased, released, handed back by :meth:`expired`, or taken over by another worker
        after the deadline. A lease past its deadline that nobody
        took over is still done. URLs done enter the local filter.

        :raises TypeError: when ``urls`` is a single string.
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return drive(self._leases.done(urls, owner), self._ask)

    def release(self, urls: Sequence[URL], *, owner: Optional[str] = None) -> List[bool]:
        """Free URLs this worker leased (a failed fetch to retry): anyone's next claim wins them.

        :returns: per URL, True when released, False when this worker did not hold the lease.
        :raises TypeError: when ``urls`` is a single string.
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return drive(self._leases.release(urls, owner), self._ask)

    def renew(self, urls: Sequence[URL], lease: float, *, owner: Optional[str] = None) -> List[bool]:
        """Move the deadline of this worker's leases to ``lease`` seconds from now (a long fetch).

        :returns: per URL, True when renewed, False when this worker did not hold the lease.
        :raises TypeError: when ``urls`` is a single string.
        :raises ValueError: for a lease out of (0, 86400].
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return drive(self._leases.renew(urls, lease, owner), self._ask)

    def expired(self, limit: int = 1_000, lease: Optional[float] = None, *, owner: Optional[str] = None) -> List[str]:
        """Canonical URLs of leases whose worker never finished, each handed back once (by any caller).

        Without ``lease`` the URLs become free: requeue them, and the next claim of any worker
        wins them. With ``lease`` they are leased to this worker in the same atomic step (no
        claim needed, so no local filter can drop them). Calls until an empty list drain them.

        :param limit: most URLs returned, in [1, 1000000].
        :raises TypeError: for a limit that is not an integer, or a lease that is not a number.
        :raises ValueError: for a limit or lease out of range.
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return drive(self._leases.expired(limit, lease, owner), self._ask)

    def check_content(self, urls: Sequence[URL], fingerprints: Union[np.ndarray, Sequence[int]]) -> List[PageCheck]:
        """Compare each page's content fingerprint with its last one and with other pages'; store it.

        Per URL, a :class:`~crawldedup.pages.PageCheck` whose ``verdict`` is ``new`` (never
        stored), ``unchanged`` (within k bits of the page's last fingerprint), ``duplicate``
        (otherwise within k bits of another page's latest fingerprint: ``duplicate_of`` names
        it, the nearest) or ``changed`` (neither), or ``invalid`` for a URL the canonical policy
        refuses. Spellings of one page are one page. Every valid page's fingerprint becomes its
        latest, in batch order (a page later in the batch sees the ones before it), in one round
        trip: a Redis script, a SQLite transaction, or the local journal's one write
        (``pages_path``). docs/content.md, "Stored pages". A Redis call that raised
        ``StoreUnavailable`` after the script may have run is resumed by the same batch checked
        again: it gets the verdicts the store gave, as a claim does.

        :param urls: the pages' URLs as fetched (``str`` or ``bytes``).
        :param fingerprints: their SimHashes (:func:`crawldedup.content.simhash`), unsigned 64-bit.
        :raises TypeError: for a single string, or fingerprints that are not ints.
        :raises ValueError: for fingerprints out of range or of another length than ``urls``.
        :raises NamespaceConflict: when the namespace's pages were stored with another k or content policy.
        :raises PageFileError: for a local journal of another k or policy, or a damaged one.
        :raises StoreUnavailable: when the store stayed unreachable (nothing was stored).
        """
        return drive(self._content.plan(urls, fingerprints), self._ask)

    def store_bytes_per_page(self) -> Optional[float]:
        """Bytes per page stored by :meth:`check_content`, measured now (I/O; opens the page store).

        :returns: None while no page is stored.
        :raises StoreUnavailable: when the store cannot be reached.
        """
        return drive(self._content.measure(), self._ask)

    def store_bytes_per_url(self) -> Optional[float]:
        """Bytes per claimed URL in the store, measured now (I/O); for ``local``, the filter's bytes per item.

        :returns: None while the store holds nothing.
        :raises StoreUnavailable: when the store cannot be reached.
        """
        if self.store is None:
            return self._filter_bytes_per_item()
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
                self._close_seed()
                self.local_filter.close()
                if self._local_aliases is not None:
                    self._local_aliases.close()

    def __enter__(self) -> Deduplicator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
