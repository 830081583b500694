"""The embedded exact store: a unique fingerprint table in one SQLite file, no server.

Schema (part of the documented format, see docs/stores.md)::

    CREATE TABLE crawldedup_namespaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                                        layout INTEGER NOT NULL, fingerprint TEXT NOT NULL,
                                        policy TEXT NOT NULL)
    CREATE TABLE crawldedup_claims (namespace INTEGER NOT NULL, fingerprint BLOB NOT NULL,
                                    PRIMARY KEY (namespace, fingerprint)) WITHOUT ROWID

A batch is one ``BEGIN IMMEDIATE`` transaction of ``INSERT OR IGNORE`` (claims; a row
inserted means won) and lookups (reads). The file is in WAL mode, so several processes on
one host share it: writers take turns (waiting up to ``busy_timeout_seconds``), readers never
wait. ``synchronous=NORMAL``: a committed claim survives a process crash; a power cut may
roll back the last transactions, which the local filter of a restarted crawl does not know.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from contextlib import contextmanager
from typing import Iterator, Optional, Union

from .._checks import check_name
from ..fingerprints import FINGERPRINT_ID, Fingerprints
from .base import (
    LAYOUT_VERSION,
    ClaimAnswers,
    ClaimStore,
    Lease,
    NamespaceConflict,
    RetryPolicy,
    check_policy_digest,
)

#: SQLite page cache per connection, in KiB (a ceiling, allocated as pages are read).
CACHE_KIB = 65_536
#: How long a writer waits for another process's transaction before the attempt fails.
BUSY_TIMEOUT_SECONDS = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS crawldedup_namespaces (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, layout INTEGER NOT NULL,
    fingerprint TEXT NOT NULL, policy TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS crawldedup_claims (
    namespace INTEGER NOT NULL, fingerprint BLOB NOT NULL,
    PRIMARY KEY (namespace, fingerprint)) WITHOUT ROWID;
"""


class SQLiteStore(ClaimStore):
    """Exact claims in a SQLite file shared by the processes of one host (about 40 bytes per URL).

    :param path: the database file (created with its tables when missing).
    :param namespace: name of this crawl (and round); one file holds many.
    :param policy_digest: digest of the canonical policy behind the fingerprints.
    :param busy_timeout_seconds: how long to wait for another writer before an attempt fails.
    :param retry: retries after "database is locked" and other operational errors.
    :raises ValueError: for a bad namespace or digest.
    :raises NamespaceConflict: when the namespace was made under another policy or layout.
    :raises StoreUnavailable: when the file cannot be opened or stays locked.
    """

    strategy = "sqlite"
    kind = "sqlite"
    transient_errors = (sqlite3.OperationalError,)

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        namespace: str,
        policy_digest: str,
        busy_timeout_seconds: float = BUSY_TIMEOUT_SECONDS,
        retry: Optional[RetryPolicy] = None,
    ) -> None:
        super().__init__(retry)
        self.path = Path(path)
        self.namespace = check_name("namespace", namespace)
        self.policy_digest = check_policy_digest(policy_digest)
        self._lock = threading.Lock()
        self._db = self._with_retries(lambda: self._connect(busy_timeout_seconds))
        try:
            self._namespace_id = self._with_retries(self._open_namespace)
        except BaseException:  # NamespaceConflict, StoreUnavailable: no store, so no open connection
            self._db.close()
            raise

    @property
    def description(self) -> str:
        return f"sqlite store {str(self.path)!r} namespace {self.namespace!r}"

    def _connect(self, busy_timeout_seconds: float) -> sqlite3.Connection:
        # isolation_level=None: transactions are the explicit BEGIN IMMEDIATE below.
        db = sqlite3.connect(self.path, timeout=busy_timeout_seconds, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # Random fingerprints touch random B-tree pages: a 64 MiB page cache (default 2 MiB)
            # took claims of 3M random fingerprints from 50,000/s to 75,000/s here.
            db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            db.executescript(_SCHEMA)
        except sqlite3.OperationalError:
            db.close()
            raise
        except sqlite3.DatabaseError as exc:  # not a database, corrupt: name the file
            db.close()
            raise sqlite3.DatabaseError(f"{self.path}: {exc}") from exc
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction under this store's lock, rolled back on any error."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _open_namespace(self) -> int:
        wanted = (LAYOUT_VERSION, FINGERPRINT_ID, self.policy_digest)
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO crawldedup_namespaces (name, layout, fingerprint, policy) VALUES (?, ?, ?, ?)",
                (self.namespace, *wanted),
            )
            row = db.execute(
                "SELECT id, layout, fingerprint, policy FROM crawldedup_namespaces WHERE name = ?", (self.namespace,)
            ).fetchone()
        for field, stored, ours in zip(("layout", "fingerprint", "policy"), row[1:], wanted):
            if stored != ours:
                raise NamespaceConflict(
                    f"{self.path}: namespace {self.namespace!r} holds {field}={stored!r}, "
                    f"this store uses {field}={ours!r}: pick another namespace (or round)"
                )
        return int(row[0])

    def _exchange(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes
    ) -> ClaimAnswers:
        # No token needed: the batch is one transaction in this process, and a failed COMMIT
        # leaves nothing (rolled back below), so every attempt starts from the same state.
        insert = "INSERT OR IGNORE INTO crawldedup_claims (namespace, fingerprint) VALUES (?, ?)"
        lookup = "SELECT 1 FROM crawldedup_claims WHERE namespace = ? AND fingerprint = ?"
        ns = self._namespace_id
        with self._transaction() as db:
            won = [db.execute(insert, (ns, fp)).rowcount == 1 for fp in claims.as_bytes()]
            present = [db.execute(lookup, (ns, fp)).fetchone() is not None for fp in reads.as_bytes()]
        return ClaimAnswers(won, present)

    def bytes_per_url(self) -> Optional[float]:
        """Bytes of the database pages in use per claimed URL, all namespaces together.

        Counting rows reads the whole table: call it for a report, not per batch.

        :returns: None while the file holds no claim.
        :raises StoreUnavailable: when the file cannot be read.
        """

        def measure() -> Optional[float]:
            with self._lock:
                rows = self._db.execute("SELECT count(*) FROM crawldedup_claims").fetchone()[0]
                pages = self._db.execute("PRAGMA page_count").fetchone()[0]
                free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
                page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
            return (pages - free) * page_size / rows if rows else None

        return self._with_retries(measure)

    def close(self) -> None:
        with self._lock:
            self._db.close()
