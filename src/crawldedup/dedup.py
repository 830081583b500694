"""The Deduplicator: canonicalize, fingerprint, ask the local filter, send only its misses to a store.

One batch of URLs costs at most one round trip to the store::

    raw URLs -> canonicalize_many -> hash_many (fingerprints) -> local filter
             -> misses (and sampled or verified hits) -> store.claim_and_read -> local filter

The local filter learns a batch's URLs only after the store has answered, so a batch that
fails (``StoreUnavailable``) leaves no trace and can be retried as it is.

Leases (``claim_many(urls, lease=seconds)``, then :meth:`Deduplicator.done`,
:meth:`~Deduplicator.release`, :meth:`~Deduplicator.renew`, :meth:`~Deduplicator.expired`):
the local filter only ever holds *lasting* claims. A URL won with a lease enters it when its
lease is done; a URL lost to another worker's open lease never enters it (that lease may
expire and the URL come back, to this worker or any other). So no local filter hides a
released or expired URL, except through its false-positive rate like any new URL.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
from dataclasses import dataclass, replace
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union, cast

import numpy as np

from .config import DedupConfig
from .bloom import BloomFilter, FilterFileError, hash_many
from .canonical import DEFAULT_POLICY, CanonicalPolicy, InvalidURL, canonicalize_each, canonicalize_many
from ._checks import PathArg, check_batch, check_name, number_in
from .stores.base import ClaimStore, Lease, LeasesUnsupported, RetryPolicy, check_lease_seconds
from .stores.factory import LEASE_STRATEGIES, LOCAL, open_store

__all__ = ["ClaimBatch", "DedupStats", "Deduplicator", "open_state"]

#: First word of the metadata that stamps a local state file.
STATE_STAMP = b"crawldedup-state/1"
#: Default share of local hits checked against the store to measure the local filter's loss.
DEFAULT_SAMPLE_RATE = 0.01

URL = Union[str, bytes]
#: Put before a precomputed key (:meth:`Deduplicator.claim_keys`) before it is hashed. A
#: canonical URL never holds a control character (docs/canonical.md), so no key can ever share
#: a fingerprint with a page through its spelling.
KEY_DOMAIN = "\x00key\x00"


def _stamp(policy_digest: str, namespace: Optional[str]) -> bytes:
    words = [STATE_STAMP, b"policy=" + policy_digest.encode("ascii")]
    if namespace is not None:
        words.append(b"namespace=" + namespace.encode("ascii"))
    return b" ".join(words)


def _check_stamp(bloom: BloomFilter, path: PathArg, policy_digest: str, namespace: Optional[str]) -> None:
    words = bloom.metadata.split(b" ")
    if words[0] != STATE_STAMP:
        raise FilterFileError(f"{path}: not a crawldedup state file (its metadata has no {STATE_STAMP.decode()} stamp)")
    stamp = dict(word.decode("ascii", "replace").partition("=")[::2] for word in words[1:])
    if stamp.get("policy") != policy_digest:
        raise FilterFileError(
            f"{path}: stamped with canonical policy {stamp.get('policy')}, this crawl uses policy {policy_digest}"
        )
    if namespace is not None and stamp.get("namespace", namespace) != namespace:
        raise FilterFileError(
            f"{path}: belongs to namespace {stamp['namespace']!r}, this crawl uses namespace {namespace!r}"
        )


def open_state(
    path: Optional[PathArg],
    capacity: int,
    error_rate: float,
    policy: Optional[CanonicalPolicy] = None,
    *,
    namespace: Optional[str] = None,
) -> BloomFilter:
    """Open the local filter file of a crawl, or create it stamped with the canonical policy.

    An existing file keeps its own capacity and error rate.

    :param path: the state file; None gives an anonymous in-memory filter.
    :param capacity: URLs a new filter is sized for.
    :param error_rate: false-positive rate of a new filter.
    :param policy: the canonical policy in force (default :data:`~crawldedup.DEFAULT_POLICY`).
    :param namespace: when given, also stamped, and an existing file must carry the same one
        (a state file must not follow a crawl into its next round).
    :raises FilterFileError: for a file stamped with another policy or namespace (naming both),
        an unstamped file, or one that is not a valid filter.
    :raises ValueError: for a capacity or error rate out of range.
    """
    digest = (policy or DEFAULT_POLICY).digest
    stamp = _stamp(digest, namespace)
    if path is None:
        return BloomFilter(capacity, error_rate, metadata=stamp)
    try:
        return BloomFilter(capacity, error_rate, path=path, metadata=stamp)
    except FileExistsError:
        pass
    bloom = BloomFilter.open(path, "r+")
    try:
        _check_stamp(bloom, path, digest, namespace)
    except BaseException:
        bloom.close()
        raise
    return bloom


class ClaimBatch(NamedTuple):
    """Per input URL of one batch: whether this caller won it, its canonical form (None when
    invalid), and why the invalid ones were refused (``errors[i]``)."""

    won: List[bool]
    canonical: List[Optional[str]]
    errors: Dict[int, InvalidURL]


@dataclass(frozen=True)
class DedupStats:
    """Counters since the Deduplicator was made (a snapshot).

    :ivar urls: URLs given to claim.
    :ivar invalid: URLs refused by canonicalization (never won).
    :ivar local_hits: valid URLs the local filter called seen.
    :ivar answered_locally: valid URLs answered without the store (the local hits, unless
        ``verify_hits``; every URL with the ``local`` strategy).
    :ivar store_claims: fingerprints sent to the store to claim (duplicates within a batch once).
    :ivar store_reads: local hits sent to the store as reads by the sampled check.
    :ivar round_trips: store round trips made for claims (one per batch that needed the store).
    :ivar won: URLs this caller won.
    :ivar lost: valid URLs this caller did not win.
    :ivar sampled_hits: local hits checked against the store (sample or ``verify_hits``).
    :ivar false_hits: checked local hits the store did not know: new URLs the local filter
        would have dropped.
    :ivar failed_batches: batches that ended in ``StoreUnavailable``.
    :ivar leased: URLs this caller won with a lease (also counted in ``won``).
    :ivar held: valid URLs lost to another worker's open lease (also counted in ``lost``).
    :ivar done: leases made lasting by :meth:`Deduplicator.done`.
    :ivar released: leases freed by :meth:`Deduplicator.release`.
    :ivar renewed: leases extended by :meth:`Deduplicator.renew`.
    :ivar refused: ``done``, ``release`` or ``renew`` refused: this worker did not hold the lease
        (any more), or the URL was invalid.
    :ivar expired: expired leases handed back by :meth:`Deduplicator.expired`.
    """

    urls: int = 0
    invalid: int = 0
    local_hits: int = 0
    answered_locally: int = 0
    store_claims: int = 0
    store_reads: int = 0
    round_trips: int = 0
    won: int = 0
    lost: int = 0
    sampled_hits: int = 0
    false_hits: int = 0
    failed_batches: int = 0
    leased: int = 0
    held: int = 0
    done: int = 0
    released: int = 0
    renewed: int = 0
    refused: int = 0
    expired: int = 0

    @property
    def false_hit_rate(self) -> Optional[float]:
        """Measured share of local hits that were new URLs (the local filter's real loss); None before any check."""
        return self.false_hits / self.sampled_hits if self.sampled_hits else None

    @property
    def local_answer_ratio(self) -> Optional[float]:
        """Share of valid URLs answered without the store; None before any."""
        valid = self.urls - self.invalid
        return self.answered_locally / valid if valid else None


class Deduplicator:
    """Exactly one winner per page across workers: canonicalize, fingerprint, local filter, store.

    Arguments left as None take their value from ``config`` (by default
    :class:`~crawldedup.config.DedupConfig`'s defaults; :meth:`from_env` reads the environment).

    :param strategy: ``local`` (the local filter alone decides), ``set``, ``sharded-set``,
        ``bloom`` or ``sqlite``.
    :param redis_url: Redis of the ``set``, ``sharded-set`` and ``bloom`` stores.
    :param namespace: the crawl's key prefix in the store.
    :param crawl_round: a round name appended to the namespace (``<namespace>:<round>``), for
        re-inspection crawls that want a fresh dedup space per round.
    :param state: the local filter's file (None: in memory); stamped with the policy and namespace.
    :param capacity: URLs the local filter and the store are sized for.
    :param error_rate: false-positive rate of the local filter (and of RedisBloom).
    :param ttl_days: lifetime of a claim in the ``set`` store; 0 = forever.
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
    ) -> None:
        #: Owner of this Deduplicator's leases.
        self.worker_id = check_name("worker_id", worker_id) if worker_id is not None else secrets.token_hex(8)
        # Mixed field types; DedupConfig checks each value it receives.
        overrides: Dict[str, Any] = {
            "strategy": strategy, "redis_url": redis_url, "namespace": namespace, "capacity": capacity,
            "error_rate": error_rate, "ttl_days": ttl_days,
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
        # A hit is sampled when the top 32 bits of its h2 fall under this threshold.
        self._sample_below = np.uint64(round(self.sample_rate * (1 << 32)))
        self._lock = threading.Lock()
        self._stats = DedupStats()
        self.local_filter = open_state(
            self.config.state_path, self.config.capacity, self.config.error_rate, self.policy, namespace=self.namespace
        )
        try:
            if store is None and self.config.strategy != LOCAL:
                store = open_store(
                    self.config.strategy, namespace=self.namespace, policy_digest=self.policy.digest,
                    redis_url=self.config.redis_url, sqlite_path=self.config.sqlite_path,
                    capacity=self.config.capacity, error_rate=self.config.error_rate,
                    ttl_seconds=self.config.ttl_seconds, retry=retry,
                )
        except BaseException:
            self.local_filter.close()
            raise
        if store is not None and store.policy_digest != self.policy.digest:
            self.local_filter.close()
            raise ValueError(
                f"the store was opened for canonical policy {store.policy_digest}, "
                f"this Deduplicator uses policy {self.policy.digest}"
            )
        #: The shared store; None for the ``local`` strategy.
        self.store: Optional[ClaimStore] = store

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
        with self._lock:
            return self._stats

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
            self._lease_store()
            check_lease_seconds(lease)
        if bases is None:
            canonical, errors = self._canonicalize(urls, base)
        else:
            canonical, errors = self._canonicalize_each(urls, base, bases)
        won = [False] * len(canonical)
        positions = [i for i, c in enumerate(canonical) if c is not None]
        if positions:
            valid = cast(List[str], [canonical[i] for i in positions])  # positions skip the None rows
            for row in self._claim_hashes(hash_many(valid), valid, lease):
                won[positions[row]] = True
        with self._lock:
            s = self._stats
            self._stats = replace(s, urls=s.urls + len(canonical), invalid=s.invalid + len(errors))
        return ClaimBatch(won, canonical, errors)

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
        won = [False] * len(domained)
        if domained:
            for row in self._claim_hashes(hash_many(domained), [], None):
                won[row] = True
        with self._lock:
            self._stats = replace(self._stats, urls=self._stats.urls + len(domained))
        return won

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
        return self._settle("done", urls, None)

    def release(self, urls: Sequence[URL]) -> List[bool]:
        """Free URLs this worker leased (a failed fetch to retry): anyone's next claim wins them.

        :returns: per URL, True when released, False when this worker did not hold the lease.
        :raises TypeError: when ``urls`` is a single string.
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        return self._settle("release", urls, None)

    def renew(self, urls: Sequence[URL], lease: float) -> List[bool]:
        """Move the deadline of this worker's leases to ``lease`` seconds from now (a long fetch).

        :returns: per URL, True when renewed, False when this worker did not hold the lease.
        :raises TypeError: when ``urls`` is a single string.
        :raises ValueError: for a lease out of (0, 86400].
        :raises LeasesUnsupported: without a store that supports leases.
        :raises StoreUnavailable: when the store stayed unreachable.
        """
        check_lease_seconds(lease)
        return self._settle("renew", urls, lease)

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
        store = self._lease_store()
        urls = store.expired_leases(limit, self.worker_id if lease is not None else None, lease)
        with self._lock:
            s = self._stats
            self._stats = replace(s, expired=s.expired + len(urls))
        return urls

    def _lease_store(self) -> ClaimStore:
        if self.store is None or not self.store.supports_leases:
            strategy = self.config.strategy if self.store is None else self.store.strategy
            raise LeasesUnsupported(
                f"leases need the {' or '.join(LEASE_STRATEGIES)} store (claims for a limited time), "
                f"this Deduplicator uses {strategy!r}"
            )
        return self.store

    def _canonicalize(self, urls: Sequence[URL], base: Optional[URL]) -> Tuple[List[Optional[str]], Dict[int, InvalidURL]]:
        return canonicalize_many(urls, base=base, policy=self.policy)

    def _canonicalize_each(
        self, urls: Sequence[URL], base: Optional[URL], bases: Sequence[Optional[URL]]
    ) -> Tuple[List[Optional[str]], Dict[int, InvalidURL]]:
        if base is not None:
            raise ValueError("give base or bases, not both")
        return canonicalize_each(urls, bases, policy=self.policy)

    def _settle(self, action: str, urls: Sequence[URL], lease: Optional[float]) -> List[bool]:
        """Done, release or renew: one store round trip; refusals are answers, not errors."""
        store = self._lease_store()
        canonical, _ = self._canonicalize(urls, None)
        positions = [i for i, c in enumerate(canonical) if c is not None]
        answers = [False] * len(canonical)
        if positions:
            hashes = hash_many([canonical[i] for i in positions])
            raw = hashes.astype("<u8", copy=False).tobytes()
            fps = [raw[16 * row:16 * row + 16] for row in range(len(positions))]
            if action == "done":
                settled = store.finish_leases(fps, self.worker_id)
                accepted = [row for row, ok in enumerate(settled) if ok]
                if accepted:  # lasting now: the local filter may answer for them
                    self.local_filter.add_hashes(hashes[accepted])
            elif action == "release":
                settled = store.release_leases(fps, self.worker_id)
            else:
                settled = store.renew_leases(fps, self.worker_id, lease)  # type: ignore[arg-type]
            for row, ok in enumerate(settled):
                answers[positions[row]] = ok
        applied = sum(answers)
        with self._lock:
            s = self._stats
            counter = {"done": "done", "release": "released", "renew": "renewed"}[action]
            self._stats = replace(s, refused=s.refused + len(answers) - applied, **{counter: getattr(s, counter) + applied})
        return answers

    def _claim_hashes(self, hashes: np.ndarray, canonical: List[str], lease: Optional[float]) -> List[int]:
        """Rows of ``hashes`` (one per valid URL, ``canonical[row]`` its canonical form) that this caller won."""
        hit = self.local_filter.contains_hashes(hashes)
        hits = int(hit.sum())
        hashes_le = hashes.astype("<u8", copy=False)
        raw = hashes_le.tobytes()  # fingerprint of row r: raw[16 r : 16 r + 16]
        misses = np.flatnonzero(~hit)
        # The first row of each fingerprint to claim; later rows of the same page lose.
        first_rows: Dict[bytes, int] = {}
        for row in (range(len(hashes)) if self.verify_hits else misses.tolist()):
            first_rows.setdefault(raw[16 * row:16 * row + 16], row)
        claim_rows = list(first_rows.values())
        if self.store is None:
            new: Union[np.ndarray, List[bool]] = self.local_filter.add_hashes(hashes[claim_rows]) if claim_rows else []
            won_rows = [row for row, is_new in zip(claim_rows, new) if is_new]
            self._count(len(hashes), hits, len(hashes), won_rows, claims=0, reads=0, checked=0, false_hits=0)
            return won_rows
        read_rows: List[int] = []
        if not self.verify_hits and self._sample_below:
            read_rows = np.flatnonzero(hit & ((hashes_le[:, 1] >> np.uint64(32)) < self._sample_below)).tolist()
        reads = [raw[16 * row:16 * row + 16] for row in read_rows]
        terms = Lease(self.worker_id, lease, [canonical[row] for row in claim_rows]) if lease is not None else None
        try:
            answers = self.store.claim_and_read(list(first_rows), reads, lease=terms)
        except BaseException:
            with self._lock:
                self._stats = replace(self._stats, failed_batches=self._stats.failed_batches + 1)
            raise
        won_rows = [row for row, won in zip(claim_rows, answers.won) if won]
        held_rows = [claim_rows[i] for i in answers.held]
        # Only now, with the store's answers in, does the local filter learn the claimed URLs:
        # the lasting ones. Leased pages (ours until done, or another worker's) stay out.
        leased = set(won_rows) if lease is not None else set()
        if held_rows or leased:
            open_fps = {raw[16 * row:16 * row + 16] for row in itertools.chain(held_rows, leased)}
            misses = np.array([row for row in misses.tolist() if raw[16 * row:16 * row + 16] not in open_fps], dtype=np.intp)
        if len(misses):
            self.local_filter.add_hashes(hashes[misses])
        if self.verify_hits:
            checked, false_hits, local = hits, sum(1 for row in won_rows if hit[row]), 0
        else:
            checked, false_hits, local = len(reads), answers.present.count(False), hits
        self._count(
            len(hashes), hits, local, won_rows, claims=len(claim_rows), reads=len(reads), checked=checked,
            false_hits=false_hits, leased=len(leased), held=len(held_rows),
        )
        return won_rows

    def _count(
        self, valid: int, hits: int, local: int, won_rows: List[int], *, claims: int, reads: int, checked: int,
        false_hits: int, leased: int = 0, held: int = 0,
    ) -> None:
        with self._lock:
            s = self._stats
            self._stats = replace(
                s,
                local_hits=s.local_hits + hits,
                answered_locally=s.answered_locally + local,
                store_claims=s.store_claims + claims,
                store_reads=s.store_reads + reads,
                round_trips=s.round_trips + (1 if claims or reads else 0),
                won=s.won + len(won_rows),
                lost=s.lost + valid - len(won_rows),
                sampled_hits=s.sampled_hits + checked,
                false_hits=s.false_hits + false_hits,
                leased=s.leased + leased,
                held=s.held + held,
            )

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
