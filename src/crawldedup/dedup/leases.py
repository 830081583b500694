"""Settling a worker's leases: done, release, renew, and the expired leases handed back.

Each step is one store round trip, written as a plan (:mod:`crawldedup._plans`) that yields its
store call as a :class:`~crawldedup.dedup.pipeline.StoreAsk`; a refusal (this worker does not
hold the lease) is an answer, not an error. Only a lease made lasting (done) enters the local
filter.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

from .._plans import Plan
from ..bloom import LocalFilter
from ..canonical import CanonicalPolicy, canonicalize_many
from ..fingerprints import Fingerprints, hash_many, take_rows
from ..stores.base import LeasesUnsupported, check_lease_seconds
from ..stores.factory import LEASE_STRATEGIES
from .pipeline import StoreAsk
from .stats import StatsCounter

URL = Union[str, bytes]


def lease_store(store: Any, strategy: str) -> None:
    """Check that ``store`` (a blocking or an async store, or None) can hold leases.

    :raises LeasesUnsupported: naming the strategy in use.
    """
    if store is None or not store.supports_leases:
        strategy = strategy if store is None else store.strategy
        raise LeasesUnsupported(
            f"leases need the {' or '.join(LEASE_STRATEGIES)} store (claims for a limited time), "
            f"this Deduplicator uses {strategy!r}"
        )


class Leases:
    """The lease steps of one Deduplicator (see :meth:`crawldedup.Deduplicator.done` and its siblings)."""

    def __init__(
        self,
        store: Any,
        strategy: str,
        local_filter: LocalFilter,
        owner: str,
        policy: CanonicalPolicy,
        counter: StatsCounter,
    ) -> None:
        self.store = store
        self.strategy = strategy
        self.local_filter = local_filter
        self.owner = owner
        self.policy = policy
        self.counter = counter

    def done(self, urls: Sequence[URL], owner: Optional[str] = None) -> Plan[List[bool]]:
        lease_store(self.store, self.strategy)
        answers, fingerprints, accepted = yield from self._settle(urls, owner, "finish_leases")
        if accepted:  # lasting now: the local filter may answer for them
            self.local_filter.add_hashes(take_rows(fingerprints.hashes, accepted))
        self.counter.add(done=len(accepted), refused=len(answers) - len(accepted))
        return answers

    def release(self, urls: Sequence[URL], owner: Optional[str] = None) -> Plan[List[bool]]:
        lease_store(self.store, self.strategy)
        answers, _, accepted = yield from self._settle(urls, owner, "release_leases")
        self.counter.add(released=len(accepted), refused=len(answers) - len(accepted))
        return answers

    def renew(self, urls: Sequence[URL], lease: float, owner: Optional[str] = None) -> Plan[List[bool]]:
        check_lease_seconds(lease)
        lease_store(self.store, self.strategy)
        answers, _, accepted = yield from self._settle(urls, owner, "renew_leases", lease)
        self.counter.add(renewed=len(accepted), refused=len(answers) - len(accepted))
        return answers

    def expired(self, limit: int, lease: Optional[float], owner: Optional[str] = None) -> Plan[List[str]]:
        lease_store(self.store, self.strategy)
        taker = (owner or self.owner) if lease is not None else None
        urls: List[str] = yield StoreAsk("expired_leases", (limit, taker, lease))
        self.counter.add(expired=len(urls))
        return urls

    def _settle(
        self, urls: Sequence[URL], owner: Optional[str], method: str, *terms: float
    ) -> Plan[Tuple[List[bool], Fingerprints, List[int]]]:
        """Canonicalize ``urls`` and settle the valid ones of ``owner`` (None: this worker) in one
        store call (``method``).

        :returns: per URL, whether it was settled (False when invalid or refused); the valid
            URLs' fingerprints; and the rows of those settled.
        """
        canonical, _ = canonicalize_many(urls, policy=self.policy)
        positions = [i for i, c in enumerate(canonical) if c is not None]
        answers = [False] * len(canonical)
        fingerprints = Fingerprints(hash_many([canonical[i] for i in positions]))
        accepted: List[int] = []
        if positions:
            settled: List[bool] = yield StoreAsk(method, (fingerprints, owner or self.owner, *terms))
            for row, ok in enumerate(settled):
                answers[positions[row]] = ok
                if ok:
                    accepted.append(row)
        return answers, fingerprints, accepted
