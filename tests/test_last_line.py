"""The last line of defence (examples/last_line.py, docs/stores.md): with a dedup bug that tells
two workers they both won every page, the result table still holds each page once, on a real
PostgreSQL and on SQLite; and its ``url_fp`` is the key the claim stores hold."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

from crawldedup import Deduplicator

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "last_line.py"
PAGES = 300


def _load_example():
    spec = importlib.util.spec_from_file_location("last_line", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


last_line = _load_example()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'pages.db'}"
    request.getfixturevalue("postgres_url")
    server = request.getfixturevalue("postgres_server")
    server.sql("DROP TABLE IF EXISTS pages")
    return server.url().replace("postgresql://", "postgresql+psycopg://")


def spellings(worker: int) -> List[str]:
    """The crawl's pages, spelled differently by each worker (the same canonical pages)."""
    if worker == 0:
        return [f"https://shop.example/item/{i}?b=2&a=1" for i in range(PAGES)]
    return [f"HTTPS://SHOP.EXAMPLE:443/item/{i}?a=1&b=2&utm_source=mail#top" for i in reversed(range(PAGES))]


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """The example's result table; its connections closed after the test, whatever its outcome."""
    engine = last_line.open_pages(database_url)
    yield engine
    engine.dispose()


def test_two_workers_both_told_won_write_each_page_once(engine):
    # The injected bug: each worker dedups alone (the local strategy, no shared store), so both
    # are told they won every page, and both fetch and write all of them, at the same moment.
    told_won: Dict[int, int] = {}
    written: Dict[int, int] = {}
    start = threading.Barrier(2)
    # SQLAlchemy fills a statement class's cache-key attributes on first use, and two threads doing
    # so at once can fail (KeyError '_generated_cache_key_traversal'): one insert, rolled back, first.
    with Session(engine) as session:
        assert last_line.save_pages(session, [("https://warm.example/", "")]) == 1
        session.rollback()

    def worker(n: int) -> None:
        with Deduplicator("local", capacity=10_000) as dedup:
            start.wait()
            written[n] = last_line.crawl(dedup, engine, spellings(n), lambda url: f"<html>{url} by {n}</html>")
            told_won[n] = dedup.stats.won

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert told_won == {0: PAGES, 1: PAGES}, "the bug was not injected"
    with Session(engine) as session:
        rows = session.execute(select(func.count(), func.count(func.distinct(last_line.Page.url_fp)))).one()
    assert tuple(rows) == (PAGES, PAGES)
    assert written[0] + written[1] == PAGES  # every page written once, by one of the two


def test_url_fp_is_the_key_the_claim_stores_hold(engine, tmp_path):
    urls = spellings(0)[:50]
    with Deduplicator("sqlite", sqlite_path=tmp_path / "claims.sqlite", namespace="crawl", capacity=10_000) as dedup:
        assert last_line.crawl(dedup, engine, urls, lambda url: "body") == 50
        assert last_line.crawl(dedup, engine, spellings(1)[-50:], lambda url: "body") == 0  # claimed: not fetched
        with Session(engine) as session:
            keys = list(session.scalars(select(last_line.Page.url_fp)))
        assert dedup.store is not None
        assert dedup.store.contains_many(keys) == [True] * 50
    with Session(engine) as session, session.begin():
        assert session.execute(text("SELECT count(*) FROM pages")).scalar_one() == 50
