"""The postgres store against a real PostgreSQL server (conftest.py starts it): its documented
tables, lost replies, permanent errors refused once, a server that goes away and comes back.

The contract every store meets (claims, reads, namespaces, windows, races, asyncio) runs on
postgres in tests/test_stores.py, test_store_windows.py, test_claim_race.py and test_async.py.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import psycopg
import pytest
from conftest import LosingProxy, PostgresServer

from crawldedup import Deduplicator, NamespaceConflict, StoreRefused, StoreUnavailable
from crawldedup.fingerprints import FINGERPRINT_ID
from crawldedup.stores import PostgresStore, RetryPolicy
from crawldedup.stores.base import LAYOUT_VERSION
from crawldedup.stores.factory import open_async_store

pytestmark = pytest.mark.postgres
DIGEST = "0123456789abcdef"
RETRY = RetryPolicy(retries=2, backoff_seconds=0.01, max_backoff_seconds=0.05)
COMMAND = [sys.executable, "-m", "crawldedup"]


def fingerprints(n: int, seed: int) -> List[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(n)]


def store(url: str, namespace: str = "crawl", **kwargs) -> PostgresStore:
    return PostgresStore(url, namespace=namespace, policy_digest=DIGEST, retry=kwargs.pop("retry", RETRY), **kwargs)


def rows(url: str, query: str) -> list:
    with psycopg.connect(url) as db:
        return db.execute(query).fetchall()


@pytest.fixture
def proxy(postgres_url: str, postgres_server: PostgresServer) -> Iterator[LosingProxy]:
    """A losing proxy in front of the session's PostgreSQL."""
    losing = LosingProxy(postgres_server.port)
    losing.url = f"postgresql://postgres:{postgres_server.PASSWORD}@127.0.0.1:{losing.port}/postgres"
    yield losing
    losing.close()


# -- the documented format ---------------------------------------------------------------------


def test_the_tables_are_the_documented_ones(postgres_url):
    fps = fingerprints(10, seed=1)
    with store(postgres_url) as one, store(postgres_url, "crawl:r2") as two:
        one.claim_many(fps)
        two.claim_many(fps[:3])
    records = rows(
        postgres_url,
        "SELECT id, name, layout, store, fingerprint, policy, recrawl_window FROM crawldedup.namespaces ORDER BY id",
    )
    assert [r[1:] for r in records] == [
        ("crawl", LAYOUT_VERSION, "postgres", FINGERPRINT_ID, DIGEST, "none"),
        ("crawl:r2", LAYOUT_VERSION, "postgres", FINGERPRINT_ID, DIGEST, "none"),
    ]
    columns = rows(
        postgres_url,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        f"WHERE table_schema = 'crawldedup' AND table_name = 'claims_{records[0][0]}' "
        "ORDER BY ordinal_position",
    )
    assert columns == [
        ("fingerprint", "bytea", "NO"),
        ("token", "bigint", "NO"),
        ("claimed_at", "double precision", "YES"),
    ]
    first = rows(postgres_url, f"SELECT fingerprint, claimed_at FROM crawldedup.claims_{records[0][0]}")
    assert sorted(bytes(fp) for fp, _ in first) == sorted(fps)
    assert {at for _, at in first} == {None}  # no window: never forgotten
    assert len(rows(postgres_url, f"SELECT 1 FROM crawldedup.claims_{records[1][0]}")) == 3


def test_a_namespace_of_another_store_kind_is_refused(postgres_url):
    store(postgres_url).close()
    with psycopg.connect(postgres_url) as db:
        db.execute("UPDATE crawldedup.namespaces SET store = 'sqlite' WHERE name = 'crawl'")
    with pytest.raises(
        NamespaceConflict, match="holds the claims of the sqlite strategy, this is the postgres strategy"
    ):
        store(postgres_url)


def test_unclaim_and_bytes_per_url(postgres_url):
    fps = fingerprints(2_000, seed=2)
    with store(postgres_url) as s:
        assert s.bytes_per_url() is None
        s.claim_many(fps)
        measured = s.bytes_per_url()
        assert measured is not None and 40 < measured < 400
        s.unclaim_many(fps[:500])
        assert s.claim_many(fps[:600]) == [True] * 500 + [False] * 100


# -- lost replies --------------------------------------------------------------------------------


def test_lost_reply_then_retry_gives_the_same_answers(proxy, postgres_url):
    fps = fingerprints(200, seed=3)
    batch = fps + fps[:20]
    with store(postgres_url, "clean") as clean:
        expected = clean.claim_many(batch)
    assert expected == [True] * 200 + [False] * 20
    with store(proxy.url, "faulty") as s:
        proxy.lose_next_reply()
        assert s.claim_many(batch) == expected
        assert proxy.replies_lost == 1 and s.failed_attempts == 1
    with store(postgres_url, "faulty") as other:
        assert other.claim_many(batch) == [False] * len(batch)  # none won twice
        assert other.contains_many(batch) == [True] * len(batch)  # none lost


def test_an_applied_batch_that_failed_is_resumed_as_won(proxy, postgres_url):
    """Lost reply, then the server unreachable for every retry: StoreUnavailable, although the
    server applied the batch. The same batch claimed again resumes the call (its token): won,
    not lost to someone else; a new call then finds it taken."""
    fps, others = fingerprints(200, seed=4), fingerprints(50, seed=5)
    with store(proxy.url, "resume") as s:
        proxy.lose_next_reply()
        proxy.refuse = True
        with pytest.raises(StoreUnavailable):
            s.claim_many(fps)
        proxy.refuse = False
        ((table,),) = rows(postgres_url, "SELECT id FROM crawldedup.namespaces WHERE name = 'resume'")
        ((applied,),) = rows(postgres_url, f"SELECT count(*) FROM crawldedup.claims_{table}")
        assert applied == len(fps), "the server did not apply the batch: the test proves nothing"
        assert s.claim_many(others) == [True] * len(others)  # another batch in between
        assert s.claim_many(fps) == [True] * len(fps)
        assert s.claim_many(fps) == [False] * len(fps)
    with store(postgres_url, "resume") as rival:
        assert rival.claim_many(fps + others) == [False] * (len(fps) + len(others))


def test_another_call_with_the_same_claims_loses(postgres_url):
    """The token answers only the call that carries it: another store's call of the same
    fingerprints finds them taken."""
    fps = fingerprints(100, seed=6)
    with store(postgres_url, "tokens") as s, store(postgres_url, "tokens") as rival:
        assert s.claim_many(fps) == [True] * len(fps)
        assert rival.claim_many(fps) == [False] * len(fps)
        assert s.claim_many(fps) == [False] * len(fps)


@pytest.mark.asyncio
async def test_async_store_through_a_lost_reply(proxy, postgres_url):
    fps = fingerprints(150, seed=7)
    shell = open_async_store(
        "postgres",
        namespace="async",
        policy_digest=DIGEST,
        postgres_url=proxy.url,
        capacity=1,
        error_rate=0.1,
        retry=RETRY,
    )
    async with shell:
        await shell.claim_many(fps[:1])  # connected and opened
        proxy.lose_next_reply()
        assert await shell.claim_many(fps) == [False] + [True] * 149
        assert proxy.replies_lost == 1 and shell.store.failed_attempts == 1
    with store(postgres_url, "async") as other:
        assert other.contains_many(fps) == [True] * len(fps)


# -- errors: permanent ones refused once, transient ones retried --------------------------------


@pytest.mark.parametrize(
    "case, problem",
    [
        ("password", "refused the URL's user or password"),
        ("user", "refused the URL's user or password"),
        ("database", "the URL's database does not exist"),
        ("privilege", "lacks a privilege the store needs"),
    ],
)
def test_permanent_errors_are_refused_once_in_one_line(postgres_url, postgres_server, case, problem):
    if case == "privilege":
        postgres_server.sql("DROP ROLE IF EXISTS weak")
        postgres_server.sql("CREATE ROLE weak LOGIN PASSWORD 'weak-Pw7'")
    url = {
        "password": postgres_server.url(password="not-the-Pw1"),
        "user": postgres_server.url(user="nobody", password="not-the-Pw1"),
        "database": postgres_server.url(database="absent"),
        "privilege": postgres_server.url(user="weak", password="weak-Pw7"),
    }[case]
    with pytest.raises(StoreRefused) as refused:
        store(url)
    message = str(refused.value)
    assert problem in message and "\n" not in message
    assert refused.value.attempts == 1
    assert "not-the-Pw1" not in message and "weak-Pw7" not in message and "***" in message


def test_a_user_granted_the_tables_needs_no_create(postgres_url, postgres_server):
    store(postgres_url).close()  # the owner makes the schema and the namespace's table
    postgres_server.sql("DROP ROLE IF EXISTS worker")
    postgres_server.sql("CREATE ROLE worker LOGIN PASSWORD 'worker-Pw8'")
    postgres_server.sql("GRANT USAGE ON SCHEMA crawldedup TO worker")
    postgres_server.sql("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA crawldedup TO worker")
    try:
        with store(postgres_server.url(user="worker", password="worker-Pw8")) as s:
            assert s.claim_many(fingerprints(3, seed=8)) == [True] * 3
    finally:
        postgres_server.sql("DROP OWNED BY worker")


def test_cli_wrong_password_is_one_line(postgres_url, postgres_server, tmp_path: Path):
    url = postgres_server.url(password="not-the-Pw1")
    result = subprocess.run(
        [*COMMAND, "filter", "--strategy", "postgres", "--postgres-url", url],
        input="https://shop.example/a\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode != 0 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused the URL's user or password" in lines[0] and "not-the-Pw1" not in lines[0]


def test_bad_postgres_url_names_the_variable_and_hides_the_password():
    with pytest.raises(
        ValueError,
        match=r"postgres_url \(CRAWLDEDUP_POSTGRES_URL\) must be a URL starting with "
        r"postgresql:// or postgres:// or unset, got 'mysql://u:\*\*\*@h/db'",
    ):
        Deduplicator.from_env({"DEDUP_STRATEGY": "postgres", "CRAWLDEDUP_POSTGRES_URL": "mysql://u:secret@h/db"})


def test_server_down_is_unavailable_after_the_retries_then_nothing_lost(postgres_url, postgres_server):
    fps = fingerprints(300, seed=9)
    with store(postgres_url, retry=RetryPolicy(retries=2, backoff_seconds=0.01)) as s:
        assert s.claim_many(fps[:100]) == [True] * 100
        postgres_server.stop()
        failed = s.failed_attempts
        with pytest.raises(StoreUnavailable, match="unavailable after 3 attempts") as raised:
            s.claim_many(fps[100:200])
        assert not isinstance(raised.value, StoreRefused)
        assert s.failed_attempts == failed + 3
        postgres_server.start()
        assert s.claim_many(fps) == [False] * 100 + [True] * 200  # reconnected; the failed batch won now


@pytest.mark.asyncio
async def test_async_store_waits_for_nothing_on_the_loop_and_reconnects(postgres_url, postgres_server):
    """The async shell over psycopg's AsyncConnection: a ticker keeps running while batches are
    claimed, and a server restart is StoreUnavailable, then the same batch is won."""
    fps = fingerprints(3_000, seed=10)
    shell = open_async_store(
        "postgres",
        namespace="ticks",
        policy_digest=DIGEST,
        postgres_url=postgres_url,
        capacity=1,
        error_rate=0.1,
        retry=RetryPolicy(retries=1, backoff_seconds=0.01),
    )
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    async with shell:
        won = [await shell.claim_many(fps[i : i + 500]) for i in range(0, 1_500, 500)]
        assert ticks > 3 and all(all(w) for w in won)
        postgres_server.stop()
        with pytest.raises(StoreUnavailable):
            await shell.claim_many(fps[1_500:])
        postgres_server.start()
        assert await shell.claim_many(fps) == [False] * 1_500 + [True] * 1_500
    task.cancel()


# -- operators' tools ----------------------------------------------------------------------------


def test_doctor_passes_and_keeps_nothing(postgres_url, tmp_path: Path):
    result = subprocess.run(
        [*COMMAND, "doctor", "--samples", "2000", "--strategy", "postgres", "--postgres-url", postgres_url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = {line[6:17].strip(): (line[:4], line[18:]) for line in result.stdout.splitlines()}
    assert [verdict for verdict, _ in lines.values()] == ["PASS"] * 6 + ["SKIP", "PASS"], result.stdout
    assert lines["server"][1].startswith("PostgreSQL ")
    assert lines["claim race"][1] == "20 threads claimed one URL at once: 1 winner"
    assert lines["capacity"][1] == "needs the bytes per URL and the server's free disk space (not known here)"
    assert rows(postgres_url, "SELECT count(*) FROM crawldedup.namespaces") == [(0,)]
    assert rows(
        postgres_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'crawldedup' AND tablename LIKE 'claims%'"
    ) == [(0,)]


def test_stats_reports_a_namespace_and_refuses_a_missing_one(postgres_url, tmp_path: Path):
    urls = [f"https://shop.example/p/{i}" for i in range(2_500)]
    with Deduplicator("postgres", postgres_url=postgres_url, namespace="crawl", capacity=10_000) as dedup:
        dedup.claim_many(urls)
    env_free = [*COMMAND, "stats", "--strategy", "postgres", "--postgres-url", postgres_url]
    result = subprocess.run(
        [*env_free, "--namespace", "crawl", "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["store"]
    assert report["claims"] == 2_500 and report["strategy"] == "postgres"
    assert 40 < report["bytes_per_url"] < 400
    missing = subprocess.run(
        [*env_free, "--namespace", "absent"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert missing.returncode == 3 and "namespace 'absent' does not exist" in missing.stderr
    assert PostgresServer.PASSWORD not in missing.stderr
    assert rows(postgres_url, "SELECT name FROM crawldedup.namespaces") == [("crawl",)]
