"""What operators' tools ask of a store beyond claims: whether a namespace exists, what it holds,
the server behind it, and removing a namespace.

``crawldedup doctor`` and ``crawldedup stats`` use these; a Deduplicator never does.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, cast
from urllib.parse import urlsplit

import redis
from redis.cluster import RedisCluster

from .._checks import PathArg, redact_url
from ._redis import GroupedScriptStore, RedisStore, connect
from .base import ClaimStore, StoreRefused, StoreUnavailable
from .postgres import CONNECT_TIMEOUT_SECONDS, SCHEMA, PostgresStore, connection_problem
from .redis_keys import RedisKeyStore
from .redisbloom import RedisBloomStore
from .sharded_set import RedisShardedSetStore
from .sqlite import SQLiteStore, file_problem

#: Keys deleted per ``UNLINK``; shards counted per pipeline.
DELETE_BATCH = 1_000
COUNT_BATCH = 10_000


@dataclass(frozen=True)
class ServerFacts:
    """What serves a store, and the room it leaves for claims.

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


def server_facts(store: ClaimStore) -> ServerFacts:
    """Ask the server (or file) behind ``store`` what it runs and how much room it has.

    :raises ValueError: for a store of another kind.
    :raises StoreUnavailable: when the server cannot be reached.
    """
    if isinstance(store, RedisStore):
        return store._with_retries(lambda: _redis_facts(_one_node(store)))
    if isinstance(store, SQLiteStore):
        return store._with_retries(lambda: _sqlite_facts(store))
    if isinstance(store, PostgresStore):
        ((version, used),) = store.execute(
            "SELECT current_setting('server_version'), pg_database_size(current_database())"
        )
        return ServerFacts(
            f"PostgreSQL {version}", (), int(used), None, "the server's free disk space (not known here)"
        )
    raise ValueError(f"the {store.strategy} store has no server to describe")


def _one_node(store: RedisStore) -> redis.Redis:
    """A client of one node: the store's own, or a cluster's default node."""
    client = store.client
    if isinstance(client, RedisCluster):
        return client.get_redis_connection(client.get_default_node())
    return client


def _redis_facts(client: redis.Redis) -> ServerFacts:
    info: Dict[str, Any] = client.info("server")
    memory: Dict[str, Any] = client.info("memory")
    name, version = ("Valkey", info["valkey_version"]) if "valkey_version" in info else ("Redis", info["redis_version"])
    modules = tuple(sorted(_module_text(module) for module in client.module_list()))
    used, maxmemory = int(memory["used_memory"]), int(memory.get("maxmemory", 0))
    if maxmemory:
        return ServerFacts(f"{name} {version}", modules, used, maxmemory, "maxmemory")
    return ServerFacts(
        f"{name} {version}",
        modules,
        used,
        int(memory["total_system_memory"]),
        "the machine's memory (no maxmemory set)",
    )


def _module_text(module: Dict[bytes, Any]) -> str:
    """``name major.minor.patch`` from a ``MODULE LIST`` entry (its version is one integer, 20802)."""
    version = int(module[b"ver"])
    return f"{module[b'name'].decode()} {version // 10000}.{version // 100 % 100}.{version % 100}"


def _sqlite_facts(store: SQLiteStore) -> ServerFacts:
    with store._lock:
        pages = store._connection().execute("PRAGMA page_count").fetchone()[0]
        free = store._connection().execute("PRAGMA freelist_count").fetchone()[0]
        page_size = store._connection().execute("PRAGMA page_size").fetchone()[0]
    disk_free = shutil.disk_usage(store.path.resolve().parent).free
    return ServerFacts(
        f"SQLite {sqlite3.sqlite_version}",
        (),
        (pages - free) * page_size,
        pages * page_size + disk_free,
        "the file's size and the free disk space",
    )


def delete_namespace(store: ClaimStore) -> int:
    """Delete every claim, lease and record of the store's namespace (not its rounds' or any
    other namespace's); the store is unusable afterwards: close it.

    :returns: the keys (Redis) or rows (SQLite) deleted.
    :raises ValueError: for a store of another kind.
    :raises StoreUnavailable: when the server cannot be reached.
    """
    if isinstance(store, RedisStore):
        return store._with_retries(lambda: _delete_redis_namespace(store))
    if isinstance(store, SQLiteStore):
        return store._with_retries(lambda: _delete_sqlite_namespace(store))
    if isinstance(store, PostgresStore):
        rows = count_claims(store)
        store.execute(f"DROP TABLE IF EXISTS {store.table}, {store.aliases_table}")
        return rows + len(
            store.execute(f"DELETE FROM {SCHEMA}.namespaces WHERE name = %s RETURNING id", (store.namespace,))
        )
    raise ValueError(f"the {store.strategy} store cannot delete a namespace")


def _delete_redis_namespace(store: RedisStore) -> int:
    name = store.namespace.encode("ascii")
    # Every key of a namespace (docs/stores.md): its record and RedisBloom's filter, and the keys
    # under its hash tags {<namespace>:<group>}, {<namespace>:bf} and {<namespace>:aliases:<group>};
    # a round's tags differ.
    own_tag = re.compile(rb"\{%s:(?:\d+|bf|aliases:\d+)\}" % re.escape(name))
    deleted = int(store.client.unlink(b"%s:meta" % name, b"%s:bf" % name))
    batch: List[bytes] = []
    for key in store.client.scan_iter(match=b"{%s:*" % name, count=DELETE_BATCH):
        if own_tag.match(key):
            batch.append(key)
        if len(batch) == DELETE_BATCH:
            deleted += int(store.client.unlink(*batch))
            batch = []
    if batch:
        deleted += int(store.client.unlink(*batch))
    return deleted


def _delete_sqlite_namespace(store: SQLiteStore) -> int:
    with store._transaction() as db:
        rows = db.execute("DELETE FROM crawldedup_claims WHERE namespace = ?", (store._namespace_id,)).rowcount
        rows += db.execute("DELETE FROM crawldedup_aliases WHERE namespace = ?", (store._namespace_id,)).rowcount
        db.execute("DELETE FROM crawldedup_alias_counts WHERE namespace = ?", (store._namespace_id,))
        rows += db.execute("DELETE FROM crawldedup_namespaces WHERE id = ?", (store._namespace_id,)).rowcount
    return int(rows)


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

    :raises StoreUnavailable: when the server or file cannot be read.
    """
    if strategy == SQLiteStore.strategy:
        path = Path(sqlite_path) if sqlite_path is not None else None
        if path is None or not path.exists():
            return None
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                columns = {row[1] for row in db.execute("PRAGMA table_info(crawldedup_namespaces)")}
                window = "recrawl_window" if "recrawl_window" in columns else "NULL"  # a file made before it
                row = db.execute(
                    f"SELECT layout, fingerprint, policy, {window} FROM crawldedup_namespaces WHERE name = ?",
                    (namespace,),
                ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreRefused(f"sqlite store {str(path)!r}", 1, str(exc), file_problem(path, exc)) from None
        if row is None:
            return None
        record = {"layout": str(row[0]), "store": "sqlite", "fingerprint": row[1], "policy": row[2]}
        return {**record, "window": row[3]} if row[3] is not None else record
    if strategy == PostgresStore.strategy:
        if postgres_url is None:
            raise ValueError("the postgres strategy needs postgres_url (CRAWLDEDUP_POSTGRES_URL)")
        return _postgres_record(postgres_url, namespace)
    if redis_url is None:
        raise ValueError(f"the {strategy} strategy needs redis_url (CRAWLDEDUP_REDIS_URL)")
    try:
        client = connect(redis_url)
        try:
            stored = client.hgetall(f"{namespace}:meta")
        finally:
            client.close()
    except redis.AuthenticationError as exc:
        raise StoreRefused(redact_url(redis_url), 1, str(exc), "the server refused the URL's password") from None
    except redis.RedisError as exc:
        raise StoreUnavailable(redact_url(redis_url), 1, f"{type(exc).__name__}: {exc}") from None
    fields = cast(Dict[bytes, bytes], stored)  # the client returns bytes (no decode_responses)
    return {key.decode(): value.decode() for key, value in fields.items()} or None


def _postgres_record(url: str, namespace: str) -> Optional[Dict[str, str]]:
    import psycopg  # the postgres extra: a store of this strategy was asked for

    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_SECONDS) as db:
            if db.execute(f"SELECT to_regclass('{SCHEMA}.namespaces')").fetchone() == (None,):
                return None
            row = db.execute(
                f"SELECT layout, store, fingerprint, policy, recrawl_window FROM {SCHEMA}.namespaces WHERE name = %s",
                (namespace,),
            ).fetchone()
    except psycopg.Error as exc:
        problem = connection_problem(exc, urlsplit(url).password is not None)
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if problem is not None:
            raise StoreRefused(redact_url(url), 1, reason, problem) from None
        raise StoreUnavailable(redact_url(url), 1, reason) from None
    if row is None:
        return None
    return {"layout": str(row[0]), "store": row[1], "fingerprint": row[2], "policy": row[3], "window": row[4]}


def count_claims(store: ClaimStore) -> int:
    """Claims the namespace holds: keys counted by ``SCAN`` (``set``), members of every shard
    (``sharded-set``), items inserted (``redisbloom``), rows (``sqlite``).

    :raises StoreUnavailable: when the server cannot be reached.
    """
    if isinstance(store, RedisKeyStore):
        total, cursor = 0, 0
        while True:
            cursor, found = store.scan_claims(cursor, COUNT_BATCH)
            total += len(found)
            if cursor == 0:
                return total
    if isinstance(store, RedisShardedSetStore):
        return store._with_retries(lambda: _count_members(store))
    if isinstance(store, RedisBloomStore):
        return int(store.filter_info()["Number of items inserted"])
    if isinstance(store, SQLiteStore):

        def rows() -> int:
            with store._lock:
                return int(
                    store._connection()
                    .execute("SELECT count(*) FROM crawldedup_claims WHERE namespace = ?", (store._namespace_id,))
                    .fetchone()[0]
                )

        return store._with_retries(rows)
    if isinstance(store, PostgresStore):
        return int(store.execute(f"SELECT count(*) FROM {store.table}")[0][0])
    raise ValueError(f"the {store.strategy} store cannot count its claims")


def _count_members(store: RedisShardedSetStore) -> int:
    total = 0
    for start in range(0, store.shards, COUNT_BATCH):
        pipe = store.client.pipeline(transaction=False)
        for shard in range(start, min(start + COUNT_BATCH, store.shards)):
            pipe.scard(store._shard_key(shard))
        total += sum(pipe.execute())
    return total


def lease_counts(store: ClaimStore) -> Optional[Tuple[int, int]]:
    """Leases of the namespace: (open, past their deadline and not yet handed back), by the
    server's clock; None for a store without leases.

    :raises StoreUnavailable: when the server cannot be reached.
    """
    if not isinstance(store, GroupedScriptStore):
        return None

    def count() -> Tuple[int, int]:
        seconds, micros = store.client.time()
        now_ms = seconds * 1000 + micros // 1000
        pipe = store.client.pipeline(transaction=False)
        for leases, _ in store._lease_keys:
            pipe.zcount(leases, f"({now_ms}", "+inf")
            pipe.zcount(leases, "-inf", now_ms)
        replies = pipe.execute()
        return sum(replies[0::2]), sum(replies[1::2])

    return store._with_retries(count)
