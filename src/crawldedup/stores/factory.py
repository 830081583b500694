"""The one registry of strategies, and the store each one opens.

Every list of strategy names (the settings' check, the CLI's choices, the messages about
leases) derives from :data:`STRATEGIES`. To add a store: write its module in this folder,
give its class a ``strategy`` name, list it in ``_STORES`` and teach :func:`open_store` its
arguments.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type, TypedDict

from .._checks import PathArg
from ..windows import Clock, Window, system_clock
from .aio import AsyncClaimStore
from .base import ClaimStore, RetryPolicy
from .durability import Durability
from .postgres import PostgresStore
from .redis_keys import RedisKeyStore
from .redisbloom import RedisBloomStore
from .service import ServiceStore
from .sharded_set import RedisShardedSetStore
from .sqlite import SQLiteStore

#: The strategies without a store, the local state decides alone: ``exact``, a Bloom filter in
#: front of the exact tier on disk (no page lost); ``local``, the Bloom filter alone (a false
#: positive loses its page: up to the error rate of the new pages).
EXACT = "exact"
LOCAL = "local"
LOCAL_STRATEGIES = (EXACT, LOCAL)
_STORES: Tuple[Type[ClaimStore], ...] = (
    RedisKeyStore,
    RedisShardedSetStore,
    RedisBloomStore,
    SQLiteStore,
    PostgresStore,
    ServiceStore,
)
#: Strategy name -> its store class (None for ``exact`` and ``local``), in the order documentation lists them.
STRATEGIES: Dict[str, Optional[Type[ClaimStore]]] = {
    EXACT: None,
    LOCAL: None,
    **{store.strategy: store for store in _STORES},
}
#: Store kind (as namespace records hold it) -> its strategy name, for messages about a record.
STRATEGY_OF_KIND: Dict[str, str] = {store.kind: store.strategy for store in _STORES}
#: Other names accepted for a strategy: ``bloom`` is the seed's ``DEDUP_STRATEGY`` value.
ALIASES: Dict[str, str] = {"bloom": RedisBloomStore.strategy}
#: Strategies whose store holds claims for a limited time (leases); ``service`` holds them
#: in the service's store, which must be one of these.
LEASE_STRATEGIES: Tuple[str, ...] = tuple(
    name for name, store in STRATEGIES.items() if store and store.supports_leases and store is not ServiceStore
)
#: Strategies whose store lives in Redis (``redis_url``).
REDIS_STRATEGIES: Tuple[str, ...] = tuple(
    name for name, store in STRATEGIES.items() if store and store not in (SQLiteStore, PostgresStore, ServiceStore)
)
#: How the strategies are listed in messages.
STRATEGY_CHOICES = ", ".join(STRATEGIES) + "".join(f" ({alias}: {name})" for alias, name in ALIASES.items())


def strategy_name(name: str) -> str:
    """The registered name of strategy ``name`` (an alias gives the name it stands for).

    :raises ValueError: for a name that is neither a strategy nor an alias.
    """
    name = ALIASES.get(name, name)
    if name not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGY_CHOICES}, got {name!r}")
    return name


class _CommonArgs(TypedDict):
    """Keyword arguments every store takes."""

    namespace: str
    policy_digest: str
    retry: Optional[RetryPolicy]
    window: Optional[Window]
    clock: Clock
    asynchronous: bool


def open_store(
    strategy: str,
    *,
    namespace: str,
    policy_digest: str,
    redis_url: Optional[str] = None,
    sqlite_path: Optional[PathArg] = None,
    service_url: Optional[str] = None,
    postgres_url: Optional[str] = None,
    capacity: int,
    error_rate: float,
    ttl_seconds: Optional[int] = None,
    retry: Optional[RetryPolicy] = None,
    window: Optional[Window] = None,
    clock: Clock = system_clock,
    asynchronous: bool = False,
    durability: Optional[Durability] = None,
) -> ClaimStore:
    """Open the store of ``strategy`` for one namespace.

    :param strategy: a name of :data:`STRATEGIES` other than ``local``, or an alias.
    :param redis_url: where the Redis stores live (required for them).
    :param sqlite_path: the SQLite file (required for ``sqlite``).
    :param service_url: the ``crawldedup serve`` of ``service`` (required for it).
    :param postgres_url: the PostgreSQL database of ``postgres`` (required for it).
    :param capacity: URLs the namespace is sized for (sharded sets, RedisBloom).
    :param error_rate: RedisBloom's false-positive rate.
    :param ttl_seconds: how long a claim lasts in the ``set`` store without a window (None: forever).
    :param window: the recrawl window every store forgets claims after (None: never).
    :param clock: the time source of the window.
    :param asynchronous: make the store's logic only, for :func:`open_async_store`.
    :param durability: when a Redis store answers a batch that writes (default: once its
        primary applied it); ``replicated`` is refused for the other stores.
    :raises ValueError: for an unknown strategy, ``local``, a missing location, or
        ``replicated`` durability for a store outside Redis.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when the store cannot be reached.
    """
    store = STRATEGIES[strategy_name(strategy)]
    if store is None:
        raise ValueError(f"the {strategy_name(strategy)} strategy has no store")
    common: _CommonArgs = {
        "namespace": namespace,
        "policy_digest": policy_digest,
        "retry": retry,
        "window": window,
        "clock": clock,
        "asynchronous": asynchronous,
    }
    if durability is not None and durability.waits and store.strategy not in REDIS_STRATEGIES:
        raise ValueError(
            f"durability={durability.level!r} needs a Redis store (one of {', '.join(REDIS_STRATEGIES)}), "
            f"not {store.strategy}"
        )
    if store is SQLiteStore:
        if sqlite_path is None:
            raise ValueError("the sqlite strategy needs sqlite_path (CRAWLDEDUP_SQLITE)")
        return SQLiteStore(sqlite_path, **common)
    if store is PostgresStore:
        if postgres_url is None:
            raise ValueError("the postgres strategy needs postgres_url (CRAWLDEDUP_POSTGRES_URL)")
        return PostgresStore(postgres_url, **common)
    if store is ServiceStore:
        if service_url is None:
            raise ValueError("the service strategy needs service_url (CRAWLDEDUP_SERVICE_URL)")
        # The window is the service's store's own: claims expire where they are kept.
        return ServiceStore(
            service_url, namespace=namespace, policy_digest=policy_digest, retry=retry, asynchronous=asynchronous
        )
    if redis_url is None:
        raise ValueError(f"the {store.strategy} strategy needs redis_url (CRAWLDEDUP_REDIS_URL)")
    if store is RedisKeyStore:
        return RedisKeyStore(redis_url, ttl_seconds=ttl_seconds, durability=durability, **common)
    if store is RedisShardedSetStore:
        return RedisShardedSetStore(redis_url, capacity=capacity, durability=durability, **common)
    return RedisBloomStore(redis_url, capacity=capacity, error_rate=error_rate, durability=durability, **common)


def open_async_store(strategy: str, **arguments: Any) -> AsyncClaimStore:
    """The store of ``strategy`` for asyncio: arguments as :func:`open_store`; nothing is opened
    before its first call (or :meth:`AsyncClaimStore.open`).

    :raises ValueError: for an unknown strategy, ``local``, a missing location or a bad argument.
    """
    return AsyncClaimStore(open_store(strategy, asynchronous=True, **arguments))
