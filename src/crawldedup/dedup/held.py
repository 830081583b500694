"""Two-phase claims: a batch held until its pages are used, then committed or abandoned.

A page becomes *seen* (in the local filter, and lasting in the store) only when its batch is
committed, after the caller used the pages it won (the CLI: wrote and flushed their lines).
What a hold is in each store:

- no store (``local``): the local filter is only read; commit adds the pages to it.
- a store with leases (``set``, ``sharded-set``): the pages are won with a short lease; commit
  makes the leases lasting (``done``), abandon releases them. A lease that neither happens to
  (the process died) runs out and the pages come back to anyone's next claim.
- a store that can take a claim back (``sqlite``): the pages are won for good; abandon deletes
  the claims this batch won.
- a store that cannot (``redisbloom``): the pages are won for good; abandon hands their
  canonical URLs back to the caller (*stranded*), which must keep them somewhere.
"""

from __future__ import annotations

import enum
import threading
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..canonical import InvalidURL
from ..fingerprints import Fingerprints, take_rows
from ..stores.base import ClaimStore, StoreUnavailable
from .packed import pick
from .pipeline import Claimed
from .state import LocalState
from .stats import StatsCounter

#: Lease of a held page in a store with leases: the longest a written page waits for its commit
#: before another claim may win it again, and how long a process that died holds its pages.
HOLD_SECONDS = 60.0


class HoldState(enum.Enum):
    """Where a held batch is: held, then committed or abandoned (once)."""

    HELD = "held"
    COMMITTED = "committed"
    ABANDONED = "abandoned"


class HeldBatch:
    """A claimed batch whose pages are not seen yet: :meth:`commit` once they are used,
    :meth:`abandon` if they cannot be.

    As a context manager it commits when the block ends normally and abandons when it raises.

    :ivar won: per input URL, whether this caller won it (and now holds it).
    :ivar canonical: per input URL, its canonical form (None when invalid).
    :ivar errors: why the invalid ones were refused (``errors[i]``).
    :ivar held_until: when the leases of the won pages run out (seconds since the epoch, by the
        Deduplicator's clock; None where pages are not leased): a batch neither committed nor
        abandoned, or whose leases could not be released, holds its pages until then.
    """

    def __init__(
        self,
        won: List[bool],
        canonical: Sequence[Optional[str]],
        errors: Dict[int, InvalidURL],
        *,
        hashes: np.ndarray,
        valid: Sequence[str],
        claimed: Claimed,
        local_filter: LocalState,
        store: Optional[ClaimStore],
        leased: bool,
        owner: str,
        counter: StatsCounter,
        held_until: Optional[float] = None,
    ) -> None:
        self.won = won
        self.held_until = held_until
        self.canonical = canonical
        self.errors = errors
        self._hashes = hashes
        self._valid = valid
        self._claimed = claimed
        self._local_filter = local_filter
        self._store = store
        self._leased = leased
        self._owner = owner
        self._counter = counter
        self._lock = threading.Lock()
        self._state = HoldState.HELD

    @property
    def state(self) -> HoldState:
        """Held, committed or abandoned."""
        return self._state

    def won_canonical(self) -> List[str]:
        """The canonical forms of the URLs won, in input order (one per page)."""
        return pick(self._valid, self._claimed.won)

    def commit(self) -> None:
        """Make the won pages seen: lasting in the store, and in the local filter.

        A commit that raises leaves the batch held: call it again (a store that applied it
        answers the repeated call as it was applied), or let the leases run out.

        :raises ValueError: when the batch was already committed or abandoned.
        :raises StoreUnavailable: when the store stayed unreachable (the batch stays held).
        """
        with self._lock:
            self._check_held("commit")
            won = self._claimed.won
            learn = self._claimed.learn
            won_twice = 0
            if self._store is None:
                new = self._local_filter.add_hashes(take_rows(self._hashes, won)) if len(won) else np.zeros(0, bool)
                won_twice = int(len(new) - new.sum())
            else:
                if self._leased and len(won):
                    done = np.asarray(
                        self._store.finish_leases(Fingerprints(take_rows(self._hashes, won)), self._owner), dtype=bool
                    )
                    won_twice = int(len(done) - done.sum())
                    # Written, so seen here even where the lease was taken over meanwhile.
                    learn = np.concatenate([learn, won])
                if len(learn):
                    self._local_filter.add_hashes(take_rows(self._hashes, learn))
            self._state = HoldState.COMMITTED
        self._counter.add(committed=len(won), won_twice=won_twice)

    def abandon(self) -> List[str]:
        """Hand the won pages back, so that anyone's next claim wins them; nothing is learnt.

        Never raises for the store: a lease the store could not release runs out by itself.

        :returns: the canonical URLs of won pages that stay claimed in the store (*stranded*):
            all of them in a store that cannot take a claim back (RedisBloom), or those of a
            store that failed while taking them back. The caller must keep them.
        :raises ValueError: when the batch was already committed.
        """
        with self._lock:
            if self._state is HoldState.ABANDONED:
                return []
            self._check_held("abandon")
            won = self._claimed.won
            stranded: List[str] = []
            if self._store is not None and len(won):
                fingerprints = Fingerprints(take_rows(self._hashes, won))
                try:
                    if self._leased:
                        self._store.release_leases(fingerprints, self._owner)
                    elif self._store.supports_unclaim:
                        self._store.unclaim_many(fingerprints)
                    else:
                        stranded = pick(self._valid, won)
                except StoreUnavailable:
                    if not self._leased:
                        stranded = pick(self._valid, won)
            self._state = HoldState.ABANDONED
        self._counter.add(abandoned=len(won) - len(stranded), stranded=len(stranded))
        return stranded

    def _check_held(self, step: str) -> None:
        if self._state is not HoldState.HELD:
            raise ValueError(f"cannot {step} a batch that was {self._state.value}")

    def __enter__(self) -> HeldBatch:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if self._state is not HoldState.HELD:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abandon()

    def __repr__(self) -> str:
        return f"<HeldBatch {self._state.value} won={len(self._claimed.won)} of {len(self.won)}>"
