"""The embedded exact store: a unique fingerprint table in one SQLite file, no server.

Schema (part of the documented format, see docs/stores.md)::

    CREATE TABLE crawldedup_namespaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                                        layout INTEGER NOT NULL, fingerprint TEXT NOT NULL,
                                        policy TEXT NOT NULL)
    CREATE TABLE crawldedup_claims (namespace INTEGER NOT NULL, fingerprint BLOB NOT NULL,
                                    PRIMARY KEY (namespace, fingerprint)) WITHOUT ROWID
    ALTER TABLE crawldedup_claims ADD COLUMN claimed_at REAL
    ALTER TABLE crawldedup_namespaces ADD COLUMN recrawl_window TEXT
    CREATE TABLE crawldedup_aliases (namespace INTEGER NOT NULL, requested BLOB NOT NULL,
                                     final BLOB NOT NULL, generation INTEGER NOT NULL,
                                     PRIMARY KEY (namespace, requested)) WITHOUT ROWID
    CREATE INDEX crawldedup_aliases_age ON crawldedup_aliases (namespace, generation)
    CREATE TABLE crawldedup_alias_counts (namespace INTEGER PRIMARY KEY, aliases INTEGER NOT NULL)

``claimed_at`` (seconds since the epoch, by the store's clock) is set by a store with a recrawl
window and NULL without one (such a claim never expires); the column is added on open to
every file, those made before it existed included. ``recrawl_window`` stamps the window a
namespace was made for (``base.window_stamp``): a store of another window is refused, naming
both; a namespace made before the column existed (NULL) opens with any. With a window, a claim
whose ``claimed_at`` is before the oldest live generation (``Window.live_since``) is won again
by the next claim, atomically:
``INSERT ... ON CONFLICT DO UPDATE SET claimed_at = ... WHERE claimed_at < ?``.

Every step is a plan (:mod:`crawldedup._plans`) whose requests are functions over the
connection, each run in one transaction: the sync store runs them in the calling thread, the
async one in the store's own worker thread, so the event loop never waits on the file.

A batch is one ``BEGIN IMMEDIATE`` transaction of ``INSERT OR IGNORE`` (claims; a row
inserted means won) and lookups (reads). While batches win every claim (every URL new, the
common case behind a local filter), the insert is tried without ``RETURNING`` inside a
savepoint: when it changed as many rows as the batch has distinct fingerprints, each first
occurrence won; otherwise it is rolled back to the savepoint and run again with ``RETURNING``,
and the next batches go that way until one wins every claim again. The file is in WAL mode, so several processes on
one host share it: writers take turns (waiting up to ``busy_timeout_seconds``), readers never
wait. ``synchronous=NORMAL``: a committed claim survives a process crash; a power cut may
roll back the last transactions, which the local filter of a restarted crawl does not know.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple, Union, cast

import numpy as np

from .._checks import WrongType, check_name, complaint
from .._plans import Plan, drive
from ..fingerprints import FINGERPRINT_ID, Fingerprints
from ..windows import Clock, Window, system_clock
from .aliases import Aliases, oldest_live, stamp
from .base import (
    LAYOUT_VERSION,
    ClaimAnswers,
    ClaimStore,
    Lease,
    RetryPolicy,
    ServerFacts,
    StoreCall,
    StoreOptions,
    StoreRefused,
    check_namespace_fields,
    check_policy_digest,
    check_window_stamp,
    required,
    window_stamp,
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
CREATE TABLE IF NOT EXISTS crawldedup_aliases (
    namespace INTEGER NOT NULL, requested BLOB NOT NULL, final BLOB NOT NULL, generation INTEGER NOT NULL,
    PRIMARY KEY (namespace, requested)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS crawldedup_aliases_age ON crawldedup_aliases (namespace, generation);
CREATE TABLE IF NOT EXISTS crawldedup_alias_counts (namespace INTEGER PRIMARY KEY, aliases INTEGER NOT NULL);
"""


# A batch is one statement: its fingerprints travel as one blob of 16-byte records (:fps, :count
# of them), which the statement cuts (substr of a blob counts bytes), so the per-fingerprint work
# stays in SQLite's C, not in one Python call of execute() per fingerprint. RETURNING names the
# rows the statement inserted (or, with a window, re-won: updated): the batch's wins.
# The rows 0 .. :count - 1 come from a recursive CTE stepping by 100 joined with a constant table
# of the 100 units (CROSS JOIN keeps the steps as the outer loop, so the rows come in order):
# the insert of 200,000 new fingerprints took 2.73 -> 2.36 us of CPU a claim against a
# recursive CTE stepping by one (medians of 9 alternating rounds).
_UNITS = ", ".join(f"({unit})" for unit in range(100))
_RECORDS = f"""WITH RECURSIVE hundreds(b) AS (SELECT 0 UNION ALL SELECT b + 100 FROM hundreds WHERE b + 100 < :count),
    units(x) AS (VALUES {_UNITS}),
    batch(n) AS (SELECT b + x FROM hundreds CROSS JOIN units WHERE b + x < :count)
"""
_FINGERPRINT = "substr(:fps, 16 * n + 1, 16)"
_CLAIM_FOR_EVER = (
    _RECORDS
    + f"""INSERT INTO crawldedup_claims (namespace, fingerprint)
    SELECT :ns, {_FINGERPRINT} FROM batch WHERE true
    ON CONFLICT (namespace, fingerprint) DO NOTHING RETURNING fingerprint"""
)
_LOOKUP_FOR_EVER = (
    _RECORDS
    + f"""SELECT fingerprint FROM crawldedup_claims
    WHERE namespace = :ns AND fingerprint IN (SELECT {_FINGERPRINT} FROM batch)"""
)
# A row is won when inserted, or when its claim was forgotten (claimed before :live): updated.
_CLAIM_IN_WINDOW = (
    _RECORDS
    + f"""INSERT INTO crawldedup_claims (namespace, fingerprint, claimed_at)
    SELECT :ns, {_FINGERPRINT}, :now FROM batch WHERE true
    ON CONFLICT (namespace, fingerprint) DO UPDATE SET claimed_at = excluded.claimed_at WHERE claimed_at < :live
    RETURNING fingerprint"""
)
_LOOKUP_IN_WINDOW = _LOOKUP_FOR_EVER + " AND (claimed_at IS NULL OR claimed_at >= :live)"
# The claims without RETURNING: RETURNING gathers the rows in a temporary table, then Python
# makes a tuple and a bytes object of each; a count of the rows changed is enough when the
# batch won all of them (measured 3.9 -> 2.6 us of CPU a claim for the statement with them).
_RETURNING = " RETURNING fingerprint"
_CLAIM_FOR_EVER_COUNTED = _CLAIM_FOR_EVER.removesuffix(_RETURNING)
_CLAIM_IN_WINDOW_COUNTED = _CLAIM_IN_WINDOW.removesuffix(_RETURNING)


class KeyOrder(NamedTuple):
    """A batch's fingerprints as one blob of 16-byte records in the claims table's key order,
    and, per fingerprint in the batch's order, whether it is the first of its value."""

    blob: bytes
    firsts: np.ndarray


def _in_key_order(fingerprints: Fingerprints) -> KeyOrder:
    """The batch in the claims table's key order (the records' bytes compared as memcmp does:
    ``h1`` then ``h2``, little-endian, so byte-swapped): the statement then walks the B-tree
    forward, each leaf page in turn while it is still in the CPU's cache, instead of a random
    leaf per row. A batch's answers do not depend on the order of its rows (RETURNING names
    them; a repeat is lost to its first). The sort is stable, so a repeat follows its first."""
    swapped = fingerprints.hashes.byteswap()
    order = np.lexsort((swapped[:, 1], swapped[:, 0]))
    ordered = fingerprints.hashes[order]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    firsts = np.zeros(len(order), dtype=bool)
    firsts[order[starts]] = True
    return KeyOrder(ordered.astype("<u8", copy=False).tobytes(), firsts)


def _firsts_in(fingerprints: List[bytes], found: Set[bytes]) -> List[bool]:
    """Per fingerprint, whether ``found`` holds it, once: a repeat in the batch is lost to the first."""
    answers = []
    for fp in fingerprints:
        answers.append(fp in found)
        found.discard(fp)
    return answers


def _add_column(db: sqlite3.Connection, table: str, column: str, kind: str) -> None:
    """Add a column to a file made before it existed (another process may race us)."""
    columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
    if column not in columns:
        try:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise


class Work(NamedTuple):
    """One request of a SQLite plan: ``run(connection)`` under the store's lock, in one
    ``BEGIN IMMEDIATE`` transaction when ``write`` (a read alone needs none)."""

    run: Callable[[sqlite3.Connection], Any]
    write: bool = True


#: SQLITE_BUSY and SQLITE_LOCKED (primary result codes): another connection holds a lock.
#: Every other error about the file stays until someone changes the file.
_TRANSIENT_CODES = (5, 6)


def file_problem(path: Path, error: BaseException) -> str:
    """What is wrong with the database file at ``path``, which gave ``error``, in a few words."""
    try:
        return _file_problem(path, str(error))
    except OSError as exc:  # a path the system refuses to look at (too long, a loop of links...)
        return f"the path cannot be used: {exc.strerror or exc}"


def _file_problem(path: Path, text: str) -> str:
    if path.is_dir():
        return "the path is a directory, not a SQLite database file"
    if not path.parent.is_dir():
        return f"the file's directory {str(path.parent)!r} does not exist"
    if path.exists() and not os.access(path, os.R_OK):
        return "the file cannot be read (permission denied)"
    if "not a database" in text:
        return "the file is not a SQLite database"
    if "malformed" in text:
        return "the file is a corrupt SQLite database"
    if "readonly" in text or (path.exists() and not os.access(path, os.W_OK)):
        return "the file is read-only: the store writes its claims there (make it writable, or use another file)"
    if "unable to open" in text:
        return (
            "the file cannot be opened: its directory must be writable (SQLite keeps the -wal and -shm files beside it)"
        )
    return text


class SQLiteStore(ClaimStore):
    """Exact claims in a SQLite file shared by the processes of one host (about 40 bytes per URL).

    :param path: the database file (created with its tables when missing).
    :param namespace: name of this crawl (and round); one file holds many.
    :param policy_digest: digest of the canonical policy behind the fingerprints.
    :param busy_timeout_seconds: how long to wait for another writer before an attempt fails.
    :param retry: retries after "database is locked" (the only transient error of a file).
    :param window: the recrawl window claims are forgotten after (None: never).
    :param clock: the time source of the window.
    :param asynchronous: open nothing now; the store is opened and used through
        :class:`~crawldedup.stores.aio.AsyncClaimStore`, its file in a worker thread.
    :raises TypeError: for a path that is not a ``str`` or path-like object.
    :raises ValueError: for a bad namespace or digest.
    :raises NamespaceConflict: when the namespace was made under another policy or layout.
    :raises StoreRefused: at once, naming the file, when it is not a SQLite database, is a
        directory, cannot be read or written, or its directory is missing.
    :raises StoreUnavailable: when the file stays locked by another process.
    """

    strategy = "sqlite"
    kind = "sqlite"
    store_errors = (sqlite3.DatabaseError,)
    supports_unclaim = True
    supports_aliases = True

    @classmethod
    def from_options(cls, options: StoreOptions) -> SQLiteStore:
        options = StoreOptions.given(options)
        path = required(options.sqlite_path, cls.strategy, "sqlite_path", "CRAWLDEDUP_SQLITE")
        return cls(cast(Union[str, "os.PathLike[str]"], path), **options.common())  # mypy joins the union

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        namespace: str,
        policy_digest: str,
        busy_timeout_seconds: float = BUSY_TIMEOUT_SECONDS,
        retry: Optional[RetryPolicy] = None,
        window: Optional[Window] = None,
        clock: Clock = system_clock,
        asynchronous: bool = False,
    ) -> None:
        super().__init__(retry, window, clock, asynchronous=asynchronous)
        self.path = Path(path)
        self.namespace = check_name("namespace", namespace)
        self.policy_digest = check_policy_digest(policy_digest)
        self._busy_timeout_seconds = busy_timeout_seconds
        self._lock = threading.Lock()
        self._db: Optional[sqlite3.Connection] = None
        #: Whether the last batch won every claim, so the next one is first tried without RETURNING.
        self._expect_all_won = True
        #: The thread an asynchronous store runs its file's work in (one: the work is serial).
        self._worker: Optional[ThreadPoolExecutor] = None
        if asynchronous:
            return
        self._db = self.with_retries(lambda: self._connect(busy_timeout_seconds))
        try:
            self.with_retries(lambda: drive(self._open(), self._send))
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
            _add_column(db, "crawldedup_claims", "claimed_at", "REAL")
            _add_column(db, "crawldedup_namespaces", "recrawl_window", "TEXT")
        except BaseException:
            db.close()
            raise
        return db

    def _send(self, request: Work) -> Any:
        if not request.write:
            with self._lock:
                return request.run(self._connection())
        with self._transaction() as db:
            return request.run(db)

    async def _asend(self, request: Work) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._worker, self._send, request)

    async def _aconnect(self) -> None:
        if self._db is None:
            self._worker = self._worker or ThreadPoolExecutor(1, thread_name_prefix="crawldedup-sqlite")
            loop = asyncio.get_running_loop()
            self._db = await loop.run_in_executor(self._worker, self._connect, self._busy_timeout_seconds)

    # -- operators' tools ---------------------------------------------------------------------

    @classmethod
    def read_record(cls, namespace: str, location: Any) -> Optional[Dict[str, str]]:
        if location is not None and not isinstance(location, (str, os.PathLike)):
            raise WrongType(complaint("sqlite_path", "a file path", location))
        path = Path(location) if location is not None else None
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

    def server_facts(self) -> ServerFacts:
        def facts() -> ServerFacts:
            with self._lock:
                db = self._connection()
                pages = db.execute("PRAGMA page_count").fetchone()[0]
                free = db.execute("PRAGMA freelist_count").fetchone()[0]
                page_size = db.execute("PRAGMA page_size").fetchone()[0]
            disk_free = shutil.disk_usage(self.path.resolve().parent).free
            return ServerFacts(
                f"SQLite {sqlite3.sqlite_version}",
                (),
                (pages - free) * page_size,
                pages * page_size + disk_free,
                "the file's size and the free disk space",
            )

        return self.with_retries(facts)

    def delete_namespace(self) -> int:
        def delete() -> int:
            with self._transaction() as db:
                space = (self._namespace_id,)
                rows = db.execute("DELETE FROM crawldedup_claims WHERE namespace = ?", space).rowcount
                rows += db.execute("DELETE FROM crawldedup_aliases WHERE namespace = ?", space).rowcount
                db.execute("DELETE FROM crawldedup_alias_counts WHERE namespace = ?", space)
                rows += db.execute("DELETE FROM crawldedup_namespaces WHERE id = ?", space).rowcount
            return int(rows)

        return self.with_retries(delete)

    def count_claims(self) -> int:
        def rows() -> int:
            with self._lock:
                query = "SELECT count(*) FROM crawldedup_claims WHERE namespace = ?"
                return int(self._connection().execute(query, (self._namespace_id,)).fetchone()[0])

        return self.with_retries(rows)

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise ValueError(f"{self.description} is not open")
        return self._db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction under this store's lock, rolled back on any error."""
        with self._lock:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _refusal(self, error: BaseException) -> Optional[str]:
        code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+; the text before that
        if code is not None:
            transient = code & 0xFF in _TRANSIENT_CODES
        else:
            transient = any(word in str(error) for word in ("is locked", "busy"))
        if transient:
            return None
        return file_problem(self.path, error)

    def _open(self) -> Plan[None]:
        wanted = (LAYOUT_VERSION, FINGERPRINT_ID, self.policy_digest)

        def record(db: sqlite3.Connection) -> Any:
            db.execute(
                "INSERT OR IGNORE INTO crawldedup_namespaces (name, layout, fingerprint, policy, recrawl_window) "
                "VALUES (?, ?, ?, ?, ?)",
                (self.namespace, *wanted, window_stamp(self.window)),
            )
            return db.execute(
                "SELECT id, layout, fingerprint, policy, recrawl_window FROM crawldedup_namespaces WHERE name = ?",
                (self.namespace,),
            ).fetchone()

        row = yield Work(record)
        check_namespace_fields(
            f"{self.path}: namespace {self.namespace!r}", ("layout", "fingerprint", "policy"), row[1:4], wanted
        )
        check_window_stamp(f"{self.path}: namespace {self.namespace!r}", row[4], self.window)
        self._namespace_id = int(row[0])

    def _exchange(
        self, claims: Fingerprints, reads: Fingerprints, lease: Optional[Lease], token: bytes
    ) -> Plan[ClaimAnswers]:
        # No token needed: the batch is one transaction in this process, and a failed COMMIT
        # leaves nothing (rolled back below), so every attempt starts from the same state.
        terms: Dict[str, Any] = {"ns": self._namespace_id}
        if self.window is None:
            insert, counted, lookup = _CLAIM_FOR_EVER, _CLAIM_FOR_EVER_COUNTED, _LOOKUP_FOR_EVER
        else:
            now = self.clock()
            insert, counted, lookup = _CLAIM_IN_WINDOW, _CLAIM_IN_WINDOW_COUNTED, _LOOKUP_IN_WINDOW
            terms.update(now=now, live=self.window.live_since(now))

        def found(db: sqlite3.Connection, statement: str, blob: bytes, count: int) -> Set[bytes]:
            if not count:
                return set()
            return {row[0] for row in db.execute(statement, {**terms, "fps": blob, "count": count})}

        def all_won(db: sqlite3.Connection, batch: KeyOrder, distinct: int) -> bool:
            """Claim the batch without RETURNING: whether every distinct fingerprint was won
            (a row changed is a row inserted, or re-won in the window); nothing changed if not."""
            db.execute("SAVEPOINT all_won")
            before = db.total_changes
            db.execute(counted, {**terms, "fps": batch.blob, "count": len(claims)})
            won = db.total_changes - before == distinct
            if not won:
                db.execute("ROLLBACK TO all_won")
            db.execute("RELEASE all_won")
            return won

        def claim(db: sqlite3.Connection) -> ClaimAnswers:
            batch = _in_key_order(claims)
            distinct = int(batch.firsts.sum())
            if distinct and self._expect_all_won and all_won(db, batch, distinct):
                won = batch.firsts.tolist()
            else:
                found_rows = found(db, insert, batch.blob, len(claims))
                self._expect_all_won = len(found_rows) == distinct
                won = _firsts_in(claims.as_bytes(), found_rows)
            present = found(db, lookup, _in_key_order(reads).blob, len(reads))
            return ClaimAnswers(won, [fp in present for fp in reads.as_bytes()])

        answers: ClaimAnswers = yield Work(claim)
        return answers

    def _record_aliases(self, aliases: Aliases) -> Plan[None]:
        """Insert or update the aliases; then, in the same transaction, delete the forgotten ones
        and, past the bound, the oldest generations' first (ties in key order). The namespace's
        count of aliases is kept in ``crawldedup_alias_counts``, so no write counts the table."""
        ns, generation, oldest = (
            self._namespace_id,
            stamp(self.window, self.clock),
            oldest_live(self.window, self.clock),
        )
        pairs = list(zip(aliases.requested.as_bytes(), aliases.finals.as_bytes()))

        def record(db: sqlite3.Connection) -> None:
            count_row = db.execute("SELECT aliases FROM crawldedup_alias_counts WHERE namespace = ?", (ns,)).fetchone()
            count = count_row[0] if count_row is not None else 0
            for requested, final in pairs:
                if db.execute(
                    "INSERT OR IGNORE INTO crawldedup_aliases (namespace, requested, final, generation) "
                    "VALUES (?, ?, ?, ?)",
                    (ns, requested, final, generation),
                ).rowcount:
                    count += 1
                else:
                    db.execute(
                        "UPDATE crawldedup_aliases SET final = ?, generation = ? WHERE namespace = ? AND requested = ?",
                        (final, generation, ns, requested),
                    )
            count -= db.execute(
                "DELETE FROM crawldedup_aliases WHERE namespace = ? AND generation < ?", (ns, oldest)
            ).rowcount
            if count > aliases.capacity:
                count -= db.execute(
                    "DELETE FROM crawldedup_aliases WHERE namespace = ? AND requested IN (SELECT "
                    "requested FROM crawldedup_aliases WHERE namespace = ? ORDER BY generation LIMIT ?)",
                    (ns, ns, count - aliases.capacity),
                ).rowcount
            db.execute(
                "INSERT INTO crawldedup_alias_counts (namespace, aliases) VALUES (?, ?) "
                "ON CONFLICT (namespace) DO UPDATE SET aliases = excluded.aliases",
                (ns, count),
            )

        yield Work(record)

    def _read_aliases(self, fingerprints: Fingerprints) -> Plan[List[Optional[bytes]]]:
        ns, oldest = self._namespace_id, oldest_live(self.window, self.clock)

        def read(db: sqlite3.Connection) -> List[Optional[bytes]]:
            found = [
                db.execute(
                    "SELECT final FROM crawldedup_aliases WHERE namespace = ? AND requested = ? AND generation >= ?",
                    (ns, fp, oldest),
                ).fetchone()
                for fp in fingerprints.as_bytes()
            ]
            return [bytes(row[0]) if row is not None else None for row in found]

        finals: List[Optional[bytes]] = yield Work(read, write=False)
        return finals

    def _joined(self, first: Work, second: Work) -> Tuple[Work, Callable[[Any], Tuple[Any, Any]]]:
        def both(db: sqlite3.Connection) -> Tuple[Any, Any]:
            return first.run(db), second.run(db)

        return Work(both, write=first.write or second.write), lambda replies: replies

    def _unclaim(self, fingerprints: Fingerprints) -> Plan[None]:
        ns = self._namespace_id
        rows = [(ns, fp) for fp in fingerprints.as_bytes()]
        yield Work(
            lambda db: db.executemany("DELETE FROM crawldedup_claims WHERE namespace = ? AND fingerprint = ?", rows)
        )

    def _measure(self) -> StoreCall[Optional[float]]:
        """Bytes of the database pages in use per claimed URL, all namespaces together; None
        while the file holds no claim. Counting rows reads the whole table: call it for a
        report, not per batch."""

        def measure(db: sqlite3.Connection) -> Optional[float]:
            rows = db.execute("SELECT count(*) FROM crawldedup_claims").fetchone()[0]
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
            page_size = db.execute("PRAGMA page_size").fetchone()[0]
            return (pages - free) * page_size / rows if rows else None

        def plan(_token: bytes) -> Plan[Optional[float]]:
            per_url: Optional[float] = yield Work(measure, write=False)
            return per_url

        return StoreCall(plan)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()

    async def aclose(self) -> None:
        if self._worker is None:
            self.close()
            return
        await asyncio.get_running_loop().run_in_executor(self._worker, self.close)
        self._worker.shutdown(wait=False)
        self._db, self._worker = None, None
