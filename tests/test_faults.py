"""Faults: Redis going away mid-run never turns into a wrong answer or a lost URL."""

from __future__ import annotations

import pytest
import redis

import crawldedup
from crawldedup import StoreUnavailable, canonicalize
from crawldedup.dedup import Deduplicator
from crawldedup.fingerprints import hash_many
from crawldedup.stores import RetryPolicy

RETRY = RetryPolicy(retries=2, backoff_seconds=0.01, max_backoff_seconds=0.05)


def pages(start: int, stop: int) -> list[str]:
    return [f"https://site.example/p/{i}?utm_source=feed" for i in range(start, stop)]


@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
def test_redis_stopped_mid_run_then_back(redis_server, redis_url, strategy):
    first, failing = pages(0, 2_000), pages(2_000, 3_000)
    with Deduplicator(strategy, redis_url=redis_url, namespace="faults", capacity=10_000, retry=RETRY) as d:
        assert all(d.claim_many(first))
        redis_server.stop()
        with pytest.raises(StoreUnavailable) as raised:
            d.claim_many(failing + first[:10])
        assert raised.value.attempts == RETRY.attempts == 3
        assert d.store.failed_attempts == 3
        assert d.stats.failed_batches == 1
        # Nothing of the failed batch reached the local filter: a retry must claim it for real.
        canonical = [canonicalize(u) for u in failing]
        assert not d.local_filter.contains_hashes(hash_many(canonical)).any()

        redis_server.start()  # an empty Redis: this test server keeps nothing on disk
        assert d.claim_many(failing + first[:10]) == [True] * 1_000 + [False] * 10
        assert d.claim_many(failing) == [False] * 1_000
        stats = d.stats
    assert stats.won == 3_000  # every page once: none lost, none won twice


def test_unreachable_redis_message_hides_the_password(redis_server):
    url = f"redis://crawler:pw-Zq81x@127.0.0.1:{redis_server.port}/0"
    redis_server.stop()
    with pytest.raises(StoreUnavailable) as raised:
        Deduplicator.from_env({"DEDUP_STRATEGY": "set", "REDIS_URL": url}, retry=RETRY)
    message = str(raised.value)
    assert "pw-Zq81x" not in message and "crawler:***@127.0.0.1" in message
    assert raised.value.attempts == 3


def test_wrong_password_is_store_unavailable_without_the_password(redis_url):
    admin = redis.Redis.from_url(redis_url)
    admin.config_set("requirepass", "right-Kx93")
    try:
        bad = redis_url.replace("redis://", "redis://:wrong-Pq27@")
        with pytest.raises(StoreUnavailable) as raised:
            Deduplicator("sharded-set", redis_url=bad, namespace="auth", retry=RETRY)
        assert "wrong-Pq27" not in str(raised.value) and "right-Kx93" not in str(raised.value)
        assert "Error" in raised.value.reason
        good = redis_url.replace("redis://", "redis://:right-Kx93@")
        with Deduplicator("sharded-set", redis_url=good, namespace="auth", retry=RETRY) as d:
            assert d.claim("https://site.example/secret") is True
    finally:
        authed = redis.Redis.from_url(redis_url.replace("redis://", "redis://:right-Kx93@"))
        authed.config_set("requirepass", "")
        authed.close()
        admin.close()


def test_store_unavailable_is_a_connection_error_and_exported():
    assert issubclass(crawldedup.StoreUnavailable, ConnectionError)
    error = StoreUnavailable("set store redis://h:6379/0", 4, "ConnectionError: refused")
    assert (error.attempts, error.reason) == (4, "ConnectionError: refused")
    assert str(error) == "set store redis://h:6379/0: unavailable after 4 attempts (ConnectionError: refused)"
