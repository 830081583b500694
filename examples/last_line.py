"""The last line of defence: a result table that holds each page once, whatever dedup answered.

The claim stores decide which worker fetches a page. Where the pages end up, a unique column
keeps one row per page even if that decision goes wrong (a bug, a misconfigured worker, a
failover that lost a claim): the ``pages`` table below has a unique ``url_fp``, the 16-byte
fingerprint of the page's canonical URL, the same key the claim stores hold, and pages are
written with ``INSERT ... ON CONFLICT (url_fp) DO NOTHING``, on PostgreSQL and on SQLite.

Usage (``pip install crawldedup sqlalchemy``, and ``psycopg`` for PostgreSQL)::

    python examples/last_line.py sqlite:///pages.db https://example.com/ https://example.com/?utm_source=x
    python examples/last_line.py postgresql+psycopg://user:password@host/db https://example.com/

The Deduplicator is configured by the environment (``CRAWLDEDUP_STRATEGY``...; docs/stores.md).
"""

import sys
import urllib.request
from typing import Callable, Dict, List, Sequence, Tuple

from sqlalchemy import Engine, LargeBinary, Text, create_engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from crawldedup import Deduplicator, fingerprint


class Base(DeclarativeBase):
    pass


class Page(Base):
    """One fetched page, keyed by ``url_fp``: ``crawldedup.fingerprint`` of its canonical URL."""

    __tablename__ = "pages"

    id: Mapped[int] = mapped_column(primary_key=True)
    url_fp: Mapped[bytes] = mapped_column(LargeBinary(16), unique=True)
    url: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)


#: The dialects whose INSERT has ``on_conflict_do_nothing``.
INSERTS = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def open_pages(database_url: str) -> Engine:
    """The database of the results, with its ``pages`` table created when missing."""
    engine = create_engine(database_url)
    Base.metadata.create_all(engine)
    return engine


def save_pages(session: Session, pages: Sequence[Tuple[str, str]]) -> int:
    """Write ``(canonical URL, body)`` pairs; a page already in the table is left as it is.

    Rows go in ``url_fp`` order: two transactions writing the same pages then wait for each other
    in one order, never in opposite orders (which PostgreSQL would end as a deadlock).

    :returns: the pages written by this call (the others were there already).
    """
    rows: Dict[bytes, Dict[str, object]] = {}
    for url, body in pages:
        rows.setdefault(fingerprint(url), {"url_fp": fingerprint(url), "url": url, "body": body})
    if not rows:
        return 0
    insert = INSERTS[session.get_bind().dialect.name]
    statement = insert(Page).values([rows[key] for key in sorted(rows)])
    written = session.execute(statement.on_conflict_do_nothing(index_elements=[Page.url_fp]).returning(Page.url_fp))
    return len(written.all())


def crawl(dedup: Deduplicator, engine: Engine, urls: Sequence[str], fetch: Callable[[str], str]) -> int:
    """Claim ``urls``, fetch the pages this worker won and save them; returns the pages written."""
    batch = dedup.claim_batch(list(urls))
    won: List[str] = [canonical for canonical, w in zip(batch.canonical, batch.won) if w and canonical]
    pages = [(url, fetch(url)) for url in won]
    with Session(engine) as session, session.begin():
        return save_pages(session, pages)


def fetch_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode("utf-8", errors="replace")


def main(argv: Sequence[str]) -> None:
    if len(argv) < 2:
        sys.exit("usage: python examples/last_line.py DATABASE_URL URL...")
    engine = open_pages(argv[0])
    with Deduplicator.from_env() as dedup:
        print(f"{crawl(dedup, engine, argv[1:], fetch_text)} pages written")


if __name__ == "__main__":
    main(sys.argv[1:])
