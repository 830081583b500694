"""What the blocking and the asyncio Deduplicator share: settings, and every step as a plan.

:class:`DedupCore` checks the settings, makes the store (through a hook: blocking or async) and
writes each operation once as a plan (:mod:`crawldedup._plans`): canonicalize -> fingerprint ->
local filter -> one :class:`~crawldedup.dedup.pipeline.StoreAsk` -> let the local filter learn.
:class:`~crawldedup.dedup.Deduplicator` sends each ask with a blocking call,
:class:`~crawldedup.dedup.aio.AsyncDeduplicator` awaits it; neither holds dedup logic of its own.
"""

from __future__ import annotations

import operator
import os
import pickle
import secrets
import time
from dataclasses import replace
from typing import (
    Any,
    Dict,
    Generic,
    List,
    NamedTuple,
    Optional,
    Sequence,
    SupportsIndex,
    Tuple,
    Type,
    TypeVar,
    Union,
    cast,
)

import numpy as np

from .._checks import PathArg, check_batch, check_name, check_path, integer_in, number_in
from .._plans import Plan
from ..bloom import GrowingFilter
from ..canonical import (
    DEFAULT_POLICY,
    HAS_EXTENSION,
    Canonicalized,
    CanonicalPolicy,
    InvalidURL,
    canonicalize_each,
    canonicalize_many,
    policy_conflict,
    policy_named,
)
from ..config import DedupConfig
from ..content import DEFAULT_CONTENT_POLICY, ContentPolicy
from ..content.index_format import MAX_DISTANCE
from ..fingerprints import Fingerprints, hash_many, take_rows
from ..pages import PAGES_SUFFIX, open_pages
from ..stores.aio import AsyncClaimStore
from ..stores.aliases import DEFAULT_MAX_ALIASES, Aliases, check_max_aliases, unsupported
from ..stores.base import ClaimStore, RetryPolicy, check_lease_seconds
from ..stores.factory import LOCAL
from ..stores.seed import seed_layout
from ..windows import Clock, system_clock
from .aliases import LocalAliases, aliases_path
from .content import ContentChecks
from .leases import URL, Leases, lease_store
from .packed import PackedCanonical, PackedURLs, packed_bytes
from .pipeline import ClaimPipeline, StoreAsk
from .seed import Seed, load_seed
from .state import open_state
from .stats import DedupStats, StatsCounter, StatsListener

#: What a fetch chain held before its last hop: the URL requested, or the chain of them.
Chain = Union[URL, Sequence[URL]]

#: Default share of local hits checked against the store to measure the local filter's loss.
DEFAULT_SAMPLE_RATE = 0.01
#: Put before a precomputed key (:meth:`Deduplicator.claim_keys`) before it is hashed. A
#: canonical URL never holds a control character (docs/canonical.md), so no key can ever share
#: a fingerprint with a page through its spelling.
KEY_DOMAIN = "\x00key\x00"

#: URLs canonicalized per call in a batch by the pure-Python twin: see ``_canonicalize_in_pieces``.
CANONICAL_PIECE = 1_024
#: The store a Deduplicator drives: a blocking one, or its asyncio shell.
S = TypeVar("S", ClaimStore, AsyncClaimStore)
D = TypeVar("D", bound="DedupCore[Any]")


class Prepared(NamedTuple):
    """A batch canonicalized and fingerprinted: ``hashes[row]`` is the fingerprint of
    ``valid[row]``, the canonical form of input URL ``positions[row]``.

    A batch sent to another process arrives with ``canonical`` and ``valid`` packed
    (:mod:`.packed`): their strings are made as they are read."""

    canonical: Sequence[Optional[str]]
    errors: Dict[int, InvalidURL]
    positions: np.ndarray
    valid: Sequence[str]
    hashes: np.ndarray

    def __reduce_ex__(self, protocol: SupportsIndex) -> Tuple[Any, Tuple[Any, ...]]:
        # Sent to or from another process as one block of bytes: pickled many times faster
        # than a list of strings, and unpacked without making them. Protocol 5 lets the block
        # and the arrays travel out of band (the shared memory of ``crawldedup filter --jobs``).
        valid: Union[bytes, pickle.PickleBuffer] = packed_bytes(self.valid)
        if operator.index(protocol) >= 5:
            valid = pickle.PickleBuffer(valid)
        return _unpack_prepared, (len(self.canonical), self.errors, self.positions, valid, self.hashes)


def _unpack_prepared(
    count: int,
    errors: Dict[int, InvalidURL],
    positions: np.ndarray,
    valid: Union[bytes, memoryview],
    hashes: np.ndarray,
) -> Prepared:
    urls = PackedURLs(bytes(valid), len(positions))
    return Prepared(PackedCanonical(urls, positions, count), errors, positions, urls, hashes)


class ClaimBatch(NamedTuple):
    """Per input URL of one batch: whether this caller won it, its canonical form (None when
    invalid), and why the invalid ones were refused (``errors[i]``)."""

    won: List[bool]
    canonical: List[Optional[str]]
    errors: Dict[int, InvalidURL]


class DedupCore(Generic[S]):
    """The settings and the plans of a Deduplicator; see :class:`~crawldedup.dedup.Deduplicator`
    for the arguments (the same for both kinds)."""

    #: The local filter: opened by the constructor (blocking) or by ``open()`` (asyncio).
    local_filter: GrowingFilter

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
        service_url: Optional[str] = None,
        postgres_url: Optional[str] = None,
        policy: Optional[Union[CanonicalPolicy, str]] = None,
        verify_hits: bool = False,
        sample_rate: float = DEFAULT_SAMPLE_RATE,
        retry: Optional[RetryPolicy] = None,
        store: Optional[S] = None,
        config: Optional[DedupConfig] = None,
        worker_id: Optional[str] = None,
        generations: Optional[int] = None,
        clock: Clock = system_clock,
        content_distance: int = 3,
        content_policy: Optional[ContentPolicy] = None,
        pages_path: Optional[PathArg] = None,
        max_aliases: int = DEFAULT_MAX_ALIASES,
    ) -> None:
        #: Owner of this Deduplicator's leases.
        self.worker_id = check_name("worker_id", worker_id) if worker_id is not None else secrets.token_hex(8)
        # Mixed field types; DedupConfig checks each value it receives.
        overrides: Dict[str, Any] = {
            "strategy": strategy,
            "redis_url": redis_url,
            "namespace": namespace,
            "capacity": capacity,
            "error_rate": error_rate,
            "ttl_days": ttl_days,
            "generations": generations,
            "state_path": os.fspath(state) if state is not None else None,
            "sqlite_path": os.fspath(sqlite_path) if sqlite_path is not None else None,
            "service_url": service_url,
            "postgres_url": postgres_url,
        }
        self.config = replace(config or DedupConfig(), **{k: v for k, v in overrides.items() if v is not None})
        number_in("sample_rate", sample_rate, 0, 1)
        #: The bound of the alias map of redirects this Deduplicator records into (claim_final).
        self.max_aliases = check_max_aliases(max_aliases)
        if isinstance(policy, str):
            policy = policy_named(policy)
        elif policy is not None and not isinstance(policy, CanonicalPolicy):
            raise TypeError(f"policy must be a CanonicalPolicy or a name (v1, v2), got {type(policy).__name__}")
        self.policy: CanonicalPolicy = policy or self.config.canonical_policy
        self.namespace = self.config.namespace
        if crawl_round is not None:
            self.namespace = f"{self.namespace}:{check_name('crawl_round', crawl_round)}"
        if verify_hits and self.config.strategy == LOCAL and store is None:
            raise ValueError("verify_hits needs a store: the local strategy has none")
        self.verify_hits = bool(verify_hits)
        self.sample_rate = float(sample_rate)
        self._counter = StatsCounter()
        self._clock = clock
        if store is not None and store.policy_digest != self.policy.digest:
            raise ValueError(f"the store was opened with {policy_conflict(store.policy_digest, self.policy.digest)}")
        #: Whether the store was made here (and is closed here); one given to us stays open.
        self._owns_store = store is None and self.config.strategy != LOCAL
        if self._owns_store:
            store = self._make_store(
                self.config.strategy,
                namespace=self.namespace,
                policy_digest=self.policy.digest,
                redis_url=self.config.redis_url,
                sqlite_path=self.config.sqlite_path,
                service_url=self.config.service_url,
                postgres_url=self.config.postgres_url,
                capacity=self.config.capacity,
                error_rate=self.config.error_rate,
                ttl_seconds=self.config.ttl_seconds,
                retry=retry,
                window=self.config.window,
                clock=clock,
                durability=self.config.store_durability,
            )
        #: The shared store; None for the ``local`` strategy.
        self.store: Optional[S] = store
        integer_in("content_distance", content_distance, 1, MAX_DISTANCE)
        if content_policy is not None and not isinstance(content_policy, ContentPolicy):
            raise TypeError(f"content_policy must be a ContentPolicy, got {type(content_policy).__name__}")
        check_path("pages_path", pages_path)
        if pages_path is None and self.config.state_path is not None:
            pages_path = f"{self.config.state_path}{PAGES_SUFFIX}"
        content_digest = (content_policy or DEFAULT_CONTENT_POLICY).digest
        #: check_content's steps, and its page store (opened on first use).
        self._content = ContentChecks(
            lambda: open_pages(
                self._claims(),
                pages_path,
                namespace=self.config.namespace,
                max_distance=content_distance,
                content_digest=content_digest,
                canonical_digest=self.policy.digest,
                capacity=self.config.capacity,
            ),
            content_distance,
            lambda urls: canonicalize_many(urls, policy=self.policy),
        )
        #: The namespace's seed filter (``crawldedup migrate --from-state``), once the store is open.
        self._seed: Optional[Seed] = None
        self._made()

    def _claims(self) -> Optional[ClaimStore]:
        """The claim store's logic (an asyncio store's too), whose channel the pages share."""
        store = self.store
        return store.store if isinstance(store, AsyncClaimStore) else store

    def _made(self) -> None:
        """What the constructor does last (the blocking Deduplicator opens its state file)."""

    def _make_store(self, strategy: str, **arguments: Any) -> S:
        """Make (and, blocking, open) the store of ``strategy``."""
        raise NotImplementedError

    def _seed_plan(self) -> Plan[None]:
        """Download the namespace's seed, if it has one (once the store is open)."""
        claims = self._claims()
        layout = seed_layout(claims) if claims is not None else None
        if layout is not None:
            self._seed = yield from load_seed(
                layout, policy_digest=self.policy.digest, window=self.config.window, clock=self._clock
            )

    def _close_seed(self) -> None:
        if self._seed is not None:
            self._seed.close()
            self._seed = None

    def _open_state(self) -> None:
        """Open the local filter (after the store was reached: an unreachable store leaves no
        state file behind) and the steps that use it."""
        self.local_filter = open_state(
            self.config.state_path,
            self.config.capacity,
            self.config.error_rate,
            self.policy,
            namespace=self.namespace,
            window=self.config.window,
            clock=self._clock,
        )
        self._pipeline = ClaimPipeline(
            self.local_filter,
            self.store is not None,
            verify_hits=self.verify_hits,
            sample_rate=self.sample_rate,
            owner=self.worker_id,
            counter=self._counter,
            seed=self._seed.filter if self._seed is not None else None,
        )
        self._leases = Leases(
            self.store, self.config.strategy, self.local_filter, self.worker_id, self.policy, self._counter
        )
        #: The alias map of the ``local`` strategy (a store keeps its own).
        self._local_aliases = (
            LocalAliases(aliases_path(self.config.state_path), self.config.window, self._clock)
            if self.store is None
            else None
        )

    @classmethod
    def from_env(cls: Type[D], environ: Optional[Any] = None, **overrides: Any) -> D:
        """A Deduplicator configured by the environment (read once, here); ``overrides`` win.

        Variables: ``CRAWLDEDUP_<FIELD>`` for each field of :class:`~crawldedup.config.DedupConfig`
        (``CRAWLDEDUP_STRATEGY``, ``CRAWLDEDUP_REDIS_URL``, ``CRAWLDEDUP_STATE``...). Five also
        answer to their older names, read when the ``CRAWLDEDUP_`` one is unset: ``DEDUP_STRATEGY``,
        ``REDIS_URL``, ``VISITED_TTL_DAYS``, ``BLOOM_CAPACITY``, ``BLOOM_ERROR_RATE``.

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

    # -- the plans --------------------------------------------------------------------------

    def _claim_plan(
        self,
        urls: Sequence[URL],
        base: Optional[URL],
        lease: Optional[float],
        bases: Optional[Sequence[Optional[URL]]],
        owner: Optional[str] = None,
    ) -> Plan[ClaimBatch]:
        """:meth:`Deduplicator.claim_batch`, as a plan."""
        if lease is not None:
            lease_store(self.store, self.config.strategy)
            check_lease_seconds(lease)
        batch = self._prepare(urls, base, bases)
        won = np.zeros(len(batch.canonical), dtype=bool)
        if len(batch.positions):
            rows = yield from self._claim_and_learn(batch.hashes, batch.valid, lease, owner=owner)
            won[batch.positions[rows]] = True
        return ClaimBatch(won.tolist(), cast(List[Optional[str]], batch.canonical), batch.errors)  # made here: a list

    def _keys_plan(self, keys: Sequence[URL]) -> Plan[List[bool]]:
        """:meth:`Deduplicator.claim_keys`, as a plan."""
        domained = _domained(keys)
        won = np.zeros(len(domained), dtype=bool)
        self._counter.add(urls=len(domained))
        if domained:
            won[(yield from self._claim_and_learn(hash_many(domained), [], None))] = True
        return cast(List[bool], won.tolist())

    def _seen_plan(self, urls: Sequence[URL]) -> Plan[List[bool]]:
        """:meth:`Deduplicator.seen`, as a plan."""
        check_batch("urls", urls, "URLs")
        canonical, _ = canonicalize_many(urls, policy=self.policy)
        positions = [i for i, c in enumerate(canonical) if c is not None]
        seen = np.zeros(len(canonical), dtype=bool)
        if positions:
            seen[positions] = yield from self._read(hash_many([cast(str, canonical[i]) for i in positions]))
        return cast(List[bool], seen.tolist())

    def _final_plan(
        self,
        finals: Sequence[URL],
        requested: Sequence[Chain],
        lease: Optional[float],
        owner: Optional[str] = None,
    ) -> Plan[List[bool]]:
        """:meth:`Deduplicator.claim_final`, as a plan: a fetch chain owns one claim.

        Per row, a final URL with the canonical form of a URL its chain holds is that page: the
        chain's, whoever answers its claim. Any other final URL is the chain's if its claim wins
        (the rows of one page within a batch: the first wins). The aliases (each chain URL of
        another canonical form -> the final page) go to the store in the same round trip.
        """
        check_batch("final_urls", finals, "URLs")
        check_batch("requested", requested, "URLs or chains of URLs")
        chains = [_chain(row, links) for row, links in enumerate(requested)]
        if len(chains) != len(finals):
            raise ValueError(
                f"requested must hold one URL per final URL ({len(finals)}), or a chain of URLs, got {len(chains)}"
            )
        if self.store is not None and not self.store.supports_aliases:
            raise unsupported(self.store.strategy)
        if lease is not None:
            lease_store(self.store, self.config.strategy)
            check_lease_seconds(lease)
        batch = self._prepare(finals, None, None)
        held_forms, _ = _canonicalize_in_pieces([url for chain in chains for url in chain], None, self.policy)
        starts = np.cumsum([0] + [len(chain) for chain in chains]).tolist()
        same, pairs, sources = [], [], []
        for row, i in enumerate(batch.positions.tolist()):
            final = batch.canonical[i]
            holds = {form for form in held_forms[starts[i] : starts[i + 1]] if form is not None}
            if final in holds:
                same.append(row)
            for form in sorted(holds - {final}):  # sorted: the same aliases whatever the chain's order
                pairs.append(row)
                sources.append(form)
        aliases = Aliases(
            Fingerprints(hash_many(sources)), Fingerprints(take_rows(batch.hashes, pairs)), self.max_aliases
        )
        won = np.zeros(len(batch.canonical), dtype=bool)
        if len(batch.positions):
            # A page the chain holds is claimed too (a caller whose chain claimed nothing in this
            # Deduplicator records it now), and is the chain's whoever answered first.
            held = np.zeros(len(batch.positions), dtype=bool)
            held[same] = True
            rows = yield from self._claim_and_learn(
                batch.hashes,
                batch.valid,
                lease,
                aliases if self.store is not None and pairs else None,
                owner=owner,
                kept=np.flatnonzero(held),
            )
            mine = np.zeros(len(batch.positions), dtype=bool)
            mine[rows] = True
            won[batch.positions[mine | held]] = True
            self._counter.add(redirected_known=int((~mine & ~held).sum()))
            if self._local_aliases is not None and pairs:
                self._local_aliases.record(aliases)
        return cast(List[bool], won.tolist())

    def _through_plan(self, urls: Sequence[URL]) -> Plan[List[bool]]:
        """:meth:`Deduplicator.seen_through_redirects`, as a plan: the URLs' aliases (one round
        trip), then the claims of the final pages found (the local filter's misses: one more)."""
        check_batch("urls", urls, "URLs")
        canonical, _ = _canonicalize_in_pieces(urls, None, self.policy)
        positions = [i for i, c in enumerate(canonical) if c is not None]
        seen = np.zeros(len(canonical), dtype=bool)
        if positions:
            asked = Fingerprints(hash_many([cast(str, canonical[i]) for i in positions]))
            if self._local_aliases is not None:
                finals = self._local_aliases.read(asked)
            else:
                finals = yield StoreAsk("read_aliases", (asked,))
            aliased = [positions[row] for row, final in enumerate(finals) if final is not None]
            if aliased:
                seen[aliased] = yield from self._read(Fingerprints.of([f for f in finals if f is not None]).hashes)
        return cast(List[bool], seen.tolist())

    def _seen_keys_plan(self, keys: Sequence[URL]) -> Plan[List[bool]]:
        """:meth:`Deduplicator.seen_keys`, as a plan."""
        domained = _domained(keys)
        if not domained:
            return []
        return cast(List[bool], (yield from self._read(hash_many(domained))).tolist())

    def _read(self, hashes: np.ndarray) -> Plan[np.ndarray]:
        """Whether each fingerprint was claimed: the local filter's hits, and the store's answer
        for its misses (for every row with ``verify_hits``). Nothing is claimed, learnt or counted."""
        seen = self.local_filter.contains_hashes(hashes)
        ask = np.arange(len(hashes)) if self.verify_hits else np.flatnonzero(~seen)
        if self._seed is not None and len(ask):
            in_seed = self._seed.filter.contains_hashes(take_rows(hashes, ask))
            seen[ask[in_seed]] = True
            ask = ask[~in_seed]
        if self.store is not None and len(ask):
            present = yield StoreAsk("contains_many", (Fingerprints(take_rows(hashes, ask)),))
            seen[ask] = np.asarray(present, dtype=bool)
        return seen

    def _prepare(self, urls: Sequence[URL], base: Optional[URL], bases: Optional[Sequence[Optional[URL]]]) -> Prepared:
        """Canonicalize and fingerprint a batch; count its URLs."""
        return self._counted(prepare_batch(urls, base, bases, self.policy))

    def _counted(self, batch: Prepared) -> Prepared:
        """Count a prepared batch's URLs, as the Deduplicator's own preparation does."""
        self._counter.add(urls=len(batch.canonical), invalid=len(batch.errors))
        return batch

    def _claim_and_learn(
        self,
        hashes: np.ndarray,
        canonical: Sequence[str],
        lease: Optional[float],
        aliases: Optional[Aliases] = None,
        *,
        owner: Optional[str] = None,
        kept: Optional[np.ndarray] = None,
    ) -> Plan[np.ndarray]:
        """Claim one batch in one step (recording ``aliases`` in the same round trip); the local
        filter learns its lasting claims at once (only once the store answered: a batch that
        fails or is cancelled teaches it nothing).

        :param kept: rows that are the caller's whoever wins their claim (a fetch chain's own
            page): counted as won, never as lost.
        :returns: the rows won.
        """
        claimed = yield from self._pipeline.claim(hashes, canonical, lease, aliases, owner)
        won = claimed.won
        if self.store is None:
            # The filter's own test-and-set decides: of two threads claiming a page, one adds it first.
            won = won[self.local_filter.add_hashes(take_rows(hashes, won))] if len(won) else won
        elif len(claimed.learn):
            self.local_filter.add_hashes(take_rows(hashes, claimed.learn))
        counted = len(won) if kept is None else len(np.union1d(won, kept))
        self._counter.add(won=counted, lost=len(hashes) - counted)
        return won

    def _filter_bytes_per_item(self) -> Optional[float]:
        """The local filter's bytes per item (what ``store_bytes_per_url`` says for ``local``)."""
        items = self.local_filter.approx_items
        return self.local_filter.num_bits / 8 / items if items else None

    def __repr__(self) -> str:
        where = self.store.description if self.store is not None else "local filter only"
        return f"<{type(self).__name__} strategy={self.config.strategy!r} namespace={self.namespace!r} {where}>"


def prepare_batch(
    urls: Sequence[URL],
    base: Optional[URL] = None,
    bases: Optional[Sequence[Optional[URL]]] = None,
    policy: CanonicalPolicy = DEFAULT_POLICY,
) -> Prepared:
    """Canonicalize and fingerprint a batch, as :meth:`Deduplicator.claim_batch` does first.

    It needs no Deduplicator: another thread or process may prepare the batches that one
    Deduplicator then claims (:meth:`Deduplicator.hold_prepared`), as ``crawldedup filter
    --jobs`` does. Arguments as :meth:`Deduplicator.claim_batch`.

    :raises TypeError: when ``urls`` is a single string.
    :raises InvalidURL: when ``base`` itself is refused.
    :raises ValueError: for ``bases`` of another length than ``urls``, or both ``base`` and ``bases``.
    """
    if bases is None:
        canonical, errors = _canonicalize_in_pieces(urls, base, policy)
    else:
        if base is not None:
            raise ValueError("give base or bases, not both")
        canonical, errors = canonicalize_each(urls, bases, policy=policy)
    return prepare_canonical(Canonicalized(canonical, errors))


def prepare_canonical(canonicalized: Canonicalized) -> Prepared:
    """Fingerprint a batch that is already canonicalized: the rest of :func:`prepare_batch`,
    for a caller that canonicalizes its own way (``crawldedup filter`` splits its lines)."""
    canonical, errors = canonicalized
    # The refused rows are those of ``errors``: no per-row Python work for a batch without any.
    if errors:
        kept = np.ones(len(canonical), dtype=bool)
        kept[list(errors)] = False
        positions = np.flatnonzero(kept)
        valid = cast(List[str], [c for c in canonical if c is not None])
    else:
        positions = np.arange(len(canonical), dtype=np.intp)
        valid = cast(List[str], canonical.copy())
    return Prepared(canonical, errors, positions, valid, hash_many(valid))


def _chain(row: int, links: Chain) -> List[URL]:
    """The URLs of one fetch chain: a single URL, or a sequence of them (first requested first)."""
    if isinstance(links, (str, bytes)):
        return [links]
    if isinstance(links, (bytearray, memoryview)) or not isinstance(links, Sequence):
        raise TypeError(f"requested[{row}] must be a URL or a sequence of URLs, got {type(links).__name__}")
    return list(cast(Sequence[URL], links))


def _canonicalize_in_pieces(urls: Sequence[URL], base: Optional[URL], policy: CanonicalPolicy) -> Canonicalized:
    """:func:`canonicalize_many` of the pure-Python twin in pieces of :data:`CANONICAL_PIECE`
    URLs, letting another thread take the GIL between two pieces.

    The pure-Python canonicalization holds the GIL for a whole call, and a thread waiting for
    the GIL gets it only after the 5 ms switch interval unless the holder lets go:
    ``time.sleep(0)`` lets go, so the event loop of an AsyncDeduplicator whose worker
    canonicalizes waits at most one piece. When the compiled one held it throughout too, 16
    tasks claiming 10,000-URL batches lagged a ticker's loop 12 to 24 ms with whole calls, 4 to
    8 ms with pieces (about the idle loop's own jitter on this machine:
    bench/test_bench_async.py). The compiled one now holds it only to copy the batch and to
    make its strings (about 25 ns a URL, 0.25 ms for 10,000), so it takes the batch whole:
    cutting and joining pieces cost about as much again, all of it with the GIL.
    """
    check_batch("urls", urls, "URLs")
    urls = urls if isinstance(urls, Sequence) else list(urls)
    if HAS_EXTENSION or len(urls) <= CANONICAL_PIECE:
        return canonicalize_many(urls, base=base, policy=policy)
    canonical: List[Optional[str]] = []
    errors: Dict[int, InvalidURL] = {}
    for start in range(0, len(urls), CANONICAL_PIECE):
        found, refused = canonicalize_many(urls[start : start + CANONICAL_PIECE], base=base, policy=policy)
        canonical.extend(found)
        errors.update((start + i, error) for i, error in refused.items())
        time.sleep(0)
    return Canonicalized(canonical, errors)


def _domained(keys: Sequence[URL]) -> List[URL]:
    """Precomputed keys in their own space (:data:`KEY_DOMAIN`), checked.

    :raises TypeError: for a single string, or a key that is not ``str`` or ``bytes``.
    :raises ValueError: for an empty key.
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
    return domained
