"""The claim pipeline of one batch of fingerprints, in small steps, each a few array operations:

    local lookup -> in-batch dedup -> sampled hits -> one store call -> lease filtering

Nothing here teaches the local filter: the pipeline says which rows were won and which the
local filter may learn (:class:`Claimed`), and its caller decides when (at once for a one-step
claim, on commit for a held one).

The claim is a plan (:mod:`crawldedup._plans`): it yields its one store call as a
:class:`StoreAsk` and resumes with the answer, so the blocking and the asyncio Deduplicator
drive the same steps and differ only in how they send the call.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .._plans import Plan
from ..bloom import LocalFilter
from ..fingerprints import Fingerprints, take_rows
from ..stores.aliases import Aliases
from ..stores.base import ClaimAnswers, Lease
from .state import LocalState
from .stats import StatsCounter

_NO_ROWS = np.zeros(0, dtype=np.intp)
_32 = np.uint64(32)


class StoreAsk(NamedTuple):
    """A request of a Deduplicator's plan to its store: call ``method`` (a method name that the
    blocking :class:`~crawldedup.stores.base.ClaimStore` and the
    :class:`~crawldedup.stores.aio.AsyncClaimStore` share) with these arguments."""

    method: str
    args: Tuple[Any, ...] = ()
    kwargs: Dict[str, Any] = {}


class Claimed(NamedTuple):
    """What one batch's claim found, before the local filter learns any of it.

    :ivar won: rows won by this caller, ascending (one per page: the first row of its fingerprint).
    :ivar learn: local misses the local filter may learn once the batch's claims are lasting:
        with a store, the misses not in an open lease (this caller's or another worker's);
        without one, the won rows.
    """

    won: np.ndarray
    learn: np.ndarray


class FirstRows(NamedTuple):
    """The distinct fingerprints among some rows: the first row of each, and for each row the
    position of its fingerprint among them."""

    rows: np.ndarray
    inverse: np.ndarray


def first_rows(hashes: np.ndarray, rows: np.ndarray) -> FirstRows:
    """The first row of each distinct fingerprint among ``rows`` (in row order), vectorized."""
    if len(rows) == 0:
        return FirstRows(_NO_ROWS, _NO_ROWS)
    picked = take_rows(hashes, rows)
    halves = np.sort(picked[:, 0])
    if not (halves[1:] == halves[:-1]).any():  # distinct first halves, so distinct fingerprints: the common case
        return FirstRows(rows, np.arange(len(rows)))
    order = np.lexsort((picked[:, 1], picked[:, 0]))  # stable: equal fingerprints keep row order
    ordered = picked[order]
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    group_of_sorted = np.cumsum(starts) - 1
    firsts = order[starts]  # positions in ``rows``, one per fingerprint
    by_row = np.argsort(firsts, kind="stable")  # fingerprints in the order they first appear
    rank = np.empty(len(firsts), dtype=np.intp)
    rank[by_row] = np.arange(len(firsts))
    inverse = np.empty(len(rows), dtype=np.intp)
    inverse[order] = rank[group_of_sorted]
    return FirstRows(rows[firsts[by_row]], inverse)


class ClaimPipeline:
    """Claims batches of fingerprints: the local filter answers what it can, the store the rest.

    :param local_filter: the local filter (only read here).
    :param shared: whether a store answers the misses (False: the local filter decides alone).
    :param seed: the namespace's seed filter (:mod:`crawldedup.dedup.seed`): its hits are
        seen, never claimed (not even with ``verify_hits``), and never learnt locally.
    :param verify_hits: claim the local hits in the store too.
    :param sample_rate: share of local hits read from the store to measure the filter's loss.
    :param owner: the owner of this caller's leases.
    :param counter: where the batch's lookup and store counters go.
    """

    def __init__(
        self,
        local_filter: LocalState,
        shared: bool,
        *,
        verify_hits: bool,
        sample_rate: float,
        owner: str,
        counter: StatsCounter,
        seed: Optional[LocalFilter] = None,
    ) -> None:
        self.local_filter = local_filter
        self.seed = seed
        self.shared = shared
        self.verify_hits = verify_hits
        self.owner = owner
        self.counter = counter
        # A hit is sampled when the top 32 bits of its h2 fall under this threshold.
        self._sample_below = np.uint64(round(sample_rate * (1 << 32)))

    def claim(
        self,
        hashes: np.ndarray,
        canonical: Sequence[str],
        lease: Optional[float],
        aliases: Optional[Aliases] = None,
        owner: Optional[str] = None,
    ) -> Plan[Claimed]:
        """Claim one batch: ``hashes`` has one row per valid URL, ``canonical[row]`` its canonical
        form (needed with a lease only), the lease taken for ``owner`` (None: this caller's).
        Yields at most one :class:`StoreAsk`, which also records ``aliases`` in the store's alias map.

        :raises StoreUnavailable: when the store stayed unreachable (nothing was recorded).
        """
        hit = self.local_filter.contains_hashes(hashes)
        hits = int(hit.sum())
        candidates = np.arange(len(hashes)) if self.verify_hits else np.flatnonzero(~hit)
        seeded = 0
        if self.seed is not None and len(candidates):
            in_seed = self.seed.contains_hashes(take_rows(hashes, candidates))
            seeded = int(in_seed.sum())
            candidates = candidates[~in_seed]
        claims = first_rows(hashes, candidates)
        if not self.shared:
            self.counter.add(local_hits=hits, answered_locally=len(hashes))
            return Claimed(claims.rows, claims.rows)
        reads = self._sampled_hits(hashes, hit)
        answers = yield from self._ask_store(hashes, claims.rows, reads, canonical, lease, aliases, owner)
        won_mask = np.asarray(answers.won, dtype=bool)
        won = claims.rows[won_mask]
        held = np.asarray(answers.held, dtype=np.intp)
        learn = self._lasting_misses(hit, candidates, claims, won_mask if lease is not None else None, held)
        if self.verify_hits:
            checked, false_hits, local = hits, int(hit[won].sum()), 0
        else:
            checked, false_hits, local = len(reads), answers.present.count(False), hits
        self.counter.add(
            local_hits=hits,
            seed_hits=seeded,
            answered_locally=local + seeded,
            store_claims=len(claims.rows),
            store_reads=len(reads),
            round_trips=1 if len(claims.rows) or len(reads) or aliases is not None else 0,
            sampled_hits=checked,
            false_hits=false_hits,
            leased=len(won) if lease is not None else 0,
            held=len(held),
        )
        return Claimed(won, learn)

    def _sampled_hits(self, hashes: np.ndarray, hit: np.ndarray) -> np.ndarray:
        """Local hits chosen by fingerprint bits (so the same URLs every time) to read from the store."""
        if self.verify_hits or not self._sample_below:
            return _NO_ROWS
        return np.flatnonzero(hit & ((hashes[:, 1] >> _32) < self._sample_below))

    def _ask_store(
        self,
        hashes: np.ndarray,
        claim_rows: np.ndarray,
        read_rows: np.ndarray,
        canonical: Sequence[str],
        lease: Optional[float],
        aliases: Optional[Aliases],
        owner: Optional[str],
    ) -> Plan[ClaimAnswers]:
        """One round trip: claim ``claim_rows`` (leased when ``lease``), read ``read_rows``, record ``aliases``."""
        terms = (
            Lease(owner or self.owner, lease, [canonical[row] for row in claim_rows.tolist()])
            if lease is not None
            else None
        )
        options: Dict[str, Any] = {"lease": terms} if aliases is None else {"lease": terms, "aliases": aliases}
        ask = StoreAsk(
            "claim_and_read",
            (Fingerprints(take_rows(hashes, claim_rows)), Fingerprints(take_rows(hashes, read_rows))),
            options,
        )
        started = time.perf_counter()
        try:
            answers: ClaimAnswers = yield ask
        except (asyncio.CancelledError, GeneratorExit):  # counted by the async Deduplicator
            raise
        except BaseException:
            self.counter.add(failed_batches=1)
            raise
        if len(claim_rows) or len(read_rows) or aliases is not None:
            self.counter.store_call(time.perf_counter() - started)
        return answers

    @staticmethod
    def _lasting_misses(
        hit: np.ndarray, candidates: np.ndarray, claims: FirstRows, leased: Optional[np.ndarray], held: np.ndarray
    ) -> np.ndarray:
        """The local misses whose claim is lasting: not leased by this caller (ours until done)
        nor lost to another worker's open lease (it may expire and the URL come back).

        :param leased: per claim, whether this caller won it with a lease (None: no lease).
        :param held: the claims lost to another worker's open lease.
        """
        open_lease = np.zeros(len(claims.rows), dtype=bool)
        open_lease[held] = True
        if leased is not None:
            open_lease |= leased
        keep = ~open_lease[claims.inverse] & ~hit[candidates]
        kept: np.ndarray = candidates[keep]
        return kept
