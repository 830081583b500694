"""The ``sqlite`` strategy's pages: two tables beside the claims, in the claim store's file.

Schema (a documented format, docs/content.md "Stored pages")::

    CREATE TABLE crawldedup_page_namespaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
        layout INTEGER NOT NULL, canonical_policy TEXT NOT NULL, content_policy TEXT NOT NULL,
        max_distance INTEGER NOT NULL)
    CREATE TABLE crawldedup_pages (namespace INTEGER NOT NULL, page INTEGER NOT NULL,
        simhash INTEGER NOT NULL, url TEXT NOT NULL, PRIMARY KEY (namespace, page)) WITHOUT ROWID
    CREATE TABLE crawldedup_page_blocks (namespace INTEGER NOT NULL, block INTEGER NOT NULL,
        page INTEGER NOT NULL, PRIMARY KEY (namespace, block, page)) WITHOUT ROWID

``page`` is the page id (:func:`~crawldedup.pages.plan.page_ids`), ``simhash`` the SimHash
as a signed 64-bit integer, ``block`` each of its k + 1 blocks as ``t << 32 | value`` (Manku
et al.'s blocked tables as one index: a lookup reads the pages sharing one of its blocks).
A batch is one ``BEGIN IMMEDIATE`` transaction over the claim store's connection (its channel:
blocking, or its worker thread for asyncio), so a batch is applied whole or not at all.
"""

from __future__ import annotations

import sqlite3
from typing import List, Optional

from .._plans import Plan
from ..stores.base import StoreCall, check_namespace_fields
from ..stores.sqlite import SQLiteStore, Work
from .base import PageStore
from .plan import PageBatch, Seen, block_values

__all__ = ["PAGE_LAYOUT_VERSION", "SQLitePages"]

#: Version of the page tables (recorded with each page namespace).
PAGE_LAYOUT_VERSION = 1
_SIGN = 1 << 63

_SCHEMA = """
CREATE TABLE IF NOT EXISTS crawldedup_page_namespaces (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, layout INTEGER NOT NULL,
    canonical_policy TEXT NOT NULL, content_policy TEXT NOT NULL, max_distance INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS crawldedup_pages (
    namespace INTEGER NOT NULL, page INTEGER NOT NULL, simhash INTEGER NOT NULL, url TEXT NOT NULL,
    PRIMARY KEY (namespace, page)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS crawldedup_page_blocks (
    namespace INTEGER NOT NULL, block INTEGER NOT NULL, page INTEGER NOT NULL,
    PRIMARY KEY (namespace, block, page)) WITHOUT ROWID;
"""


def _signed(simhash: int) -> int:
    return simhash - (1 << 64) if simhash >= _SIGN else simhash


def _unsigned(stored: int) -> int:
    return stored + (1 << 64) if stored < 0 else stored


class SQLitePages(PageStore):
    """Pages of ``namespace`` in the SQLite file of ``store`` (its calls go over the store's
    channel: :meth:`ClaimStore.perform` or :meth:`AsyncClaimStore.perform`).

    Nothing is read when made: the first exchange creates the tables and the namespace's
    record, or checks ours against it (:class:`NamespaceConflict` when they differ).
    """

    strategy = "sqlite"

    def __init__(self, store: SQLiteStore, *, namespace: str, max_distance: int, content_digest: str) -> None:
        super().__init__(max_distance, content_digest)
        self._store = store
        self.namespace = namespace
        #: The namespace's row id, once read.
        self._namespace: Optional[int] = None
        self._blocks = ",".join("?" * (max_distance + 1))

    @property
    def description(self) -> str:
        return f"pages of namespace {self.namespace!r} in the {self._store.description}"

    def _open_namespace(self, db: sqlite3.Connection) -> int:
        wanted = (PAGE_LAYOUT_VERSION, self._store.policy_digest, self.content_digest, self.max_distance)
        for statement in _SCHEMA.split(";")[:-1]:
            db.execute(statement)
        db.execute(
            "INSERT OR IGNORE INTO crawldedup_page_namespaces (name, layout, canonical_policy, "
            "content_policy, max_distance) VALUES (?, ?, ?, ?, ?)",
            (self.namespace, *wanted),
        )
        row = db.execute(
            "SELECT id, layout, canonical_policy, content_policy, max_distance FROM "
            "crawldedup_page_namespaces WHERE name = ?",
            (self.namespace,),
        ).fetchone()
        check_namespace_fields(
            f"{self._store.path}: the pages of namespace {self.namespace!r}",
            ("layout", "canonical_policy", "content_policy", "max_distance"),
            row[1:],
            wanted,
            pages=True,
        )
        return int(row[0])

    def exchange(self, batch: PageBatch) -> StoreCall[List[Seen]]:
        """One transaction (no token needed: a failed one leaves nothing, so every attempt
        starts from the same state)."""

        def plan(_token: bytes) -> Plan[List[Seen]]:
            if self._namespace is None:
                self._namespace = yield Work(self._open_namespace)
            namespace = self._namespace
            seen: List[Seen] = yield Work(lambda db: self._apply(db, namespace, batch))
            return seen

        return StoreCall(plan, size=len(batch.ids))

    def _apply(self, db: sqlite3.Connection, ns: int, batch: PageBatch) -> List[Seen]:
        k = self.max_distance
        near_sql = (
            f"SELECT DISTINCT p.page, p.simhash, p.url FROM crawldedup_page_blocks b JOIN crawldedup_pages p "
            f"ON p.namespace = b.namespace AND p.page = b.page "
            f"WHERE b.namespace = ? AND b.block IN ({self._blocks}) AND b.page != ?"
        )
        seen = []
        for page, simhash, url in zip(batch.ids, batch.simhashes, batch.urls):
            row = db.execute(
                "SELECT simhash FROM crawldedup_pages WHERE namespace = ? AND page = ?", (ns, page)
            ).fetchone()
            previous = None if row is None else _unsigned(row[0])
            blocks = [t << 32 | value for t, value in enumerate(block_values(simhash, k))]
            near = [(_unsigned(other), other_url) for _, other, other_url in db.execute(near_sql, (ns, *blocks, page))]
            seen.append(Seen(previous, near))
            if previous == simhash:
                continue
            if previous is not None:
                db.executemany(
                    "DELETE FROM crawldedup_page_blocks WHERE namespace = ? AND block = ? AND page = ?",
                    [(ns, t << 32 | value, page) for t, value in enumerate(block_values(previous, k))],
                )
            db.execute(
                "INSERT OR REPLACE INTO crawldedup_pages (namespace, page, simhash, url) VALUES (?, ?, ?, ?)",
                (ns, page, _signed(simhash), url),
            )
            db.executemany(
                "INSERT OR IGNORE INTO crawldedup_page_blocks (namespace, block, page) VALUES (?, ?, ?)",
                [(ns, block, page) for block in blocks],
            )
        return seen

    def bytes_per_page(self) -> StoreCall[Optional[float]]:
        """Bytes of the two page tables' pages per stored page, all namespaces together (reads
        both tables: for a report, not per batch)."""

        def measure(db: sqlite3.Connection) -> Optional[float]:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'crawldedup_pages'").fetchone() is None:
                return None
            pages = db.execute("SELECT count(*) FROM crawldedup_pages").fetchone()[0]
            used = db.execute(
                "SELECT sum(pgsize) FROM dbstat WHERE name IN ('crawldedup_pages', 'crawldedup_page_blocks')"
            ).fetchone()[0]
            return used / pages if pages else None

        def plan(_token: bytes) -> Plan[Optional[float]]:
            per_page: Optional[float] = yield Work(measure, write=False)
            return per_page

        return StoreCall(plan)

    def close(self) -> None:
        """Nothing to release: the connection is the claim store's."""
