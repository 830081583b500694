"""What operators' tools ask of a namespace before opening a store on it.

``crawldedup doctor``, ``stats`` and ``migrate`` use this; the rest (the server behind a store,
its claims and leases counted, deleting a namespace) are the stores' own methods
(:meth:`~crawldedup.stores.base.ClaimStore.server_facts` and its neighbours).
"""

from __future__ import annotations

from typing import Dict, Optional

from .._checks import PathArg
from .base import required
from .factory import STRATEGIES, strategy_name


def namespace_record(
    strategy: str,
    namespace: str,
    *,
    redis_url: Optional[str] = None,
    sqlite_path: Optional[PathArg] = None,
    postgres_url: Optional[str] = None,
) -> Optional[Dict[str, str]]:
    """The record of ``namespace`` (its layout, store kind, policy...), read without creating it;
    None when the namespace does not exist. Opening a store creates its namespace: ask this first.

    :raises ValueError: for a strategy without a record, or a missing location.
    :raises StoreUnavailable: when the server or file cannot be read.
    """
    entry = STRATEGIES[strategy_name(strategy)]
    if entry is None or entry.family == "service":
        raise ValueError(f"the {strategy} strategy keeps no namespace record to read")
    if entry.family == "sqlite":
        return entry.load().read_record(namespace, sqlite_path)
    if entry.family == "postgres":
        location = required(postgres_url, entry.strategy, "postgres_url", "CRAWLDEDUP_POSTGRES_URL")
    else:
        location = required(redis_url, entry.strategy, "redis_url", "CRAWLDEDUP_REDIS_URL")
    return entry.load().read_record(namespace, location)
