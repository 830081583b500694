"""Settling a worker's leases: done, release, renew, and the expired leases handed back.

Each step is one store round trip; a refusal (this worker does not hold the lease) is an
answer, not an error. Only a lease made lasting (done) enters the local filter.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple, Union

from ..bloom import LocalFilter, hash_many
from ..canonical import CanonicalPolicy, canonicalize_many
from ..fingerprints import Fingerprints
from ..stores.base import ClaimStore, LeasesUnsupported, check_lease_seconds
from ..stores.factory import LEASE_STRATEGIES
from .stats import StatsCounter

URL = Union[str, bytes]


def lease_store(store: Optional[ClaimStore], strategy: str) -> ClaimStore:
    """``store`` when it can hold leases.

    :raises LeasesUnsupported: naming the strategy in use.
    """
    if store is None or not store.supports_leases:
        strategy = strategy if store is None else store.strategy
        raise LeasesUnsupported(
            f"leases need the {' or '.join(LEASE_STRATEGIES)} store (claims for a limited time), "
            f"this Deduplicator uses {strategy!r}"
        )
    return store


class Leases:
    """The lease steps of one Deduplicator (see :meth:`crawldedup.Deduplicator.done` and its siblings)."""

    def __init__(self, store: Optional[ClaimStore], strategy: str, local_filter: LocalFilter, owner: str,
                 policy: CanonicalPolicy, counter: StatsCounter) -> None:
        self.store = store
        self.strategy = strategy
        self.local_filter = local_filter
        self.owner = owner
        self.policy = policy
        self.counter = counter

    def done(self, urls: Sequence[URL]) -> List[bool]:
        store = lease_store(self.store, self.strategy)
        answers, fingerprints, accepted = self._settle(urls, lambda fps: store.finish_leases(fps, self.owner))
        if accepted:  # lasting now: the local filter may answer for them
            self.local_filter.add_hashes(fingerprints.hashes[accepted])
        self.counter.add(done=len(accepted), refused=len(answers) - len(accepted))
        return answers

    def release(self, urls: Sequence[URL]) -> List[bool]:
        store = lease_store(self.store, self.strategy)
        answers, _, accepted = self._settle(urls, lambda fps: store.release_leases(fps, self.owner))
        self.counter.add(released=len(accepted), refused=len(answers) - len(accepted))
        return answers

    def renew(self, urls: Sequence[URL], lease: float) -> List[bool]:
        check_lease_seconds(lease)
        store = lease_store(self.store, self.strategy)
        answers, _, accepted = self._settle(urls, lambda fps: store.renew_leases(fps, self.owner, lease))
        self.counter.add(renewed=len(accepted), refused=len(answers) - len(accepted))
        return answers

    def expired(self, limit: int, lease: Optional[float]) -> List[str]:
        store = lease_store(self.store, self.strategy)
        urls = store.expired_leases(limit, self.owner if lease is not None else None, lease)
        self.counter.add(expired=len(urls))
        return urls

    def _settle(
        self, urls: Sequence[URL], settle: Callable[[Fingerprints], List[bool]]
    ) -> Tuple[List[bool], Fingerprints, List[int]]:
        """Canonicalize ``urls`` and settle the valid ones in one call.

        :returns: per URL, whether it was settled (False when invalid or refused); the valid
            URLs' fingerprints; and the rows of those settled.
        """
        canonical, _ = canonicalize_many(urls, policy=self.policy)
        positions = [i for i, c in enumerate(canonical) if c is not None]
        answers = [False] * len(canonical)
        fingerprints = Fingerprints(hash_many([canonical[i] for i in positions]))
        accepted: List[int] = []
        if positions:
            for row, ok in enumerate(settle(fingerprints)):
                answers[positions[row]] = ok
                if ok:
                    accepted.append(row)
        return answers, fingerprints, accepted
