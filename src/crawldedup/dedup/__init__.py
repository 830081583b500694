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
(the counters), ``held.py`` (two-phase claims), ``deduplicator.py`` and ``aio.py`` (the blocking and
the asyncio Deduplicator that put them together); this module is their face.
"""

from .aio import AsyncDeduplicator
from .core import DEFAULT_SAMPLE_RATE, KEY_DOMAIN, ClaimBatch, Prepared, prepare_batch, prepare_canonical
from .deduplicator import Deduplicator
from .held import HeldBatch, HoldState
from .state import open_state
from .stats import DedupStats, StatsListener

__all__ = [
    "DEFAULT_SAMPLE_RATE",
    "KEY_DOMAIN",
    "AsyncDeduplicator",
    "ClaimBatch",
    "DedupStats",
    "Deduplicator",
    "HeldBatch",
    "HoldState",
    "Prepared",
    "StatsListener",
    "open_state",
    "prepare_batch",
    "prepare_canonical",
]
