"""Two-phase claims: a held batch is seen by nobody's local filter until it is committed, and an
abandoned one goes back to the store (or, for RedisBloom, back to the caller as stranded URLs)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from crawldedup import DEFAULT_POLICY, StoreUnavailable, canonicalize
from crawldedup.config import DedupConfig
from crawldedup.dedup import Deduplicator, HoldState
from crawldedup.fingerprints import hash_many
from crawldedup.stores import RetryPolicy, SQLiteStore

RETRY = RetryPolicy(retries=1, backoff_seconds=0.01, max_backoff_seconds=0.02)
EXACT = {"set", "sharded-set", "sqlite", "postgres"}  # the stores that take claims back


def pages(n: int, start: int = 0) -> List[str]:
    return [f"https://shop.example/held/{i}?b=2&a=1&utm_source=x" for i in range(start, start + n)]


def known_locally(dedup: Deduplicator, urls: List[str]) -> int:
    return int(dedup.local_filter.contains_hashes(hash_many([canonicalize(u) for u in urls])).sum())


@pytest.fixture
def workers(store_strategy: str, store_location: dict, tmp_path: Path) -> Iterator[Callable[..., Deduplicator]]:
    """Deduplicators on one store, each with its own state file."""
    made: List[Deduplicator] = []

    def make(**kwargs) -> Deduplicator:
        made.append(
            Deduplicator(
                store_strategy,
                namespace="held",
                state=tmp_path / f"w{len(made)}.bloom",
                capacity=100_000,
                retry=RETRY,
                **store_location,
                **kwargs,
            )
        )
        return made[-1]

    yield make
    for dedup in made:
        dedup.close()


def test_a_held_batch_is_learnt_only_on_commit(workers, store_strategy: str) -> None:
    a, b = workers(), workers()
    urls = pages(200) + pages(50)  # the last 50 repeat pages already in the batch
    held = a.hold_batch(urls)
    assert held.won == [True] * 200 + [False] * 50
    assert held.state is HoldState.HELD
    assert known_locally(a, urls) == 0  # the local filter learns nothing before the commit
    assert b.claim_many(pages(200)) == [False] * 200  # but nobody else wins them meanwhile
    if store_strategy in ("set", "sharded-set"):
        assert b.stats.held == 200  # leased to a, which may still give them back
        assert known_locally(b, urls) == 0
    held.commit()
    assert held.state is HoldState.COMMITTED
    assert known_locally(a, urls) == 250
    assert a.claim_many(pages(200)) == [False] * 200
    assert b.claim_many(pages(200)) == [False] * 200
    stats = a.stats
    assert (stats.won, stats.committed, stats.abandoned, stats.won_twice) == (200, 200, 0, 0)


def test_an_abandoned_batch_goes_back_to_the_store(workers, store_strategy: str) -> None:
    a, b = workers(), workers()
    urls = pages(300)
    held = a.hold_batch(urls)
    stranded = held.abandon()
    assert held.state is HoldState.ABANDONED
    assert known_locally(a, urls) == 0
    if store_strategy in EXACT:  # handed back: anyone's next claim wins each page once
        assert stranded == []
        assert b.claim_many(urls) == [True] * 300
        assert a.claim_many(urls) == [False] * 300
        assert (a.stats.abandoned, a.stats.stranded) == (300, 0)
    else:  # RedisBloom keeps them: the caller gets their canonical URLs back
        assert stranded == [canonicalize(u) for u in urls]
        assert b.claim_many(urls) == [False] * 300
        assert (a.stats.abandoned, a.stats.stranded) == (0, 300)
    assert held.abandon() == []  # abandoning twice is harmless
    with pytest.raises(ValueError, match="cannot commit a batch that was abandoned"):
        held.commit()


def test_the_context_manager_commits_or_abandons(workers, store_strategy: str) -> None:
    a, b = workers(), workers()
    with a.hold_batch(pages(20)) as held:
        assert all(held.won)
    assert held.state is HoldState.COMMITTED and b.claim_many(pages(20)) == [False] * 20
    with pytest.raises(OSError):
        with a.hold_batch(pages(20, start=20)) as failed:
            raise OSError("the output is full")
    assert failed.state is HoldState.ABANDONED
    assert b.claim_many(pages(20, start=20)) == [store_strategy in EXACT] * 20
    with pytest.raises(ValueError, match="cannot abandon a batch that was committed"):
        held.abandon()


def test_local_hold_commit_and_two_holders(tmp_path: Path) -> None:
    with Deduplicator("local", state=tmp_path / "s.bloom") as dedup:
        first, second = dedup.hold_batch(pages(40)), dedup.hold_batch(pages(40))
        assert all(first.won) and all(second.won)  # nothing is recorded before a commit
        first.commit()
        second.commit()  # the second holder finds every page already committed
        assert dedup.stats.won_twice == 40
        abandoned = dedup.hold_batch(pages(10, start=40))
        assert abandoned.abandon() == []
        assert dedup.claim_many(pages(50)) == [False] * 40 + [True] * 10


@pytest.mark.redis
@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
@pytest.mark.parametrize("in_time", [True, False], ids=["commit-retried-in-time", "commit-retried-too-late"])
def test_a_store_failing_during_commit(
    redis_server, redis_url: str, tmp_path: Path, strategy: str, in_time: bool
) -> None:
    """Redis goes away between the write and the commit. Pages lost: never. Pages won twice: none
    when the commit is retried within the hold's lease; each page once more when it is retried
    after the lease ran out (another worker won them meanwhile), and counted."""
    hold_seconds = 30.0 if in_time else 0.5
    urls = pages(500)
    with Deduplicator(
        strategy,
        redis_url=redis_url,
        namespace="commit-fault",
        state=tmp_path / "a.bloom",
        capacity=100_000,
        retry=RETRY,
    ) as a:
        held = a.hold_batch(urls, hold_seconds=hold_seconds)
        printed = [url for url, won in zip(held.canonical, held.won) if won]  # written by the caller
        dump = Path(redis_server.workdir) / "dump.rdb"
        client = redis_server.client()
        client.save()  # the server comes back with what it held
        client.close()
        redis_server.stop()
        try:
            with pytest.raises(StoreUnavailable):
                held.commit()
            assert held.state is HoldState.HELD and known_locally(a, urls) == 0
            redis_server.start()
        finally:
            dump.unlink()  # later restarts start empty again
        if not in_time:
            time.sleep(hold_seconds + 0.3)
        with Deduplicator(
            strategy,
            redis_url=redis_url,
            namespace="commit-fault",
            state=tmp_path / "b.bloom",
            capacity=100_000,
            retry=RETRY,
        ) as b:
            rival = b.claim_batch(urls)
            won_by_b = [url for url, won in zip(rival.canonical, rival.won) if won]
            held.commit()  # retried: a's pages are lasting now, or refused where b took them over
            won_by_a_again = [u for u, won in zip(urls, a.claim_many(urls)) if won]
        lost = {canonicalize(u) for u in urls} - set(printed) - set(won_by_b)
        won_twice = set(printed) & set(won_by_b)
        assert lost == set() and won_by_a_again == []
        assert len(printed) == 500
        assert len(won_twice) == (0 if in_time else 500)
        assert a.stats.won_twice == len(won_twice)
        assert known_locally(a, urls) == 500


@pytest.mark.parametrize("store_strategy", ["sqlite"])
def test_a_store_failing_during_abandon_strands_the_pages(workers, store_location: dict) -> None:
    """SQLite locked by another process while a batch is abandoned: its claims stay, and the
    caller gets every one of them back as stranded (none silently dropped)."""
    import sqlite3

    path = store_location["sqlite_path"]
    store = SQLiteStore(
        path,
        namespace="held",
        policy_digest=DEFAULT_POLICY.digest,
        busy_timeout_seconds=0.05,
        retry=RetryPolicy(retries=0),
        window=DedupConfig().window,
    )  # the workers' window
    a = workers(store=store)
    urls = pages(100)
    held = a.hold_batch(urls)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the database
    try:
        stranded = held.abandon()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert stranded == [canonicalize(u) for u in urls]
    assert (a.stats.abandoned, a.stats.stranded) == (0, 100)
    assert workers().claim_many(urls) == [False] * 100  # still claimed: the caller must keep them
