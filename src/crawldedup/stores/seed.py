"""A namespace's seed: the bytes of a local state file, kept in the store beside the claims.

``crawldedup migrate --from-state FILE`` grows a single-host crawl into a fleet. A Bloom
filter cannot list its keys, so its pages cannot be claimed one by one in the new store;
instead the file itself is stored with the namespace, in chunks, and every Deduplicator that
opens the namespace downloads it and consults it beside its own filter (``dedup/seed.py``):
a page the seed holds is seen by every worker. This module is the storage, written as calls
(:class:`~crawldedup.stores.base.StoreCall`) that the store's channel sends, blocking or asyncio.

Layouts (documented formats, docs/stores.md "Seeding a store from a state file"):

- Redis (every Redis strategy): ``{<namespace>:seed}``, a hash of the :class:`SeedRecord`
  fields, and ``{<namespace>:seed}:<i>``, the string of chunk ``i`` (from 0); one hash tag,
  so that on a Redis Cluster a chunk and the count after it go to one node, in order.
- SQLite: ``crawldedup_seeds`` (one row of the record per namespace) and
  ``crawldedup_seed_chunks`` (namespace, chunk, data).

The record is written first, with ``uploaded`` 0; each chunk then goes with the new count of
chunks uploaded, in one request. A seed is complete when ``uploaded`` equals ``chunks``; the
bytes are checked against ``digest`` (BLAKE2b-256 of the file) when downloaded.
"""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence

from .._plans import Plan
from .base import STORES, ClaimStore, StoreCall
from .sqlite import Work

__all__ = [
    "SEED_CHUNK_BYTES",
    "SeedConflict",
    "SeedLayout",
    "SeedRecord",
    "Uploaded",
    "parts_digest",
    "read_parts",
    "seed_layout",
    "upload_seed",
]

#: Default bytes per chunk: 8 MiB keeps each request short for the server (about 10 ms).
SEED_CHUNK_BYTES = 8 << 20

_SEED_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS crawldedup_seeds (namespace TEXT PRIMARY KEY, digest TEXT NOT NULL, "
    "size INTEGER NOT NULL, parts TEXT NOT NULL, chunk_bytes INTEGER NOT NULL, chunks INTEGER NOT NULL, "
    "uploaded INTEGER NOT NULL, policy TEXT NOT NULL, "
    "window TEXT NOT NULL, source TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS crawldedup_seed_chunks (namespace TEXT NOT NULL, chunk INTEGER NOT NULL, "
    "data BLOB NOT NULL, PRIMARY KEY (namespace, chunk)) WITHOUT ROWID",
)


class SeedRecord(NamedTuple):
    """What a namespace's seed is: the digest and size of its bytes, the sizes of the files they
    join (``parts``, comma-separated: a state file, then the stage files it grew, in order), its
    chunks (their size, how many, and how many are uploaded), the canonical policy and recrawl
    window it was made with (the window's :meth:`~crawldedup.windows.Window.describe`, or
    ``none``), and where it came from."""

    digest: str
    size: int
    parts: str
    chunk_bytes: int
    chunks: int
    uploaded: int
    policy: str
    window: str
    source: str

    @property
    def complete(self) -> bool:
        """Whether every chunk is uploaded."""
        return self.uploaded == self.chunks


def _record(fields: Dict[str, str]) -> SeedRecord:
    return SeedRecord(
        fields["digest"],
        int(fields["size"]),
        fields["parts"],
        int(fields["chunk_bytes"]),
        int(fields["chunks"]),
        int(fields["uploaded"]),
        fields["policy"],
        fields["window"],
        fields["source"],
    )


class SeedLayout:
    """The seed of one namespace in one store: each step as a call for the store's channel."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def record(self) -> StoreCall[Optional[SeedRecord]]:
        """The namespace's seed record; None when it has no seed."""
        raise NotImplementedError

    def begin(self, record: SeedRecord) -> StoreCall[None]:
        """Replace any seed of the namespace by ``record`` (nothing uploaded yet)."""
        raise NotImplementedError

    def put(self, index: int, data: bytes) -> StoreCall[None]:
        """Store chunk ``index`` and count ``index + 1`` chunks uploaded (chunks go in order)."""
        raise NotImplementedError

    def get(self, index: int) -> StoreCall[bytes]:
        """Chunk ``index``."""
        raise NotImplementedError


class RedisSeeds(SeedLayout):
    """The Redis layout: a record hash and one string per chunk."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self.key = f"{{{namespace}:seed}}"

    def chunk_key(self, index: int) -> str:
        return f"{self.key}:{index}"

    def record(self) -> StoreCall[Optional[SeedRecord]]:
        def plan(_token: bytes) -> Plan[Optional[SeedRecord]]:
            (stored,) = yield [("HGETALL", self.key)]
            fields = {bytes(k).decode(): bytes(v).decode() for k, v in stored.items()}
            return _record(fields) if fields else None

        return StoreCall(plan)

    def begin(self, record: SeedRecord) -> StoreCall[None]:
        def plan(_token: bytes) -> Plan[None]:
            (previous,) = yield [("HGET", self.key, "chunks")]
            stale = [("DEL", self.chunk_key(i)) for i in range(int(previous or 0))]
            fields: List[Any] = [item for pair in record._asdict().items() for item in (pair[0], str(pair[1]))]
            yield [*stale, ("DEL", self.key), ("HSET", self.key, *fields)]

        return StoreCall(plan)

    def put(self, index: int, data: bytes) -> StoreCall[None]:
        def plan(_token: bytes) -> Plan[None]:
            yield [("SET", self.chunk_key(index), data), ("HSET", self.key, "uploaded", str(index + 1))]

        return StoreCall(plan, size=1)

    def get(self, index: int) -> StoreCall[bytes]:
        def plan(_token: bytes) -> Plan[bytes]:
            (data,) = yield [("GET", self.chunk_key(index))]
            if data is None:
                raise ValueError(f"chunk {index} of the seed of namespace {self.namespace!r} is missing")
            return bytes(data)

        return StoreCall(plan, size=1)


class SQLiteSeeds(SeedLayout):
    """The SQLite layout: a record row and one row per chunk, beside the claims."""

    @staticmethod
    def _schema(db: sqlite3.Connection) -> None:
        for statement in _SEED_SCHEMA:
            db.execute(statement)

    def record(self) -> StoreCall[Optional[SeedRecord]]:
        def read(db: sqlite3.Connection) -> Optional[SeedRecord]:
            self._schema(db)
            row = db.execute(
                "SELECT digest, size, parts, chunk_bytes, chunks, uploaded, policy, window, source "
                "FROM crawldedup_seeds "
                "WHERE namespace = ?",
                (self.namespace,),
            ).fetchone()
            return None if row is None else SeedRecord(*row)

        def plan(_token: bytes) -> Plan[Optional[SeedRecord]]:
            record: Optional[SeedRecord] = yield Work(read)
            return record

        return StoreCall(plan)

    def begin(self, record: SeedRecord) -> StoreCall[None]:
        def write(db: sqlite3.Connection) -> None:
            self._schema(db)
            db.execute("DELETE FROM crawldedup_seed_chunks WHERE namespace = ?", (self.namespace,))
            db.execute(
                "INSERT OR REPLACE INTO crawldedup_seeds (namespace, digest, size, parts, chunk_bytes, chunks, "
                "uploaded, policy, window, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (self.namespace, *record),
            )

        def plan(_token: bytes) -> Plan[None]:
            yield Work(write)

        return StoreCall(plan)

    def put(self, index: int, data: bytes) -> StoreCall[None]:
        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR REPLACE INTO crawldedup_seed_chunks (namespace, chunk, data) VALUES (?, ?, ?)",
                (self.namespace, index, data),
            )
            db.execute("UPDATE crawldedup_seeds SET uploaded = ? WHERE namespace = ?", (index + 1, self.namespace))

        def plan(_token: bytes) -> Plan[None]:
            yield Work(write)

        return StoreCall(plan, size=1)

    def get(self, index: int) -> StoreCall[bytes]:
        def read(db: sqlite3.Connection) -> bytes:
            row = db.execute(
                "SELECT data FROM crawldedup_seed_chunks WHERE namespace = ? AND chunk = ?", (self.namespace, index)
            ).fetchone()
            if row is None:
                raise ValueError(f"chunk {index} of the seed of namespace {self.namespace!r} is missing")
            return bytes(row[0])

        def plan(_token: bytes) -> Plan[bytes]:
            chunk: bytes = yield Work(read, write=False)
            return chunk

        return StoreCall(plan, size=1)


def seed_layout(store: ClaimStore) -> Optional[SeedLayout]:
    """The seed layout of ``store``'s namespace; None for a store that keeps no seed (``service``)."""
    family = next(entry.family for entry in STORES if entry.strategy == store.strategy)
    if family == "sqlite":
        return SQLiteSeeds(store.namespace)
    if family == "redis":
        return RedisSeeds(store.namespace)
    return None


class SeedConflict(ValueError):
    """The namespace holds another seed (complete, or half uploaded), or the file changed while
    it was uploaded; the message says what to do."""


class Uploaded(NamedTuple):
    """One run of :func:`upload_seed`: the chunks it sent, the chunk it resumed at (0: from
    the start), and the seed's record."""

    sent: int
    resumed_at: int
    record: SeedRecord


def read_parts(paths: Sequence[str], offset: int, length: int) -> bytes:
    """``length`` bytes from ``offset`` of the files at ``paths`` joined end to end."""
    out = bytearray()
    for path in paths:
        size = os.path.getsize(path)
        if offset < size and len(out) < length:
            with open(path, "rb") as source:
                source.seek(offset)
                out += source.read(length - len(out))
        offset = max(0, offset - size)
    return bytes(out)


def parts_digest(paths: Sequence[str]) -> str:
    """BLAKE2b-256 of the files at ``paths`` joined end to end, hex."""
    digest = hashlib.blake2b(digest_size=32)
    for path in paths:
        with open(path, "rb") as source:
            for block in iter(lambda: source.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def upload_seed(
    store: ClaimStore,
    paths: Sequence[str],
    *,
    policy: str,
    window: str,
    chunk_bytes: int = SEED_CHUNK_BYTES,
    restart: bool = False,
    progress: Callable[[int, int], None] = lambda done, chunks: None,
) -> Uploaded:
    """Store the files at ``paths`` (a state file, then its stage files) as the seed of
    ``store``'s namespace, resuming an upload of the same bytes that was stopped (its record
    says how many chunks arrived).

    :param policy: the canonical policy digest the file is stamped with.
    :param window: :func:`crawldedup.dedup.seed.window_text` of its recrawl window.
    :param restart: replace a seed of other bytes (complete or not) instead of refusing.
    :param progress: called after each chunk with the chunks uploaded and their number.
    :raises SeedConflict: for another seed without ``restart``, or files that changed meanwhile.
    :raises ValueError: for a store that keeps no seed.
    :raises StoreUnavailable: when the store stays unreachable (what arrived is kept).
    """
    layout = seed_layout(store)
    if layout is None:
        raise ValueError(f"the {store.strategy} store keeps no seed")
    sizes = [os.path.getsize(path) for path in paths]
    size, digest = sum(sizes), parts_digest(paths)
    wanted = SeedRecord(
        digest,
        size,
        ",".join(map(str, sizes)),
        chunk_bytes,
        max(1, math.ceil(size / chunk_bytes)),
        0,
        policy,
        window,
        os.path.abspath(paths[0]),
    )
    record = store.perform(layout.record())
    if record is not None and record.digest == digest and record.parts == wanted.parts:
        wanted, start = record, record.uploaded  # the same bytes: resume (or nothing left to do)
    elif record is not None and not restart:
        state = "a seed" if record.complete else f"a half-uploaded seed ({record.uploaded} of {record.chunks} chunks)"
        raise SeedConflict(
            f"namespace {layout.namespace!r} already holds {state} of another file, {record.source} "
            f"(digest {record.digest[:16]}): give --restart to replace it"
        )
    else:
        store.perform(layout.begin(wanted))
        start = 0
    for index in range(start, wanted.chunks):
        store.perform(layout.put(index, read_parts(paths, index * wanted.chunk_bytes, wanted.chunk_bytes)))
        progress(index + 1, wanted.chunks)
    if parts_digest(paths) != digest:
        raise SeedConflict(
            f"{paths[0]} changed during the upload (a crawl still writes it): stop that crawl, then "
            f"run again with --restart"
        )
    return Uploaded(wanted.chunks - start, start, wanted._replace(uploaded=wanted.chunks))
