"""Leases: claims for a limited time, so that no URL is lost when a worker dies.

Real servers only: the session's redis-server and a local 3-master Redis Cluster.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List

import pytest
import redis

from crawldedup import DEFAULT_POLICY, canonicalize
from crawldedup.dedup import Deduplicator
from crawldedup.stores import LeasesUnsupported, RedisKeyStore, RedisShardedSetStore
from crawldedup.stores.factory import open_store
from crawldedup.stores.sharded_set import ticks_per_window
from crawldedup.windows import Window

# Each test that uses a server runs against Redis 7, Valkey 8 and Valkey 9 (conftest.py).
pytestmark = pytest.mark.server_matrix
WORKER = Path(__file__).parent / "workers" / "lease_worker.py"
#: Upper bound of any wait for a lease to pass (the leases themselves last well under a second).
WAIT_SECONDS = 30.0
SHORT_LEASE = 0.3


def pages(n: int, prefix: str = "p") -> List[str]:
    return [f"https://site.example/{prefix}/{i}?b=2&a=1" for i in range(n)]


@pytest.fixture(
    params=[pytest.param("redis", marks=pytest.mark.redis), pytest.param("cluster", marks=pytest.mark.redis)]
)
def redis_location(request: pytest.FixtureRequest, server_kind: str) -> str:
    """A flushed single server of ``server_kind``, then a flushed 3-master cluster of it."""
    return request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url")


@pytest.fixture(params=["set", "sharded-set"])
def lease_strategy(request: pytest.FixtureRequest) -> str:
    """Each store that supports leases."""
    return request.param


@pytest.fixture
def workers(lease_strategy: str, redis_location: str):
    """Makes Deduplicators (workers) on one namespace, and closes them."""
    made: List[Deduplicator] = []

    def make(**kwargs) -> Deduplicator:
        options = {
            "redis_url": redis_location,
            "namespace": "lease",
            "capacity": 100_000,
            "error_rate": 0.001,
            **kwargs,
        }
        made.append(Deduplicator(lease_strategy, **options))
        return made[-1]

    yield make
    for dedup in made:
        dedup.close()


def collect(ask: Callable[[], List[str]], count: int) -> List[str]:
    """Calls ``ask`` (an ``expired`` call) until ``count`` URLs came back, for at most WAIT_SECONDS.

    Leases of one batch expire within a few milliseconds of each other (one script per group),
    so an early call may see only some of them.
    """
    got: List[str] = []
    deadline = time.monotonic() + WAIT_SECONDS
    while len(got) < count and time.monotonic() < deadline:
        got += ask()
        time.sleep(0.05)
    return got


def until(ask: Callable[[], object]) -> object:
    """Asks until the answer is truthy (the lease passed), for at most WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        answer = ask()
        if answer or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def test_a_leased_url_is_nobody_elses_until_done(workers):
    a, b = workers(), workers(sample_rate=0)
    urls = pages(200)
    assert a.claim_many(urls, lease=60) == [True] * 200
    assert b.claim_many(urls) == [False] * 200
    assert b.claim_many(urls, lease=60) == [False] * 200
    assert b.stats.held == 400  # lost to an open lease: kept out of b's local filter
    assert a.done(urls) == [True] * 200
    trips = b.store.round_trips
    assert b.claim_many(urls) == [False] * 200  # now lasting: b learns them
    assert b.claim_many(urls) == [False] * 200  # answered by b's local filter
    assert b.store.round_trips == trips + 1
    assert (a.stats.leased, a.stats.done, a.stats.refused) == (200, 200, 0)


def test_release_frees_the_url_for_anyone(workers):
    a, b = workers(), workers()
    urls = pages(50)
    assert all(a.claim_many(urls, lease=60))
    assert a.release(urls[:20]) == [True] * 20
    assert b.claim_many(urls) == [True] * 20 + [False] * 30
    assert a.claim_many(urls[:20], lease=60) == [False] * 20
    assert a.stats.released == 20


def test_only_the_owner_settles_a_lease(workers):
    a, b = workers(worker_id="crawler-a"), workers(worker_id="crawler-b")
    url = "https://shop.example/item/7"
    assert a.claim(url, lease=60) is True
    assert b.done([url]) == [False]
    assert b.release([url]) == [False]
    assert b.renew([url], lease=60) == [False]
    assert b.stats.refused == 3
    assert a.done(["HTTPS://SHOP.EXAMPLE:443/item/7#top"]) == [True]  # any spelling of the page
    assert a.done([url]) == [False]  # done once
    assert b.claim(url) is False


def test_expired_lease_is_handed_back_once_then_claimable_by_anyone(workers):
    a, b, c = workers(), workers(), workers()
    urls = pages(30)
    canonical = sorted(canonicalize(u) for u in urls)
    assert all(a.claim_many(urls, lease=SHORT_LEASE))
    assert b.claim_many(urls) == [False] * 30  # held: b's local filter must not keep them
    handed_back = collect(lambda: b.expired(limit=1_000), 30)
    assert sorted(handed_back) == canonical
    assert c.expired() == [] and b.expired() == []
    assert b.claim_many(urls, lease=60) == [True] * 30
    assert a.done(urls) == [False] * 30  # its lease moved on: refused, reported
    assert b.done(urls) == [True] * 30
    assert c.claim_many(urls) == [False] * 30
    assert b.stats.expired == 30 and a.stats.refused == 30


def test_late_done_is_refused_after_another_worker_took_over(workers):
    """A worker whose lease expired and was re-claimed by another cannot overwrite the new owner."""
    slow, fast = workers(worker_id="slow"), workers(worker_id="fast")
    url = "https://news.example/story/1"
    assert slow.claim(url, lease=SHORT_LEASE) is True
    assert until(lambda: fast.claim(url, lease=60)) is True  # taken over once the deadline passed
    assert slow.done([url]) == [False]
    assert slow.renew([url], lease=60) == [False]
    assert slow.release([url]) == [False]
    assert fast.expired() == []  # the new lease is open
    assert fast.done([url]) == [True]
    assert slow.claim(url) is False and fast.claim(url) is False


def test_a_plain_claim_takes_over_an_expired_lease(workers):
    a, b = workers(), workers()
    url = "https://news.example/story/2"
    assert a.claim(url, lease=SHORT_LEASE) is True
    assert until(lambda: b.claim(url)) is True
    assert a.done([url]) == [False]
    assert b.expired() == [] and workers().claim(url) is False


def test_the_worker_whose_lease_expired_can_claim_it_again(workers):
    a = workers()
    urls = pages(10)
    assert all(a.claim_many(urls, lease=SHORT_LEASE))
    assert a.claim_many(urls) == [False] * 10  # its own open leases
    assert len(collect(a.expired, 10)) == 10
    assert a.claim_many(urls, lease=60) == [True] * 10  # its local filter never held them
    assert a.done(urls) == [True] * 10


def test_expired_with_a_lease_hands_back_already_leased(workers):
    a, b, c = workers(), workers(), workers()
    urls = pages(20)
    assert all(a.claim_many(urls, lease=SHORT_LEASE))
    mine = collect(lambda: b.expired(lease=60), 20)
    assert len(mine) == 20
    assert c.claim_many(urls) == [False] * 20 and c.expired() == []
    assert b.done(mine) == [True] * 20


def test_renew_moves_the_deadline(workers):
    a, b = workers(), workers()
    urls = pages(10)
    started = time.monotonic()
    assert all(a.claim_many(urls, lease=1))
    assert a.renew(urls, lease=60) == [True] * 10
    time.sleep(max(0.0, 1.2 - (time.monotonic() - started)))  # the first deadline has passed
    assert b.expired() == []
    assert b.claim_many(urls) == [False] * 10
    assert a.done(urls) == [True] * 10 and a.stats.renewed == 10


def test_expired_respects_its_limit_and_drains(workers):
    a, b = workers(), workers()
    urls = pages(50)
    assert all(a.claim_many(urls, lease=SHORT_LEASE))
    time.sleep(SHORT_LEASE + 0.2)  # every lease of the batch has passed
    first = b.expired(limit=7)
    assert len(first) == 7  # 7 of 50 expired leases in 16 groups: the limit is met exactly
    batches = [first]
    while batches[-1]:
        batches.append(b.expired(limit=7))
        assert len(batches) < 20
    assert all(len(batch) <= 7 for batch in batches)
    handed_back = [url for batch in batches for url in batch]
    assert sorted(handed_back) == sorted(canonicalize(u) for u in urls)


def test_invalid_urls_are_refused_not_raised(workers):
    a = workers()
    batch = a.claim_batch(["https://ok.example/a", "mailto:x@y.example"], lease=60)
    assert batch.won == [True, False] and 1 in batch.errors
    assert a.done(["https://ok.example/a", "mailto:x@y.example"]) == [True, False]


@pytest.mark.parametrize("lease", [0, -1, math.nan, True, "60", 86_401])
def test_bad_lease_is_refused(redis_url, lease):
    with Deduplicator("set", redis_url=redis_url, namespace="lease") as d:
        with pytest.raises(ValueError, match="lease must be a number of seconds in \\(0, 86400\\], got"):
            d.claim_many(["https://ok.example/"], lease=lease)
        with pytest.raises(ValueError, match="lease must be"):
            d.renew(["https://ok.example/"], lease=lease)


@pytest.mark.parametrize("limit", [0, -3, 1.5, 1_000_001])
def test_bad_limit_is_refused(redis_url, limit):
    with Deduplicator("sharded-set", redis_url=redis_url, namespace="lease") as d:
        with pytest.raises(ValueError, match="limit must be an integer in \\[1, 1000000\\], got"):
            d.expired(limit)


def test_bad_worker_id_is_refused():
    with pytest.raises(ValueError, match="worker_id must be 1 to 200 characters"):
        Deduplicator("local", capacity=100, error_rate=0.01, worker_id="has space")


def test_stores_without_leases_say_so(redisbloom_url, postgres_url, tmp_path):
    options = {"capacity": 1_000, "error_rate": 0.01}
    for strategy, where in [
        ("redisbloom", {"redis_url": redisbloom_url}),
        ("sqlite", {"sqlite_path": tmp_path / "c.sqlite"}),
        ("postgres", {"postgres_url": postgres_url}),
        ("local", {}),
    ]:
        with Deduplicator(strategy, namespace="lease", **where, **options) as d:
            with pytest.raises(LeasesUnsupported, match=f"leases need the set or sharded-set store.*'{strategy}'"):
                d.claim_many(["https://ok.example/"], lease=30)
            with pytest.raises(LeasesUnsupported):
                d.expired()
            with pytest.raises(LeasesUnsupported):
                d.done(["https://ok.example/"])
            assert d.claim("https://ok.example/") is True  # nothing was claimed by the refused calls


# --- the documented layout of the lease records ----------------------------------------------


def test_lease_records_of_the_keys_store(redis_url):
    url = "https://shop.example/item/1"
    with Deduplicator("set", redis_url=redis_url, namespace="crawl", worker_id="w-1", ttl_days=1) as d:
        fp = d.store  # type: ignore[assignment]
        assert isinstance(fp, RedisKeyStore)
        key_fp = __import__("crawldedup").fingerprint(canonicalize(url))
        group = (int.from_bytes(key_fp[:8], "little") * fp.groups) >> 64
        tag = b"{crawl:%d}" % group
        client = redis.Redis.from_url(redis_url)
        before_ms = int(client.time()[0]) * 1000
        assert d.claim(url, lease=120)
        assert client.hget(tag + b":lease-urls", key_fp) == b"w-1 " + canonicalize(url).encode()
        deadline = client.zscore(tag + b":leases", key_fp)
        assert before_ms + 119_000 <= deadline <= before_ms + 122_000
        assert client.ttl(tag + key_fp) == -1  # no expiry while leased
        assert client.get(tag + key_fp) == b"L"  # its lease, not its generation, decides
        assert d.done([url]) == [True]
        assert client.exists(tag + b":leases", tag + b":lease-urls") == 0
        # The window of one day in 4 generations: it expires when its generation is forgotten.
        window = d.config.window
        assert window is not None
        generation = window.generation(time.time())
        assert client.get(tag + key_fp) == b"g%d" % generation
        assert 86_300 < client.ttl(tag + key_fp) <= 86_400 * (1 + 1 / window.generations) + 1


@pytest.mark.parametrize("layout", ["generations", "ticks"])
def test_lease_records_of_the_sharded_set_store(redis_url, layout):
    url = "https://shop.example/item/2"
    window = Window(30 * 86_400.0, 4)
    opened = open_store(
        "sharded-set",
        namespace="crawl",
        policy_digest=DEFAULT_POLICY.digest,
        redis_url=redis_url,
        capacity=40_000,
        error_rate=0.01,
        window=window,
        window_layout=layout,
    )
    with Deduplicator("sharded-set", namespace="crawl", worker_id="w-2", capacity=40_000, store=opened) as d:
        store = d.store
        assert isinstance(store, RedisShardedSetStore)
        fp = __import__("crawldedup").fingerprint(canonicalize(url))
        a = int.from_bytes(fp[:8], "little")
        shard, group = (a * store.shards) >> 64, (a * store.groups) >> 64
        member = int.from_bytes(fp[8:12], "little", signed=True)
        claim_id = b"%d:%d" % (shard, member)
        tag = b"{crawl:%d}" % group
        client = redis.Redis.from_url(redis_url)
        records = tag + b":%d:t%d" % (shard, member % 2)  # the ticks layout's string of the member

        def tick_of_member() -> int:
            value = client.get(records) or b""
            at = next(i for i in range(5, len(value), 5) if value[i : i + 4] == fp[8:12])
            return value[at + 4]

        assert d.claim(url, lease=60)
        if layout == "generations":
            assert client.sismember(tag + b":%d:L" % shard, member)  # leased: waits outside the generations
        else:
            assert tick_of_member() == 255 and client.ttl(records) == -1  # leased: its lease decides
        assert client.hget(tag + b":lease-urls", claim_id) == b"w-2 " + canonicalize(url).encode()
        assert client.zscore(tag + b":leases", claim_id) is not None
        assert d.release([url]) == [True]
        if layout == "generations":
            assert not client.sismember(tag + b":%d:L" % shard, member)
        else:
            assert not client.exists(records)  # its only claim released
        assert client.exists(tag + b":leases", tag + b":lease-urls") == 0
        assert d.claim(url)  # lasting, and expiring with its window
        if layout == "generations":
            current = tag + b":%d:%d" % (shard, window.generation(time.time()))
            assert client.sismember(current, member)
            assert 0 < client.ttl(current) <= window.seconds * (1 + 1 / window.generations) + 1
        else:
            span = ticks_per_window(window)
            assert tick_of_member() == int(time.time() // (window.seconds / span)) % 255
            assert 0 < client.ttl(records) <= window.seconds * (1 + 1.25 / span) + 1 + window.seconds / 4


# --- a worker killed with SIGKILL while holding leases loses nothing --------------------------


def test_killed_worker_loses_nothing(lease_strategy, redis_location, tmp_path):
    urls = pages(400, prefix="killed")
    urls_file, done_file = tmp_path / "urls.txt", tmp_path / "done.txt"
    urls_file.write_text("\n".join(urls), "ascii")
    options = {"strategy": lease_strategy, "redis_url": redis_location, "namespace": "killed", "capacity": 100_000}
    # 4 s: long enough that the check below usually comes before the lease passes, short enough
    # to wait out; a check that comes later (a loaded machine) is judged as such, not failed.
    lease_seconds = 4
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(options), str(urls_file), str(done_file), str(lease_seconds)]
    )
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not Path(f"{done_file}.ready").exists():
            assert worker.poll() is None, f"the worker exited with {worker.returncode}"
            assert time.monotonic() < deadline, "the worker did not finish its first half"
            time.sleep(0.02)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    assert worker.returncode == -signal.SIGKILL
    done_by_killed = done_file.read_text("ascii").split("\n")
    canonical = {canonicalize(u) for u in urls}
    unfinished = canonical - set(done_by_killed)
    assert len(done_by_killed) == 200 and len(unfinished) == 200

    leased_at = float(Path(f"{done_file}.ready").read_text("ascii"))

    with Deduplicator(lease_strategy, redis_url=redis_location, namespace="killed", capacity=100_000) as other:
        answers = other.claim_many(urls)
        if time.time() < leased_at + lease_seconds:
            assert answers == [False] * 400  # nothing is free before the lease passes
        # Answered after it passed, an unfinished page is won by this claim instead of handed back.
        won_again = sorted({canonicalize(url) for url, won in zip(urls, answers) if won})
        assert set(won_again) <= unfinished, "a finished page was won again"
        handed_back: List[str] = []
        deadline = time.monotonic() + WAIT_SECONDS
        while len(handed_back) + len(won_again) < len(unfinished) and time.monotonic() < deadline:
            handed_back += other.expired(limit=64)
            time.sleep(0.05)
        # Exactly its unfinished URLs, once each.
        assert sorted(handed_back + won_again) == sorted(unfinished)
        assert other.expired() == []
        # Another worker requeues and finishes them (its local filter saw them lost above).
        assert other.claim_many(handed_back, lease=30) == [True] * len(handed_back)
        done_by_other = won_again + [url for url, ok in zip(handed_back, other.done(handed_back)) if ok]
    done_once = sorted(done_by_killed + done_by_other)
    assert done_once == sorted(canonical)  # every URL done, exactly once
    with Deduplicator(lease_strategy, redis_url=redis_location, namespace="killed", capacity=100_000) as late:
        assert late.claim_many(urls) == [False] * 400 and late.expired() == []
