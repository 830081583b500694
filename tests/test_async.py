"""The asyncio Deduplicator and stores: the same answers as the blocking ones, on real servers."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Dict, List

import pytest

from crawldedup import AsyncDeduplicator, Deduplicator, NamespaceConflict, StoreUnavailable
from crawldedup.config import DedupConfig
from crawldedup.dedup.aio import INLINE_URLS
from crawldedup.stores import AsyncClaimStore, RetryPolicy
from crawldedup.stores.factory import open_async_store, open_store

DIGEST = "0123456789abcdef"
RETRY = RetryPolicy(retries=1, backoff_seconds=0.01, max_backoff_seconds=0.02)
SPELLINGS = (
    "https://shop.example/p/{i}?a=1&b=2",
    "HTTPS://SHOP.EXAMPLE:443/p/{i}?b=2&a=1",
    "https://shop.example/p/{i}?a=1&utm_source=x&b=2#top",
)


def stream(pages: int, batches: int, seed: int) -> List[List[str]]:
    """Batches of URLs over ``pages`` pages, in mixed spellings, with repeats and invalid URLs."""
    rng = random.Random(seed)
    out = []
    for _ in range(batches):
        size = rng.choice([1, 7, 300, INLINE_URLS + 500])  # inline and in-thread batches
        batch = [rng.choice(SPELLINGS).format(i=rng.randrange(pages)) for _ in range(size)]
        batch.append("not a url")
        out.append(batch)
    return out


def settings(store_strategy: str, store_location: dict, namespace: str, **extra: object) -> Dict[str, object]:
    return {"namespace": namespace, "capacity": 100_000, "error_rate": 0.001, "retry": RETRY, **store_location, **extra}


@pytest.mark.asyncio
async def test_the_async_deduplicator_answers_as_the_blocking_one(store_strategy, store_location):
    """One stream of batches through each kind, each in its own namespace: the same answers,
    the same canonical forms and errors, the same statistics."""
    batches = stream(2_000, 12, seed=7)
    with Deduplicator(store_strategy, **settings(store_strategy, store_location, "sync")) as blocking:
        expected = [blocking.claim_batch(batch) for batch in batches]
        expected_stats = blocking.stats
    async with AsyncDeduplicator(store_strategy, **settings(store_strategy, store_location, "async")) as d:
        got = [await d.claim_batch(batch) for batch in batches]
        got_stats = d.stats
    assert [b.won for b in got] == [b.won for b in expected]
    assert [b.canonical for b in got] == [b.canonical for b in expected]
    assert [sorted(b.errors) for b in got] == [sorted(b.errors) for b in expected]
    assert got_stats == expected_stats
    assert sum(sum(b.won) for b in got) > 1_000


@pytest.mark.asyncio
async def test_keys_and_the_local_strategy_answer_as_the_blocking_one():
    keys = [f"fp-{i % 500}" for i in range(1_500)]
    with Deduplicator("local", capacity=10_000, error_rate=0.001) as blocking:
        expected = blocking.claim_keys(keys), blocking.claim_many(SPELLINGS[0].format(i=i) for i in range(50))
    async with AsyncDeduplicator("local", capacity=10_000, error_rate=0.001) as d:
        got = await d.claim_keys(keys), await d.claim_many([SPELLINGS[0].format(i=i) for i in range(50)])
    assert got[0] == expected[0] and sum(got[0]) == 500
    assert got[1] == list(expected[1])


@pytest.mark.asyncio
async def test_bad_input_raises_as_the_blocking_one():
    async with AsyncDeduplicator("local", capacity=1_000, error_rate=0.01) as d:
        with pytest.raises(TypeError, match="single str"):
            await d.claim_many("https://shop.example/")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="keys must not be empty"):
            await d.claim_keys([""])
        assert d.stats.cancelled_batches == 0


@pytest.mark.asyncio
@pytest.mark.redis
@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
async def test_a_redis_cluster_answers_async_claims(strategy, redis_cluster_url):
    urls = [SPELLINGS[i % 3].format(i=i) for i in range(5_000)]
    async with AsyncDeduplicator(strategy, redis_url=redis_cluster_url, namespace="cluster", capacity=100_000) as d:
        assert d.store is not None and d.store.store.in_cluster  # type: ignore[attr-defined]
        assert await d.claim_many(urls) == [True] * 5_000
    with Deduplicator(strategy, redis_url=redis_cluster_url, namespace="cluster", capacity=100_000) as blocking:
        assert blocking.claim_many(urls) == [False] * 5_000


@pytest.mark.asyncio
@pytest.mark.redis
async def test_an_async_store_checks_its_namespace_record(redis_url):
    open_store("set", namespace="taken", policy_digest=DIGEST, redis_url=redis_url, capacity=10, error_rate=0.1).close()
    store = open_async_store(
        "sharded-set", namespace="taken", policy_digest=DIGEST, redis_url=redis_url, capacity=10, error_rate=0.1
    )
    with pytest.raises(NamespaceConflict, match="set strategy"):
        await store.open()


@pytest.mark.asyncio
async def test_an_unreachable_store_raises_and_leaves_no_state_file(tmp_path: Path):
    state = tmp_path / "state.bloom"
    d = AsyncDeduplicator("set", redis_url="redis://127.0.0.1:1/0", state=state, retry=RETRY)
    with pytest.raises(StoreUnavailable, match="2 attempts"):
        await d.claim_many(["https://shop.example/"])
    assert not state.exists()
    await d.aclose()


def test_a_blocking_store_is_refused_by_the_async_shell(tmp_path: Path):
    store = open_store(
        "sqlite", namespace="n", policy_digest=DIGEST, sqlite_path=tmp_path / "s.db", capacity=10, error_rate=0.1
    )
    with store, pytest.raises(ValueError, match="asynchronous=True"):
        AsyncClaimStore(store)


@pytest.mark.asyncio
async def test_an_async_store_is_refused_by_blocking_calls(tmp_path: Path):
    shell = open_async_store(
        "sqlite", namespace="n", policy_digest=DIGEST, sqlite_path=tmp_path / "s.db", capacity=10, error_rate=0.1
    )
    async with shell:
        with pytest.raises(TypeError, match="AsyncClaimStore"):
            shell.store.claim_many([b"x" * 16])
        assert await shell.claim_many([b"x" * 16, b"x" * 16]) == [True, False]


@pytest.mark.asyncio
async def test_from_env_reads_the_same_settings(tmp_path: Path):
    environ = {"DEDUP_STRATEGY": "sqlite", "CRAWLDEDUP_SQLITE": str(tmp_path / "c.db"), "CRAWLDEDUP_NAMESPACE": "env"}
    async with AsyncDeduplicator.from_env(environ) as d:
        assert d.config == DedupConfig.from_env(environ)
        assert await d.claim_many(["https://shop.example/a"]) == [True]
