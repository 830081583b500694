"""The one small interface every claim store offers, and its bounded retries.

A store answers two questions for a batch of fingerprints, in one round trip per batch:
*claim* (test-and-set: True for exactly one caller ever) and *read* (is it already there?).
Stores that support leases (``supports_leases``) also claim for a limited time and settle
those claims later: done, released, renewed, or handed back once expired.
"""

from __future__ import annotations

import abc
import hashlib
import math
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable, ClassVar, Dict, List, NamedTuple, Optional, Sequence, Tuple, Type, TypeVar, Union

from .._checks import check_name, complaint, integer_in, number_in
from ..fingerprints import Fingerprints
from .._wording import counted
from ..windows import Clock, Window, system_clock

#: Version of the key/table layouts written by the stores (recorded with each namespace).
LAYOUT_VERSION = 1
_DIGEST_PATTERN = re.compile(r"[0-9a-f]{16}")
#: Longest lease: a day. A lease is for one fetch; a longer job renews it.
MAX_LEASE_SECONDS = 86_400
#: Most expired leases handed back by one call.
MAX_EXPIRED_LIMIT = 1_000_000
#: Random bytes of a call's token (see :meth:`ClaimStore._resumable`).
TOKEN_BYTES = 16
#: Tokens of failed calls a store keeps for the same call made again; the oldest goes first.
MAX_FAILED_CALLS = 64

T = TypeVar("T")
#: What the stores' methods take: a batch's :class:`~crawldedup.fingerprints.Fingerprints`, or
#: 16-byte strings (converted once on the way in).
FingerprintsLike = Union[Fingerprints, Sequence[bytes]]


class StoreUnavailable(ConnectionError):
    """A store could not answer a batch after the configured retries.

    Nothing was confirmed for the batch, so retrying the same batch later is correct (a store
    that may have applied it resumes it: see :meth:`ClaimStore._resumable`). The message names
    the store (with any password removed), the attempts and the last error.
    """

    def __init__(self, store: str, attempts: int, reason: str) -> None:
        self.store = store
        self.attempts = attempts
        self.reason = reason
        super().__init__(f"{store}: unavailable after {counted(attempts, 'attempt')} ({reason})")


class StoreRefused(StoreUnavailable):
    """The store answered with an error that retrying cannot fix, so it was not retried.

    A misconfiguration: a Redis without the module a store needs, a wrong or missing password,
    an ACL user without a command or key, a read-only replica, a full ``maxmemory``, keys of
    another type under the namespace, a SQLite path that is not a writable database. A subclass
    of :class:`StoreUnavailable`, so code that catches that one catches this one too; nothing
    was confirmed for the batch. ``problem`` says what is wrong and how to fix it; the message
    names the store, the problem and the store's own error (``reason``).
    """

    def __init__(self, store: str, attempts: int, reason: str, problem: str) -> None:
        super().__init__(store, attempts, reason)
        self.problem = problem
        self.args = (f"{store}: {problem} ({reason})",)


class NamespaceConflict(ValueError):
    """A namespace already holds claims made under another canonical policy or store layout."""


class LeasesUnsupported(ValueError):
    """The store cannot hold a claim for a limited time (only ``set`` and ``sharded-set`` can)."""


class ClaimAnswers(NamedTuple):
    """The answers of one round trip: per claimed fingerprint, whether this caller won it;
    per read fingerprint, whether the store already holds it; and the positions (among the
    claims) lost to another worker's open lease, which may come back if that worker dies."""

    won: List[bool]
    present: List[bool]
    held: Tuple[int, ...] = ()


class Lease(NamedTuple):
    """The terms of a claim for a limited time: who holds it, for how long, and the canonical
    URL of each claimed fingerprint (kept in the lease record, so that an expired claim can be
    handed back as a URL)."""

    owner: str
    seconds: float
    urls: Sequence[str]


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff for a store's transient errors.

    Attempt ``n`` (from 1) that fails waits ``min(max_backoff_seconds,
    backoff_seconds * 2 ** (n - 1))``, half of it fixed and half random (so that many
    workers do not reconnect in step), then tries again, ``retries`` times at most.

    :raises ValueError: when a field is out of range.
    """

    retries: int = 3
    backoff_seconds: float = 0.05
    max_backoff_seconds: float = 1.0

    def __post_init__(self) -> None:
        integer_in("retries", self.retries, 0, 100)
        for name in ("backoff_seconds", "max_backoff_seconds"):
            number_in(name, getattr(self, name), 0, 60, unit="a number of seconds")

    @property
    def attempts(self) -> int:
        """Attempts made before giving up: the first one plus the retries."""
        return self.retries + 1

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after the ``failed_attempt``-th attempt (from 1) failed."""
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * 2 ** (failed_attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def max_total_delay(self) -> float:
        """Upper bound of the time spent waiting between the attempts of one call."""
        return sum(min(self.max_backoff_seconds, self.backoff_seconds * 2 ** i) for i in range(self.retries))


def check_lease_seconds(seconds: float) -> int:
    """Validate a lease duration in seconds; returns it in whole milliseconds (at least 1).

    :raises ValueError: unless it is a number in (0, 86400].
    """
    seconds = number_in("lease", seconds, 0, MAX_LEASE_SECONDS, low_open=True, unit="a number of seconds")
    return max(1, math.ceil(seconds * 1000))


def check_limit(limit: int) -> int:
    """Validate the most expired leases one call hands back.

    :raises ValueError: unless it is an integer in [1, 1000000].
    """
    return integer_in("limit", limit, 1, MAX_EXPIRED_LIMIT)


def check_policy_digest(digest: str) -> str:
    """Validate a canonical policy digest (16 lowercase hex characters).

    :raises ValueError: for anything else.
    """
    if not isinstance(digest, str) or not _DIGEST_PATTERN.fullmatch(digest):
        raise ValueError(complaint("policy_digest", "16 lowercase hex characters", digest))
    return digest


class ClaimStore(abc.ABC):
    """A shared, authoritative answer to "has this fingerprint been claimed?".

    Subclasses implement :meth:`_exchange` (one round trip, may raise one of
    ``store_errors``) and :meth:`_refusal` (which of those are permanent); this class adds
    validation, retries and counters. Instances are safe to share between threads.
    """

    #: Errors the store's client reports about the store: the transient ones are retried, the
    #: permanent ones (:meth:`_refusal`) raised at once; anything else is a bug and propagates.
    store_errors: ClassVar[Tuple[Type[BaseException], ...]] = ()
    #: The strategy name users choose this store by (``set``, ``sharded-set``...): what every
    #: message shows.
    strategy: ClassVar[str] = ""
    #: The store's layout name, recorded with the namespace (``keys``, ``sharded-set``...). A
    #: stored format: it never changes, so namespaces made before a rename still open.
    kind: ClassVar[str] = ""
    #: Whether the store can hold claims for a limited time (leases).
    supports_leases: ClassVar[bool] = False
    #: Whether the store can take back a lasting claim (:meth:`unclaim_many`).
    supports_unclaim: ClassVar[bool] = False
    #: Namespace of the claims, and digest of the canonical policy their fingerprints follow.
    namespace: str
    policy_digest: str

    def __init__(self, retry: Optional[RetryPolicy] = None, window: Optional[Window] = None,
                 clock: Clock = system_clock) -> None:
        self.retry = retry if retry is not None else RetryPolicy()
        #: The recrawl window claims are forgotten after (None: never), and the time it reads.
        self.window = window
        self.clock = clock
        self.round_trips = 0
        self.failed_attempts = 0
        self._counter_lock = threading.Lock()
        #: Request digest -> token of the calls that raised StoreUnavailable (oldest first).
        self._failed_calls: Dict[bytes, bytes] = {}

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """Where the store lives, safe to print (no password)."""

    @abc.abstractmethod
    def _exchange(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes
    ) -> ClaimAnswers:
        """Claim ``claims`` (leased when ``lease`` is given) and read ``reads`` in one round trip.

        ``token`` is the same for every attempt of one call: a store whose attempt can be applied
        without its reply arriving answers a repeated attempt from what the first one recorded.
        """

    def _settle(self, action: str, fingerprints: Fingerprints, owner: str, lease_ms: int, token: bytes) -> List[bool]:
        """Settle the leases ``owner`` holds (``done``, ``release`` or ``renew``), one round trip
        (``token`` as in :meth:`_exchange`)."""
        raise self._no_leases()

    def _unclaim(self, fingerprints: Fingerprints) -> None:
        """Remove lasting claims, one round trip (only stores with :attr:`supports_unclaim`)."""
        raise NotImplementedError

    def _expired(self, limit: int, owner: str, lease_ms: int) -> List[str]:
        """Hand back up to ``limit`` expired leases (re-leased to ``owner`` when ``lease_ms``)."""
        raise self._no_leases()

    def _no_leases(self) -> LeasesUnsupported:
        return LeasesUnsupported(
            f"the {self.strategy} store cannot hold leases (claims for a limited time): "
            f"use the set or sharded-set store"
        )

    @abc.abstractmethod
    def bytes_per_url(self) -> Optional[float]:
        """Storage bytes per claimed URL, measured on the live store; None when unknowable.

        :raises StoreUnavailable: when the store cannot be reached.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; further calls fail."""

    def _redact(self, text: str) -> str:
        """Remove secrets (a password from the connection URL) from an error text."""
        return text

    def _refusal(self, error: BaseException) -> Optional[str]:
        """What is wrong, and how to fix it, when ``error`` (one of :attr:`store_errors`) is
        permanent; None when it is transient (worth another attempt)."""
        return None

    def _reason(self, error: BaseException) -> str:
        """``error`` on one line for a message: its type and text, without secrets."""
        return self._redact(f"{type(error).__name__}: {' '.join(str(error).split())}")

    def claim_and_read(
        self, claims: FingerprintsLike, reads: FingerprintsLike = (), *, lease: Optional[Lease] = None
    ) -> ClaimAnswers:
        """Claim some fingerprints and read others, in one round trip.

        A fingerprint listed twice among ``claims`` is won at most once. A claim whose lease
        expired (or was handed back by :meth:`expired_leases`) can be won again by anyone.

        :param claims: fingerprints to test-and-set (:class:`~crawldedup.fingerprints.Fingerprints`
            or 16-byte strings).
        :param reads: fingerprints to look up without claiming.
        :param lease: claim for ``lease.seconds`` only, held by ``lease.owner``, until
            :meth:`finish_leases` (or :meth:`release_leases`); ``lease.urls[i]`` is the
            canonical URL of ``claims[i]``.
        :returns: per claim, True when this caller won it; per read, True when present; the
            claims lost to another worker's open lease.
        :raises TypeError: for a fingerprint that is not bytes.
        :raises ValueError: for a fingerprint that is not 16 bytes long, or bad lease terms.
        :raises LeasesUnsupported: for a lease on a store without leases.
        :raises StoreUnavailable: after the retries of :attr:`retry` failed.
        """
        claims, reads = Fingerprints.of(claims), Fingerprints.of(reads)
        if lease is not None:
            if not self.supports_leases:
                raise self._no_leases()
            check_name("owner", lease.owner)
            check_lease_seconds(lease.seconds)
            if len(lease.urls) != len(claims) or not all(isinstance(u, str) and u for u in lease.urls):
                raise ValueError(f"lease.urls must hold one non-empty str per claim ({len(claims)}), got {len(lease.urls)}")
        if not claims and not reads:
            return ClaimAnswers([], [])
        request = ("claim", lease.owner if lease else "", repr(lease.seconds) if lease else "", claims)
        return self._resumable(request, lambda token: self._exchange(claims, reads, lease, token))

    def finish_leases(self, fingerprints: FingerprintsLike, owner: str) -> List[bool]:
        """Turn leases held by ``owner`` into lasting claims (visited for the store's TTL).

        :returns: per fingerprint, True when done; False when refused: ``owner`` does not
            hold that lease (never leased, released, handed back after expiring, or taken over
            by another worker). A lease past its deadline that nobody took over is still done.
        :raises LeasesUnsupported: on a store without leases.
        :raises StoreUnavailable: after the retries failed.
        """
        return self._settle_checked("done", fingerprints, owner, None)

    def release_leases(self, fingerprints: FingerprintsLike, owner: str) -> List[bool]:
        """Free leases held by ``owner`` (a failed fetch to retry): anyone can claim them again.

        :returns: per fingerprint, True when released, False when ``owner`` did not hold it.
        :raises LeasesUnsupported: on a store without leases.
        :raises StoreUnavailable: after the retries failed.
        """
        return self._settle_checked("release", fingerprints, owner, None)

    def renew_leases(self, fingerprints: FingerprintsLike, owner: str, seconds: float) -> List[bool]:
        """Move the deadline of leases held by ``owner`` to ``seconds`` from now (Redis's clock).

        :returns: per fingerprint, True when renewed, False when ``owner`` did not hold it.
        :raises ValueError: for a duration out of (0, 86400].
        :raises LeasesUnsupported: on a store without leases.
        :raises StoreUnavailable: after the retries failed.
        """
        return self._settle_checked("renew", fingerprints, owner, seconds)

    def expired_leases(self, limit: int, owner: Optional[str] = None, seconds: Optional[float] = None) -> List[str]:
        """Hand back, once each, up to ``limit`` leases whose deadline passed: their canonical URLs.

        Without ``seconds`` the claims become free (anyone's next claim wins them); with it,
        they are leased again to ``owner`` in the same step, so nothing can slip in between.

        :raises ValueError: for a limit out of [1, 1000000], or ``seconds`` without ``owner``.
        :raises LeasesUnsupported: on a store without leases.
        :raises StoreUnavailable: after the retries failed.
        """
        check_limit(limit)
        if not self.supports_leases:
            raise self._no_leases()
        lease_ms = 0
        if seconds is not None:
            if owner is None:
                raise ValueError("expired leases can only be leased again to an owner: give owner with seconds")
            check_name("owner", owner)
            lease_ms = check_lease_seconds(seconds)
        return self._with_retries(lambda: self._expired(limit, owner or "", lease_ms))

    def _settle_checked(self, action: str, fingerprints: FingerprintsLike, owner: str, seconds: Optional[float]) -> List[bool]:
        fingerprints = Fingerprints.of(fingerprints)
        if not self.supports_leases:
            raise self._no_leases()
        check_name("owner", owner)
        lease_ms = check_lease_seconds(seconds) if seconds is not None else 0
        if not fingerprints:
            return []
        request = (action, owner, str(lease_ms), fingerprints)
        return self._resumable(request, lambda token: self._settle(action, fingerprints, owner, lease_ms, token))

    def claim_many(self, fingerprints: FingerprintsLike) -> List[bool]:
        """Claim fingerprints; True where this caller won (see :meth:`claim_and_read`)."""
        return self.claim_and_read(fingerprints, ()).won

    def unclaim_many(self, fingerprints: FingerprintsLike) -> None:
        """Take back lasting claims this caller won and could not use (a page it failed to write),
        so that anyone's next claim wins them again. Only stores with :attr:`supports_unclaim`.

        :raises ValueError: on a store that cannot take a claim back.
        :raises StoreUnavailable: after the retries failed.
        """
        fingerprints = Fingerprints.of(fingerprints)
        if not self.supports_unclaim:
            raise ValueError(f"the {self.strategy} store cannot take back a claim")
        if len(fingerprints):
            self._with_retries(lambda: self._unclaim(fingerprints))

    def contains_many(self, fingerprints: FingerprintsLike) -> List[bool]:
        """Read fingerprints; True where already claimed (see :meth:`claim_and_read`)."""
        return self.claim_and_read((), fingerprints).present

    def _resumable(self, request: Tuple[str, str, str, Fingerprints], call: Callable[[bytes], T]) -> T:
        """Run ``call(token)`` under the retry policy, with one token for all its attempts.

        The token is random, unless the same request (the same step, owner, terms and claimed
        fingerprints) raised :class:`StoreUnavailable` before: then the new call takes that
        call's token and resumes it, so a claim the store applied without its reply arriving is
        answered as it was applied (won), not as already taken by someone else.
        """
        digest = hashlib.blake2b(digest_size=16)
        for text in request[:3]:
            digest.update(text.encode("utf-8") + b"\0")
        digest.update(request[3].tobytes())
        key = digest.digest()
        with self._counter_lock:
            token = self._failed_calls.pop(key, None) or os.urandom(TOKEN_BYTES)
        try:
            return self._with_retries(lambda: call(token))
        except StoreUnavailable:
            with self._counter_lock:
                self._failed_calls[key] = token
                if len(self._failed_calls) > MAX_FAILED_CALLS:
                    del self._failed_calls[next(iter(self._failed_calls))]
            raise

    def round_trip(self, call: Callable[[], T]) -> T:
        """Run ``call``, one exchange of another layer over this store's connection or file (the
        pages of content checks), under this store's retries and error messages.

        :raises StoreRefused: at the first permanent error.
        :raises StoreUnavailable: when every attempt failed with a transient error.
        """
        return self._with_retries(call)

    def _with_retries(self, call: Callable[[], T]) -> T:
        """Run ``call`` under the retry policy; count round trips and failures.

        :raises StoreRefused: at the first permanent error (see :meth:`_refusal`).
        :raises StoreUnavailable: when every attempt failed with a transient error.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                result = call()
            except self.store_errors as exc:
                with self._counter_lock:
                    self.failed_attempts += 1
                problem = self._refusal(exc)
                if problem is not None:  # permanent: another attempt would get the same answer
                    raise StoreRefused(self.description, attempt, self._reason(exc), self._redact(problem)) from exc
                if attempt >= self.retry.attempts:
                    raise StoreUnavailable(self.description, attempt, self._reason(exc)) from exc
                time.sleep(self.retry.delay(attempt))
                continue
            with self._counter_lock:
                self.round_trips += 1
            return result

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}>"
