"""Strategy names and the store each one opens, from the registry of :mod:`crawldedup.stores.base`.

Every list of strategy names (the settings' check, the CLI's choices, the messages about
leases) derives from :data:`~crawldedup.stores.base.STORES`. To add a store: write its module
in this folder with a ``from_options`` class method, and add its entry to ``STORES``. Naming
strategies imports no store module: a store's module (and its server client) is imported when
the store is opened.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .._checks import PathArg
from ..windows import Clock, Window, system_clock
from .aio import AsyncClaimStore
from .base import STORES, STRATEGY_OF_KIND, ClaimStore, RetryPolicy, StoreEntry, StoreOptions
from .durability import Durability

__all__ = [
    "ALIASES",
    "EXACT",
    "LEASE_STRATEGIES",
    "LOCAL",
    "LOCAL_STRATEGIES",
    "REDIS_STRATEGIES",
    "STRATEGIES",
    "STRATEGY_CHOICES",
    "STRATEGY_OF_KIND",
    "open_async_store",
    "open_store",
    "strategy_name",
]

#: The strategies without a store, the local state decides alone: ``exact``, a Bloom filter in
#: front of the exact tier on disk (no page lost); ``local``, the Bloom filter alone (a false
#: positive loses its page: up to the error rate of the new pages).
EXACT = "exact"
LOCAL = "local"
LOCAL_STRATEGIES = (EXACT, LOCAL)
#: Strategy name -> its store's registry entry (None for ``exact`` and ``local``), in the order
#: documentation lists them.
STRATEGIES: Dict[str, Optional[StoreEntry]] = {
    EXACT: None,
    LOCAL: None,
    **{entry.strategy: entry for entry in STORES},
}
#: Other names accepted for a strategy: ``bloom`` is the seed's ``DEDUP_STRATEGY`` value.
ALIASES: Dict[str, str] = {"bloom": "redisbloom"}
#: Strategies whose store holds claims for a limited time (leases); ``service`` holds them
#: in the service's store, which must be one of these.
LEASE_STRATEGIES: Tuple[str, ...] = tuple(entry.strategy for entry in STORES if entry.leases)
#: Strategies whose store lives in Redis (``redis_url``).
REDIS_STRATEGIES: Tuple[str, ...] = tuple(entry.strategy for entry in STORES if entry.family == "redis")
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
    window_layout: Optional[str] = None,
) -> ClaimStore:
    """Open the store of ``strategy`` for one namespace.

    :param strategy: a name of :data:`STRATEGIES` other than ``exact`` and ``local``, or an alias.
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
    :param window_layout: how a new windowed ``sharded-set`` namespace keeps its claims:
        ``ticks`` (one lookup per claim, the default) or ``generations``; a namespace that
        exists keeps its own.
    :raises ValueError: for an unknown strategy, ``exact`` or ``local``, a missing location, or
        ``replicated`` durability for a store outside Redis.
    :raises NamespaceConflict: when the namespace was made by another store or policy.
    :raises StoreUnavailable: when the store cannot be reached.
    """
    entry = STRATEGIES[strategy_name(strategy)]
    if entry is None:
        raise ValueError(f"the {strategy_name(strategy)} strategy has no store")
    if durability is not None and durability.waits and entry.family != "redis":
        raise ValueError(
            f"durability={durability.level!r} needs a Redis store (one of {', '.join(REDIS_STRATEGIES)}), "
            f"not {entry.strategy}"
        )
    options = StoreOptions(
        namespace=namespace,
        policy_digest=policy_digest,
        capacity=capacity,
        error_rate=error_rate,
        redis_url=redis_url,
        sqlite_path=sqlite_path,
        service_url=service_url,
        postgres_url=postgres_url,
        ttl_seconds=ttl_seconds,
        retry=retry,
        window=window,
        clock=clock,
        asynchronous=asynchronous,
        durability=durability,
        window_layout=window_layout,
    )
    return entry.load().from_options(options)


def open_async_store(strategy: str, **arguments: Any) -> AsyncClaimStore:
    """The store of ``strategy`` for asyncio: arguments as :func:`open_store`; nothing is opened
    before its first call (or :meth:`AsyncClaimStore.open`).

    :raises ValueError: for an unknown strategy, ``exact`` or ``local``, a missing location or a bad argument.
    """
    return AsyncClaimStore(open_store(strategy, asynchronous=True, **arguments))
