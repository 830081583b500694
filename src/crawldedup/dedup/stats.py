"""The Deduplicator's statistics: a private counter, read as a frozen :class:`DedupStats` snapshot,
and followed live by listeners (:class:`StatsListener`, such as :mod:`crawldedup.metrics`)."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Protocol


@dataclass(frozen=True)
class DedupStats:
    """Counters since the Deduplicator was made (a snapshot).

    :ivar urls: URLs given to claim.
    :ivar invalid: URLs refused by canonicalization (never won).
    :ivar local_hits: valid URLs the local filter called seen.
    :ivar seed_hits: valid URLs the namespace's seed (a state file migrated into the store by
        ``crawldedup migrate --from-state``) called seen; never sent to the store.
    :ivar answered_locally: valid URLs answered without the store (the local and seed hits,
        unless ``verify_hits``; every URL with the ``local`` strategy).
    :ivar store_claims: fingerprints sent to the store to claim (duplicates within a batch once).
    :ivar store_reads: local hits sent to the store as reads by the sampled check.
    :ivar round_trips: store round trips made for claims (one per batch that needed the store).
    :ivar won: URLs this caller won.
    :ivar lost: valid URLs this caller did not win.
    :ivar sampled_hits: local hits checked against the store (sample or ``verify_hits``).
    :ivar false_hits: checked local hits the store did not know: new URLs the local filter
        would have dropped.
    :ivar failed_batches: batches that ended in ``StoreUnavailable``.
    :ivar cancelled_batches: claims of the asyncio Deduplicator cancelled in flight (nothing
        entered the local filter; docs/async.md says what became of their pages).
    :ivar leased: URLs this caller won with a lease (also counted in ``won``).
    :ivar held: valid URLs lost to another worker's open lease (also counted in ``lost``).
    :ivar done: leases made lasting by :meth:`Deduplicator.done`.
    :ivar released: leases freed by :meth:`Deduplicator.release`.
    :ivar renewed: leases extended by :meth:`Deduplicator.renew`.
    :ivar refused: ``done``, ``release`` or ``renew`` refused: this worker did not hold the lease
        (any more), or the URL was invalid.
    :ivar expired: expired leases handed back by :meth:`Deduplicator.expired`.
    :ivar committed: pages of held batches made seen by :meth:`HeldBatch.commit`.
    :ivar abandoned: pages of held batches handed back by :meth:`HeldBatch.abandon` (anyone's
        next claim wins them again).
    :ivar stranded: pages of abandoned batches that stay claimed in the store although they were
        never used (RedisBloom cannot take a claim back; or the store failed during the abandon).
    :ivar redirected_known: redirect chains that landed on a page another caller held
        (:meth:`Deduplicator.claim_final` said False for a page new to the chain): dropped.
    :ivar won_twice: committed pages another holder had made seen meanwhile (its lease ran out
        and was taken over, or another holder of the same local filter committed it first).
    """

    urls: int = 0
    invalid: int = 0
    local_hits: int = 0
    seed_hits: int = 0
    answered_locally: int = 0
    store_claims: int = 0
    store_reads: int = 0
    round_trips: int = 0
    won: int = 0
    lost: int = 0
    sampled_hits: int = 0
    false_hits: int = 0
    failed_batches: int = 0
    cancelled_batches: int = 0
    leased: int = 0
    held: int = 0
    done: int = 0
    released: int = 0
    renewed: int = 0
    refused: int = 0
    expired: int = 0
    committed: int = 0
    abandoned: int = 0
    stranded: int = 0
    won_twice: int = 0
    redirected_known: int = 0

    @property
    def false_hit_rate(self) -> Optional[float]:
        """Measured share of local hits that were new URLs (the local filter's real loss); None before any check."""
        return self.false_hits / self.sampled_hits if self.sampled_hits else None

    @property
    def local_answer_ratio(self) -> Optional[float]:
        """Share of valid URLs answered without the store; None before any."""
        valid = self.urls - self.invalid
        return self.answered_locally / valid if valid else None


_FIELDS = tuple(field.name for field in dataclasses.fields(DedupStats))


class StatsListener(Protocol):
    """What follows a Deduplicator's counters as they change (:meth:`Deduplicator.watch_stats`).

    Both methods are called while the counters are locked, so each change reaches a listener
    once, in order; they must be quick and must not call back into the Deduplicator.
    """

    def counted(self, deltas: Mapping[str, int]) -> None:
        """``deltas``: what was just added, by :class:`DedupStats` field name (the first call: the totals)."""

    def store_call(self, seconds: float) -> None:
        """A claim round trip (counted in ``round_trips``) took ``seconds``, its retries included."""


class StatsCounter:
    """Counters that the claim steps add to (once per batch, thread-safe) and readers snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = dict.fromkeys(_FIELDS, 0)
        self._listeners: List[StatsListener] = []

    def add(self, **deltas: int) -> None:
        """Add each delta to the counter of its name (a :class:`DedupStats` field)."""
        with self._lock:
            for name, delta in deltas.items():
                self._counts[name] += delta
            for listener in self._listeners:
                listener.counted(deltas)

    def store_call(self, seconds: float) -> None:
        """Tell the listeners how long a claim round trip took."""
        with self._lock:
            for listener in self._listeners:
                listener.store_call(seconds)

    def watch(self, listener: StatsListener) -> None:
        """Send ``listener`` the totals now, then every later change (none missed, none twice)."""
        with self._lock:
            listener.counted(dict(self._counts))
            self._listeners.append(listener)

    def snapshot(self) -> DedupStats:
        """The counters now, frozen."""
        with self._lock:
            return DedupStats(**self._counts)
