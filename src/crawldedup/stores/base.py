"""The one small interface every claim store offers, and its bounded retries.

A store answers two questions for a batch of fingerprints, in one round trip per batch:
*claim* (test-and-set: True for exactly one caller ever) and *read* (is it already there?).
Stores that support leases (``supports_leases``) also claim for a limited time and settle
those claims later: done, released, renewed, or handed back once expired.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
import importlib
import math
import os
import random
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    Generic,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from .._checks import check_name, complaint, integer_in, number_in
from .._plans import Plan, drive, together
from .._wording import counted
from ..canonical.policy import policy_conflict
from ..fingerprints import Fingerprints
from ..windows import Clock, Window, system_clock
from .aliases import Aliases, AliasesUnsupported, unsupported
from .urls import redact_text

#: Version of the key/table layouts written by the stores (recorded with each namespace).
LAYOUT_VERSION = 1
_DIGEST_PATTERN = re.compile(r"[0-9a-f]{16}")
#: Longest lease: a day. A lease is for one fetch; a longer job renews it.
MAX_LEASE_SECONDS = 86_400
#: Most expired leases handed back by one call.
MAX_EXPIRED_LIMIT = 1_000_000
#: Random bytes of a call's token (see :meth:`ClaimStore._call_token`).
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
    that may have applied it resumes it: see :meth:`ClaimStore._call_token`). The message names
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
    """A namespace already holds claims made under another canonical policy, store layout or
    recrawl window."""


def window_stamp(window: Optional[Window]) -> str:
    """The namespace record's text for a recrawl window: ``"<seconds>/<generations>"``, or
    ``"none"`` for claims that never expire."""
    return "none" if window is None else f"{window.seconds!r}/{window.generations}"


def window_of_stamp(stamp: Optional[str]) -> Optional[Window]:
    """The recrawl window a namespace record stamps (None for ``"none"`` or no stamp): what a
    tool that reads a namespace, rather than joining it as a worker, opens it with.

    :raises ValueError: for a stamp that is not a window.
    """
    if stamp is None or stamp == "none":
        return None
    seconds, generations = stamp.split("/")
    return Window(float(seconds), int(generations))


def _stamp_words(stamp: str) -> str:
    try:
        window = window_of_stamp(stamp)
    except ValueError:
        return f"the recrawl window {stamp!r}"
    return "claims kept for ever (ttl_days 0)" if window is None else f"a recrawl window of {window.describe()}"


def check_window_stamp(where: str, stored: Optional[str], window: Optional[Window]) -> None:
    """Refuse a namespace whose record stamps another recrawl window than ``window``; a record
    without the stamp (a namespace made before it existed) is taken as it is.

    :raises NamespaceConflict: naming both windows.
    """
    ours = window_stamp(window)
    if stored is not None and stored != ours:
        raise NamespaceConflict(
            f"{where} was made for {_stamp_words(stored)}, this store uses {_stamp_words(ours)}: "
            "give every worker the same ttl_days and generations, or pick another namespace "
            "(or round)"
        )


class StoreEntry(NamedTuple):
    """One store of the registry: what users choose it by, what its namespaces record, and where
    its class lives (imported on first use, so that naming a strategy imports no server client)."""

    #: The strategy name users choose the store by (``set``, ``sharded-set``...).
    strategy: str
    #: The layout name namespace records hold (``keys``...): a stored format, never changed.
    kind: str
    #: The module of :mod:`crawldedup.stores` that defines the store, and its class.
    module: str
    class_name: str
    #: Where its claims live: ``redis`` (``redis_url``), ``sqlite``, ``postgres`` or ``service``.
    family: str
    #: Whether it can hold claims for a limited time (leases) itself.
    leases: bool

    def load(self) -> Type[ClaimStore]:
        """The store's class (its module imported now)."""
        store: Type[ClaimStore] = getattr(importlib.import_module(f"{__package__}.{self.module}"), self.class_name)
        return store


#: The one registry of stores, in the order documentation lists them. Every list of strategies
#: (the settings' check, the CLI's choices, messages about leases and namespace records)
#: derives from it; ``tests/test_stores.py`` holds each entry to its class's own attributes.
STORES: Tuple[StoreEntry, ...] = (
    StoreEntry("set", "keys", "redis_keys", "RedisKeyStore", "redis", True),
    StoreEntry("sharded-set", "sharded-set", "sharded_set", "RedisShardedSetStore", "redis", True),
    StoreEntry("redisbloom", "bloom", "redisbloom", "RedisBloomStore", "redis", False),
    StoreEntry("sqlite", "sqlite", "sqlite", "SQLiteStore", "sqlite", False),
    StoreEntry("postgres", "postgres", "postgres", "PostgresStore", "postgres", False),
    StoreEntry("service", "service", "service", "ServiceStore", "service", False),
)
#: Store kind (as namespace records hold it) -> its strategy name, for messages about a record.
STRATEGY_OF_KIND: Dict[str, str] = {entry.kind: entry.strategy for entry in STORES}


def required(value: Optional[T], strategy: str, name: str, variable: str) -> T:
    """``value``, the location option ``name`` (setting ``variable``) a store of ``strategy``
    cannot open without.

    :raises ValueError: naming the option and its setting when it is missing.
    """
    if value is None:
        raise ValueError(f"the {strategy} strategy needs {name} ({variable})")
    return value


@dataclass(frozen=True)
class StoreOptions:
    """Everything a store may be opened with; each store's :meth:`ClaimStore.from_options` takes
    what it needs (and refuses the options it lacks)."""

    @staticmethod
    def given(options: object) -> StoreOptions:
        """``options``, checked to be store options.

        :raises TypeError: for anything else.
        """
        if not isinstance(options, StoreOptions):
            raise TypeError(f"options must be StoreOptions, got {type(options).__name__}")
        return options

    namespace: str
    policy_digest: str
    capacity: int
    error_rate: float
    redis_url: Optional[str] = None
    sqlite_path: Optional[Union[str, os.PathLike[str]]] = None
    service_url: Optional[str] = None
    postgres_url: Optional[str] = None
    ttl_seconds: Optional[int] = None
    retry: Optional[RetryPolicy] = None
    window: Optional[Window] = None
    clock: Clock = system_clock
    asynchronous: bool = False
    durability: Optional[Any] = None  # a stores.durability.Durability
    #: How a new windowed ``sharded-set`` namespace keeps its claims (None: the best there is).
    window_layout: Optional[str] = None

    def common(self) -> Dict[str, Any]:
        """The keyword arguments every store's constructor takes."""
        return {
            "namespace": self.namespace,
            "policy_digest": self.policy_digest,
            "retry": self.retry,
            "window": self.window,
            "clock": self.clock,
            "asynchronous": self.asynchronous,
        }


def check_namespace_fields(
    where: str, fields: Sequence[str], stored: Sequence[Any], ours: Sequence[Any], *, pages: bool = False
) -> None:
    """Refuse a namespace record whose ``fields`` hold ``stored``, not ``ours``, naming the first
    that differs (a canonical policy by its name, with the setting that continues its crawl; a
    store by its strategy). ``where`` names the namespace (``"<place>: namespace 'x'"``), or
    with ``pages`` its pages (``"<place>: the pages of namespace 'x'"``).

    :raises NamespaceConflict: naming the field, its stored value and ours.
    """
    made, holds, user = ("were made", "hold", "this crawl") if pages else ("was made", "holds", "this store")
    for field, value, wanted in zip(fields, stored, ours):
        if value == wanted:
            continue
        if field in ("policy", "canonical_policy"):
            raise NamespaceConflict(f"{where} {made} with {policy_conflict(str(value), str(wanted))}")
        if field == "store" and str(wanted) in STRATEGY_OF_KIND:
            theirs = STRATEGY_OF_KIND.get(str(value), f"store={value!r}")
            raise NamespaceConflict(
                f"{where} {holds} the claims of the {theirs} strategy, this is the "
                f"{STRATEGY_OF_KIND[str(wanted)]} strategy: pick another namespace (or round)"
            )
        raise NamespaceConflict(
            f"{where} {holds} {field}={value!r}, {user} uses {field}={wanted!r}: pick another namespace (or round)"
        )


@dataclass(frozen=True)
class ServerFacts:
    """What serves a store, and the room it leaves for claims (``crawldedup doctor`` shows them).

    :ivar software: name and version, such as ``Redis 7.0.15`` or ``SQLite 3.40.1``.
    :ivar modules: the server's modules with their versions, such as ``bf 2.8.2``.
    :ivar used_bytes: memory in use (Redis), the database file's pages in use (SQLite), the
        database's size (PostgreSQL).
    :ivar limit_bytes: the most the store can grow to: ``maxmemory``, the machine's memory when
        no maxmemory is set (Redis); the file's size plus the free disk space (SQLite); None
        when the server does not say (PostgreSQL does not tell a client its free disk space).
    :ivar limit: what ``limit_bytes`` is, in words.
    """

    software: str
    modules: Tuple[str, ...]
    used_bytes: int
    limit_bytes: Optional[int]
    limit: str


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
        """Seconds to wait after the ``failed_attempt``-th attempt (from 1) failed.

        :raises TypeError: for an attempt that is not an integer.
        :raises ValueError: for an attempt below 1.
        """
        integer_in("failed_attempt", failed_attempt, 1, 2**31 - 1, "2**31 - 1")
        # Doublings as shifts: an int to the checker too (it types ``int ** int`` as Any, for negative powers).
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * (1 << (failed_attempt - 1)))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def max_total_delay(self) -> float:
        """Upper bound of the time spent waiting between the attempts of one call."""
        return sum(min(self.max_backoff_seconds, self.backoff_seconds * (1 << i)) for i in range(self.retries))


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


@dataclass(frozen=True)
class StoreCall(Generic[T]):
    """One operation of a store, as data: each attempt runs ``plan(token)``, a plan (see
    :mod:`crawldedup._plans`) whose requests the store's channel sends, sync or async.

    :ivar plan: the plan of one attempt, given the call's token (the same for all its attempts).
    :ivar resume_key: digest of the request, for calls a store may apply without its reply
        arriving: the same request made again after :class:`StoreUnavailable` (or a
        cancellation) takes the failed call's token and resumes it. None: a fresh token.
    """

    plan: Callable[[bytes], Plan[T]]
    resume_key: Optional[bytes] = None
    #: Fingerprints the call carries: the async store builds and reads a large call's requests
    #: in its worker thread rather than on the event loop.
    size: int = 0


def request_key(step: str, owner: str, terms: str, fingerprints: Fingerprints) -> bytes:
    """The digest that names a request: its step, owner, terms and claimed fingerprints."""
    digest = hashlib.blake2b(digest_size=16)
    for text in (step, owner, terms):
        digest.update(text.encode("utf-8") + b"\0")
    digest.update(fingerprints.tobytes())
    return digest.digest()


class ClaimStore(abc.ABC):
    """A shared, authoritative answer to "has this fingerprint been claimed?".

    A store is its logic, written once as plans (sans I/O: validation, the requests of a batch,
    how to read their replies, retries, tokens, counters), and two thin I/O halves: the sync
    one here (:meth:`_send`, driven by the public methods) and the async one
    (:meth:`_asend`, driven by :class:`~crawldedup.stores.aio.AsyncClaimStore`). A store made
    with ``asynchronous=True`` opens nothing when constructed and is used through that class.

    Subclasses write the plans (:meth:`_exchange`, and :meth:`_settle`, :meth:`_expired`,
    :meth:`_unclaim`, :meth:`_open` as they support them), the channel (:meth:`_send`,
    :meth:`_asend`, connecting and closing) and :meth:`_refusal` (which of ``store_errors``
    are permanent). Instances are safe to share between threads.
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
    #: Whether the store keeps the alias map of redirects (:mod:`crawldedup.stores.aliases`).
    supports_aliases: ClassVar[bool] = False
    #: Namespace of the claims, and digest of the canonical policy their fingerprints follow.
    namespace: str
    policy_digest: str

    def __init__(
        self,
        retry: Optional[RetryPolicy] = None,
        window: Optional[Window] = None,
        clock: Clock = system_clock,
        *,
        asynchronous: bool = False,
    ) -> None:
        self.retry = retry if retry is not None else RetryPolicy()
        #: The recrawl window claims are forgotten after (None: never), and the time it reads.
        self.window = window
        self.clock = clock
        #: Whether the store speaks asyncio (through AsyncClaimStore) rather than blocking calls.
        self.asynchronous = asynchronous
        self.round_trips = 0
        self.failed_attempts = 0
        self._counter_lock = threading.Lock()
        #: Request digest -> token of the calls that raised StoreUnavailable (oldest first).
        self._failed_calls: Dict[bytes, bytes] = {}

    @classmethod
    @abc.abstractmethod
    def from_options(cls, options: StoreOptions) -> ClaimStore:
        """The store ``options`` describe (what :func:`~crawldedup.stores.factory.open_store` opens).

        :raises TypeError: for ``options`` that are not :class:`StoreOptions`.
        :raises ValueError: when an option the store needs is missing or wrong.
        """

    # -- what operators' tools ask beyond claims (crawldedup doctor, stats) --------------------

    @classmethod
    def read_record(cls, namespace: str, location: Any) -> Optional[Dict[str, str]]:
        """The record of ``namespace`` (its layout, store kind, policy...) at ``location`` (the
        store's URL or file), read without creating it; None when the namespace does not exist.

        :raises ValueError: for a location the store cannot read (a ``WrongType``, also a
            ``TypeError``, for one of the wrong type).
        :raises StoreUnavailable: when the server or file cannot be read.
        """
        raise ValueError(f"the {cls.strategy} store keeps no namespace record to read")

    def server_facts(self) -> ServerFacts:
        """Ask the server (or file) behind the store what it runs and how much room it has.

        :raises StoreUnavailable: when the server cannot be reached.
        """
        raise ValueError(f"the {self.strategy} store has no server to describe")

    def delete_namespace(self) -> int:
        """Delete every claim, lease and record of the namespace (not its rounds' or any other
        namespace's); the store is unusable afterwards: close it.

        :returns: the keys (Redis) or rows (SQLite, PostgreSQL) deleted.
        :raises StoreUnavailable: when the server cannot be reached.
        """
        raise ValueError(f"the {self.strategy} store cannot delete a namespace")

    def count_claims(self) -> int:
        """Claims the namespace holds.

        :raises StoreUnavailable: when the server cannot be reached.
        """
        raise ValueError(f"the {self.strategy} store cannot count its claims")

    def lease_counts(self) -> Optional[Tuple[int, int]]:
        """Leases of the namespace: (open, past their deadline and not yet handed back), by the
        server's clock; None for a store without leases of its own."""
        return None

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """Where the store lives, safe to print (no password)."""

    # -- the plans (sans I/O), shared by the sync and the async store --------------------------

    @abc.abstractmethod
    def _exchange(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes
    ) -> Plan[ClaimAnswers]:
        """Claim ``claims`` (leased when ``lease`` is given) and read ``reads`` in one round trip.

        ``token`` is the same for every attempt of one call: a store whose attempt can be applied
        without its reply arriving answers a repeated attempt from what the first one recorded.
        """

    def _settle(
        self, action: str, fingerprints: Fingerprints, owner: str, lease_ms: int, token: bytes
    ) -> Plan[List[bool]]:
        """Settle the leases ``owner`` holds (``done``, ``release`` or ``renew``), one round trip
        (``token`` as in :meth:`_exchange`)."""
        raise self._no_leases()

    def _unclaim(self, fingerprints: Fingerprints) -> Plan[None]:
        """Remove lasting claims, one round trip (only stores with :attr:`supports_unclaim`)."""
        raise NotImplementedError

    def _expired(self, limit: int, owner: str, lease_ms: int) -> Plan[List[str]]:
        """Hand back up to ``limit`` expired leases (re-leased to ``owner`` when ``lease_ms``)."""
        raise self._no_leases()

    def _record_aliases(self, aliases: Aliases) -> Plan[None]:
        """Record ``aliases`` in the alias map, one request (only stores with :attr:`supports_aliases`)."""
        raise self._no_aliases()

    def _read_aliases(self, fingerprints: Fingerprints) -> Plan[List[Optional[bytes]]]:
        """The live final fingerprint each requested fingerprint is an alias of (None: no alias)."""
        raise self._no_aliases()

    def _joined(self, first: Any, second: Any) -> Tuple[Any, Callable[[Any], Tuple[Any, Any]]]:
        """One request of the store's channel carrying ``first`` and ``second``, and how to split
        its reply (see :func:`crawldedup._plans.together`); stores with aliases give it."""
        raise NotImplementedError

    def _exchange_recording(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes, aliases: Aliases
    ) -> Plan[ClaimAnswers]:
        """:meth:`_exchange` and :meth:`_record_aliases` in one request (one round trip)."""
        answers, _ = yield from together(
            self._exchange(claims, reads, lease, token), self._record_aliases(aliases), self._joined
        )
        return answers

    def _open(self) -> Plan[None]:
        """Open the namespace once connected (create its record, or check ours against it)."""
        return
        yield  # a plan without requests

    def _measure(self) -> Union[StoreCall[Optional[float]], Optional[float]]:
        """How :meth:`bytes_per_url` measures: a call, or the answer when no I/O can tell."""
        return None

    # -- the calls: arguments checked, one StoreCall (or the answer when nothing is to send) ---

    def _claim_call(
        self,
        claims: FingerprintsLike,
        reads: FingerprintsLike,
        lease: Optional[Lease],
        aliases: Optional[Aliases] = None,
    ) -> Union[StoreCall[ClaimAnswers], ClaimAnswers]:
        claims, reads = Fingerprints.of(claims), Fingerprints.of(reads)
        if aliases is not None:
            if not self.supports_aliases:
                raise self._no_aliases()
            if len(aliases.requested) != len(aliases.finals):
                raise ValueError(
                    f"aliases must pair each requested fingerprint ({len(aliases.requested)}) "
                    f"with a final one, got {len(aliases.finals)}"
                )
            if not len(aliases.requested):
                aliases = None
        if lease is not None:
            if not self.supports_leases:
                raise self._no_leases()
            check_name("owner", lease.owner)
            check_lease_seconds(lease.seconds)
            if len(lease.urls) != len(claims) or not all(isinstance(u, str) and u for u in lease.urls):
                raise ValueError(
                    f"lease.urls must hold one non-empty str per claim ({len(claims)}), got {len(lease.urls)}"
                )
        if not claims and not reads:
            if aliases is None:
                return ClaimAnswers([], [])
            recorded = aliases
            return StoreCall(lambda _token: self._recorded(recorded), size=len(recorded.requested))
        key = request_key("claim", lease.owner if lease else "", repr(lease.seconds) if lease else "", claims)
        if aliases is not None:
            with_aliases = aliases
            return StoreCall(
                lambda token: self._exchange_recording(claims, reads, lease, token, with_aliases),
                key,
                len(claims) + len(reads) + len(with_aliases.requested),
            )
        return StoreCall(lambda token: self._exchange(claims, reads, lease, token), key, len(claims) + len(reads))

    def _recorded(self, aliases: Aliases) -> Plan[ClaimAnswers]:
        yield from self._record_aliases(aliases)
        return ClaimAnswers([], [])

    def _aliases_call(
        self, fingerprints: FingerprintsLike
    ) -> Union[StoreCall[List[Optional[bytes]]], List[Optional[bytes]]]:
        fingerprints = Fingerprints.of(fingerprints)
        if not self.supports_aliases:
            raise self._no_aliases()
        if not fingerprints:
            return []
        return StoreCall(lambda _token: self._read_aliases(fingerprints), size=len(fingerprints))

    def _settle_call(
        self, action: str, fingerprints: FingerprintsLike, owner: str, seconds: Optional[float]
    ) -> Union[StoreCall[List[bool]], List[bool]]:
        fingerprints = Fingerprints.of(fingerprints)
        if not self.supports_leases:
            raise self._no_leases()
        check_name("owner", owner)
        lease_ms = check_lease_seconds(seconds) if seconds is not None else 0
        if not fingerprints:
            return []
        key = request_key(action, owner, str(lease_ms), fingerprints)
        return StoreCall(
            lambda token: self._settle(action, fingerprints, owner, lease_ms, token), key, len(fingerprints)
        )

    def _expired_call(self, limit: int, owner: Optional[str], seconds: Optional[float]) -> StoreCall[List[str]]:
        check_limit(limit)
        if not self.supports_leases:
            raise self._no_leases()
        lease_ms = 0
        if seconds is not None:
            if owner is None:
                raise ValueError("expired leases can only be leased again to an owner: give owner with seconds")
            check_name("owner", owner)
            lease_ms = check_lease_seconds(seconds)
        return StoreCall(lambda _token: self._expired(limit, owner or "", lease_ms), size=limit)

    def _unclaim_call(self, fingerprints: FingerprintsLike) -> Union[StoreCall[None], None]:
        fingerprints = Fingerprints.of(fingerprints)
        if not self.supports_unclaim:
            raise ValueError(f"the {self.strategy} store cannot take back a claim")
        return (
            StoreCall(lambda _token: self._unclaim(fingerprints), size=len(fingerprints)) if len(fingerprints) else None
        )

    def _no_aliases(self) -> AliasesUnsupported:
        return unsupported(self.strategy)

    def _no_leases(self) -> LeasesUnsupported:
        return LeasesUnsupported(
            f"the {self.strategy} store cannot hold leases (claims for a limited time): "
            f"use the set or sharded-set store"
        )

    # -- errors, retries and tokens, shared by both drivers ------------------------------------

    def _redact(self, text: str) -> str:
        """``text`` with the passwords it may hold hidden (:func:`~crawldedup.stores.urls.redact_text`):
        a store with a password of its own names it."""
        return redact_text(text)

    def _refusal(self, error: BaseException) -> Optional[str]:
        """What is wrong, and how to fix it, when ``error`` (one of :attr:`store_errors`) is
        permanent; None when it is transient (worth another attempt)."""
        return None

    def _reason(self, error: BaseException) -> str:
        """``error`` on one line for a message: its type and text, without secrets."""
        return self._redact(f"{type(error).__name__}: {' '.join(str(error).split())}")

    def _failed_attempt(self, error: BaseException, attempt: int) -> float:
        """Count the failed ``attempt`` (from 1); the seconds to wait before the next one.

        :raises StoreRefused: for a permanent error (see :meth:`_refusal`).
        :raises StoreUnavailable: when that was the last attempt.
        """
        with self._counter_lock:
            self.failed_attempts += 1
        problem = self._refusal(error)
        if problem is not None:  # permanent: another attempt would get the same answer
            raise StoreRefused(self.description, attempt, self._reason(error), self._redact(problem)) from error
        if attempt >= self.retry.attempts:
            raise StoreUnavailable(self.description, attempt, self._reason(error)) from error
        return self.retry.delay(attempt)

    def _answered(self) -> None:
        with self._counter_lock:
            self.round_trips += 1

    @contextmanager
    def _call_token(self, resume_key: Optional[bytes], given: Optional[bytes] = None) -> Iterator[bytes]:
        """The token of one call: ``given`` (a caller that keeps its own across its retries, as
        the fingerprint service's clients do), or random unless the same request
        (``resume_key``) failed before.

        A request that raised :class:`StoreUnavailable`, or whose caller was cancelled while it
        was in flight, leaves its token here; the same request made again takes it and resumes
        the call, so a claim the store applied without its reply arriving is answered as it was
        applied (won), not as already taken by someone else.
        """
        if given is not None:
            yield given
            return
        token: Optional[bytes] = None
        if resume_key is not None:
            with self._counter_lock:
                token = self._failed_calls.pop(resume_key, None)
        token = token or os.urandom(TOKEN_BYTES)
        try:
            yield token
        except (StoreUnavailable, asyncio.CancelledError):
            if resume_key is not None:
                with self._counter_lock:
                    self._failed_calls[resume_key] = token
                    if len(self._failed_calls) > MAX_FAILED_CALLS:
                        del self._failed_calls[next(iter(self._failed_calls))]
            raise

    # -- the sync driver -----------------------------------------------------------------------

    def _send(self, request: Any) -> Any:
        """Send one request of a plan and return its reply (the sync channel)."""
        raise NotImplementedError

    async def _aconnect(self) -> None:  # noqa: B027 (a store without a connection keeps this)
        """Connect the async channel (once; a store made asynchronous connects nothing before)."""

    async def _asend(self, request: Any) -> Any:
        """Send one request of a plan and return its reply (the async channel)."""
        raise NotImplementedError

    def perform(self, call: StoreCall[T]) -> T:
        """Run another layer's call (the page exchanges of content checks, a namespace's seed)
        over this store's channel, under its retries, error messages and tokens (a call with a
        ``resume_key`` that raised :class:`StoreUnavailable` is resumed when made again).

        :raises TypeError: for a ``call`` that is not a :class:`StoreCall`.
        :raises StoreRefused: at the first permanent error.
        :raises StoreUnavailable: when every attempt failed with a transient error.
        """
        if not isinstance(call, StoreCall):
            raise TypeError(f"call must be a StoreCall, got {type(call).__name__}")
        if self.asynchronous:
            raise TypeError(f"{self.description} was opened for asyncio: use it through AsyncClaimStore")
        plan = call.plan
        with self._call_token(call.resume_key) as token:
            return self.with_retries(lambda: drive(plan(token), self._send))

    def with_retries(self, call: Callable[[], T]) -> T:
        """Run ``call`` under the retry policy; count round trips and failures.

        :raises TypeError: for a ``call`` that is not callable.
        :raises StoreRefused: at the first permanent error (see :meth:`_refusal`).
        :raises StoreUnavailable: when every attempt failed with a transient error.
        """
        if not callable(call):
            raise TypeError(f"call must be callable, got {type(call).__name__}")
        attempt = 0
        while True:
            attempt += 1
            try:
                result = call()
            except self.store_errors as exc:
                time.sleep(self._failed_attempt(exc, attempt))
                continue
            self._answered()
            return result

    def _perform(self, call: Union[StoreCall[T], T]) -> T:
        """Run a call to its answer with blocking I/O (an answer that needs none is returned)."""
        return self.perform(call) if isinstance(call, StoreCall) else call

    # -- the public sync API -------------------------------------------------------------------

    def claim_and_read(
        self,
        claims: FingerprintsLike,
        reads: FingerprintsLike = (),
        *,
        lease: Optional[Lease] = None,
        aliases: Optional[Aliases] = None,
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
        :param aliases: also record these aliases of redirects, in the same round trip (only
            stores with :attr:`supports_aliases`; see :mod:`crawldedup.stores.aliases`).
        :returns: per claim, True when this caller won it; per read, True when present; the
            claims lost to another worker's open lease.
        :raises TypeError: for a fingerprint that is not bytes.
        :raises ValueError: for a fingerprint that is not 16 bytes long, or bad lease terms.
        :raises LeasesUnsupported: for a lease on a store without leases.
        :raises AliasesUnsupported: for aliases on a store without an alias map.
        :raises StoreUnavailable: after the retries of :attr:`retry` failed.
        """
        return self._perform(self._claim_call(claims, reads, lease, aliases))

    def read_aliases(self, fingerprints: FingerprintsLike) -> List[Optional[bytes]]:
        """Per fingerprint of a requested URL, the final page's fingerprint it was recorded an
        alias of (:meth:`claim_and_read`'s ``aliases``), or None (never recorded, forgotten with
        the window, or replaced in a full map). One round trip.

        :raises TypeError: for a fingerprint that is not bytes.
        :raises AliasesUnsupported: on a store without an alias map.
        :raises StoreUnavailable: after the retries failed.
        """
        return self._perform(self._aliases_call(fingerprints))

    def finish_leases(self, fingerprints: FingerprintsLike, owner: str) -> List[bool]:
        """Turn leases held by ``owner`` into lasting claims (visited for the store's TTL).

        :returns: per fingerprint, True when done; False when refused: ``owner`` does not
            hold that lease (never leased, released, handed back after expiring, or taken over
            by another worker). A lease past its deadline that nobody took over is still done.
        :raises TypeError: for a fingerprint that is not bytes.
        :raises LeasesUnsupported: on a store without leases.
        :raises StoreUnavailable: after the retries failed.
        """
        return self._perform(self._settle_call("done", fingerprints, owner, None))

    def release_leases(self, fingerprints: FingerprintsLike, owner: str) -> List[bool]:
        """Free leases held by ``owner`` (a failed fetch to retry): anyone can claim them again.

        :returns: per fingerprint, True when released, False when ``owner`` did not hold it.
        :raises TypeError: for a fingerprint that is not bytes.
        :raises LeasesUnsupported: on a store without leases.
        :raises StoreUnavailable: after the retries failed.
        """
        return self._perform(self._settle_call("release", fingerprints, owner, None))

    def renew_leases(self, fingerprints: FingerprintsLike, owner: str, seconds: float) -> List[bool]:
        """Move the deadline of leases held by ``owner`` to ``seconds`` from now (Redis's clock).

        :returns: per fingerprint, True when renewed, False when ``owner`` did not hold it.
        :raises TypeError: for a fingerprint that is not bytes, or a duration that is not a number.
        :raises ValueError: for a duration out of (0, 86400].
        :raises LeasesUnsupported: on a store without leases.
        :raises StoreUnavailable: after the retries failed.
        """
        return self._perform(self._settle_call("renew", fingerprints, owner, seconds))

    def expired_leases(self, limit: int, owner: Optional[str] = None, seconds: Optional[float] = None) -> List[str]:
        """Hand back, once each, up to ``limit`` leases whose deadline passed: their canonical URLs.

        Without ``seconds`` the claims become free (anyone's next claim wins them); with it,
        they are leased again to ``owner`` in the same step, so nothing can slip in between.

        :raises TypeError: for a limit that is not an integer.
        :raises ValueError: for a limit out of [1, 1000000], or ``seconds`` without ``owner``.
        :raises LeasesUnsupported: on a store without leases.
        :raises StoreUnavailable: after the retries failed.
        """
        return self._perform(self._expired_call(limit, owner, seconds))

    def claim_many(self, fingerprints: FingerprintsLike) -> List[bool]:
        """Claim fingerprints; True where this caller won (see :meth:`claim_and_read`).

        :raises TypeError: for a fingerprint that is not bytes (a single ``bytes`` is not a batch).
        """
        return self.claim_and_read(fingerprints, ()).won

    def unclaim_many(self, fingerprints: FingerprintsLike) -> None:
        """Take back lasting claims this caller won and could not use (a page it failed to write),
        so that anyone's next claim wins them again. Only stores with :attr:`supports_unclaim`.

        :raises TypeError: for a fingerprint that is not bytes.
        :raises ValueError: on a store that cannot take a claim back.
        :raises StoreUnavailable: after the retries failed.
        """
        self._perform(self._unclaim_call(fingerprints))

    def contains_many(self, fingerprints: FingerprintsLike) -> List[bool]:
        """Read fingerprints; True where already claimed (see :meth:`claim_and_read`).

        :raises TypeError: for a fingerprint that is not bytes.
        """
        return self.claim_and_read((), fingerprints).present

    def bytes_per_url(self) -> Optional[float]:
        """Storage bytes per claimed URL, measured on the live store; None when unknowable.

        :raises StoreUnavailable: when the store cannot be reached.
        """
        return self._perform(self._measure())

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; further calls fail."""

    async def aclose(self) -> None:
        """Release the connections of a store opened for asyncio."""
        self.close()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}>"
