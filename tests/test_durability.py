"""``durability="replicated"`` and ``redis+sentinel://`` URLs, against real replicas and Sentinels.

- The settings: variables, CLI options, ranges, and ``replicated`` refused outside Redis.
- The Sentinel URL form: Sentinels with and without ports, the service, the database; what is
  wrong with a bad one, named without its password.
- Through three Sentinels, every Redis store (blocking and asyncio) answers a claim only once
  ``WAIT`` counted a replica: each replica holds what was answered.
- With no replica left, a batch is an error (StoreUnavailable naming WAIT), never an answer;
  the same batch made again once a replica is back gets the wins the primary recorded, through
  its receipt. Leases' done, release and renew wait the same way.
- On a cluster with a replica per master, the WAIT goes to each master that ran part of a batch.

The failovers themselves (a primary or a master SIGKILLed under workers) are tests/test_failover.py.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import List

import pytest
import redis
from conftest import (
    RedisClusterServers,
    SentinelSet,
    _replication,
    required_redis_server,
    required_sentinel,
    serve_redis,
)

from crawldedup import DEFAULT_POLICY, Deduplicator, StoreRefused, StoreUnavailable
from crawldedup.config import DedupConfig
from crawldedup.stores import Durability, RetryPolicy
from crawldedup.stores.factory import open_async_store, open_store
from crawldedup.stores.urls import SENTINEL_PORT, parse_sentinel_url, redis_url_refusal

POLICY = DEFAULT_POLICY.digest
#: Fails fast when replicas are gone: 2 attempts of a 0.5 s WAIT.
QUICK = Durability("replicated", 1, 0.5)
#: Where replicas are up: time enough for a loaded machine's replicas to acknowledge.
STEADY = Durability("replicated", 1, 2.0)
RETRY = RetryPolicy(retries=1, backoff_seconds=0.01, max_backoff_seconds=0.02)
STRATEGIES = ["set", "sharded-set", "redisbloom"]


def fingerprints(n: int) -> List[bytes]:
    return [os.urandom(16) for _ in range(n)]


def keys_on(port: int) -> int:
    client = redis.Redis(port=port)
    try:
        return int(client.dbsize())
    finally:
        client.close()


# ----- settings (no server) ----------------------------------------------------------------------


def test_durability_settings_from_the_environment():
    config = DedupConfig.from_env(
        {
            "DEDUP_STRATEGY": "set",
            "CRAWLDEDUP_DURABILITY": "replicated",
            "CRAWLDEDUP_DURABLE_REPLICAS": "2",
            "CRAWLDEDUP_DURABLE_TIMEOUT": "0.5",
        }
    )
    assert config.store_durability == Durability("replicated", 2, 0.5)
    assert config.store_durability.timeout_ms == 500
    assert DedupConfig().store_durability == Durability() and not Durability().waits


@pytest.mark.parametrize(
    "environ, words",
    [
        ({"CRAWLDEDUP_DURABILITY": "quorum"}, "CRAWLDEDUP_DURABILITY"),
        ({"CRAWLDEDUP_DURABLE_REPLICAS": "0"}, "CRAWLDEDUP_DURABLE_REPLICAS"),
        ({"CRAWLDEDUP_DURABLE_TIMEOUT": "0"}, "CRAWLDEDUP_DURABLE_TIMEOUT"),
        ({"CRAWLDEDUP_DURABLE_TIMEOUT": "30"}, "CRAWLDEDUP_DURABLE_TIMEOUT"),
        ({"DEDUP_STRATEGY": "sqlite", "CRAWLDEDUP_DURABILITY": "replicated"}, "needs a Redis strategy"),
        ({"CRAWLDEDUP_DURABILITY": "replicated"}, "not exact"),
    ],
)
def test_bad_durability_settings_are_named(environ, words):
    with pytest.raises(ValueError, match=words):
        DedupConfig.from_env(environ)


def test_replicated_is_refused_outside_redis(tmp_path):
    with pytest.raises(ValueError, match="needs a Redis store"):
        open_store(
            "sqlite",
            namespace="n",
            policy_digest=POLICY,
            sqlite_path=tmp_path / "c.sqlite",
            capacity=10,
            error_rate=0.01,
            durability=QUICK,
        )


@pytest.mark.parametrize(
    "url, sentinels, service, db",
    [
        (
            "redis+sentinel://10.0.0.1:26380,10.0.0.2/crawl",
            [("10.0.0.1", 26380), ("10.0.0.2", SENTINEL_PORT)],
            "crawl",
            0,
        ),
        ("redis+sentinel://:pw@s1:1/mymaster/3?sentinel_password=s%40p", [("s1", 1)], "mymaster", 3),
    ],
)
def test_sentinel_url_form(url, sentinels, service, db):
    where = parse_sentinel_url(url)
    assert (where.sentinels, where.service, where.db) == (sentinels, service, db)
    assert where.sentinel_password == ("s@p" if "sentinel_password" in url else None)
    assert redis_url_refusal(url) is None


@pytest.mark.parametrize(
    "url, words",
    [
        ("redis+sentinel://s1:26379", "service name"),
        ("redis+sentinel://s1:26379/crawl/zero", "database must be a number"),
        ("redis+sentinel://s1:26379,s2:port/crawl", "host\\[:port\\]"),
        (
            "redis+sentinel://s1:26379/crawl?db=1",
            "no query arguments but sentinel_username and sentinel_password, got db",
        ),
    ],
)
def test_bad_sentinel_urls_say_what_is_wrong(url, words):
    with pytest.raises(ValueError, match=words):
        DedupConfig(strategy="set", redis_url=url)


def test_a_server_without_wait_is_refused_when_replicated(tmp_path):
    """A server whose WAIT is disabled opens for ``primary``; ``replicated`` is refused at open, naming WAIT."""
    serving = serve_redis(required_redis_server(), None, ("--rename-command", "WAIT", ""))
    server = next(serving)
    try:
        with open_store(
            "set", namespace="w", policy_digest=POLICY, redis_url=server.url, capacity=10, error_rate=0.01
        ) as store:
            assert store.claim_many(fingerprints(3)) == [True] * 3
        with pytest.raises(StoreRefused, match="COMMAND INFO knows no WAIT"):
            open_replicated("set", server.url)
    finally:
        serving.close()


# ----- through Sentinel --------------------------------------------------------------------------


def open_replicated(strategy: str, url: str, durability: Durability = QUICK, retry: RetryPolicy = RETRY):
    return open_store(
        strategy,
        namespace=f"d-{strategy}",
        policy_digest=POLICY,
        redis_url=url,
        capacity=100_000,
        error_rate=0.001,
        durability=durability,
        retry=retry,
    )


@pytest.mark.slow
def test_claims_through_sentinel_wait_for_a_replica(sentinel_set: SentinelSet):
    """Every store, blocking and asyncio, through the Sentinels: what was won is on a replica."""
    pages = fingerprints(2_000)
    durability = Durability("replicated", 2, 2.0)  # both replicas: each must hold every answer
    for strategy in STRATEGIES:
        if strategy == "redisbloom" and sentinel_set.primary.module is None:
            continue  # RedisBloom is checked where the module exists (CI: always)
        with open_replicated(strategy, sentinel_set.url, durability) as store:
            assert sum(store.claim_many(pages[:1_000])) == 1_000

        async def claim_async(strategy: str = strategy) -> List[bool]:
            async with open_async_store(
                strategy,
                namespace=f"d-{strategy}",
                policy_digest=POLICY,
                redis_url=sentinel_set.url,
                capacity=100_000,
                error_rate=0.001,
                durability=durability,
            ) as store:
                return await store.claim_many(pages)

        won = asyncio.run(claim_async())
        assert won == [False] * 1_000 + [True] * 1_000
    primary_keys = keys_on(sentinel_set.primary.port)
    assert all(keys_on(replica.port) == primary_keys for replica in sentinel_set.replicas)
    # crawldedup doctor checks the store as a crawl with that setting uses it.
    doctor = subprocess.run(
        [
            sys.executable,
            "-m",
            "crawldedup",
            "doctor",
            "--samples",
            "2000",
            "--strategy",
            "set",
            "--redis-url",
            sentinel_set.url,
            "--durability",
            "replicated",
            "--durable-replicas",
            "2",
            "--durable-timeout",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "PASS  claim race" in doctor.stdout


def test_cli_refuses_replicated_outside_redis(tmp_path):
    served = subprocess.run(
        [
            sys.executable,
            "-m",
            "crawldedup",
            "serve",
            "--port",
            "0",
            "--strategy",
            "sqlite",
            "--sqlite",
            str(tmp_path / "c.sqlite"),
            "--durability",
            "replicated",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 2
    (line,) = served.stderr.strip().splitlines()  # one line, no traceback
    assert "durability (CRAWLDEDUP_DURABILITY) 'replicated' needs a Redis strategy" in line and "not sqlite" in line


@pytest.mark.slow
def test_sentinels_with_a_password():
    """Sentinels that ask for a password (``requirepass``) get ``?sentinel_password=``; without
    it the store cannot find the primary; the password shows nowhere."""
    secret = "s3nt:inel@pass"
    deployment = SentinelSet(
        required_redis_server(), required_sentinel(), replicas=0, sentinels=1, sentinel_password=secret
    )
    try:
        deployment.start()
        with open_store(
            "set", namespace="p", policy_digest=POLICY, redis_url=deployment.url, capacity=10, error_rate=0.01
        ) as store:
            assert store.claim_many(fingerprints(5)) == [True] * 5
            assert "sentinel_password=***" in repr(store) and secret not in repr(store)
        with pytest.raises(StoreUnavailable, match="No master found") as raised:
            open_store(
                "set",
                namespace="p",
                policy_digest=POLICY,
                redis_url=deployment.url.split("?")[0],
                capacity=10,
                error_rate=0.01,
                retry=RETRY,
            )
        assert "uthentication" in str(raised.value)
    finally:
        deployment.stop()


@pytest.mark.slow
def test_without_replicas_a_batch_is_an_error_then_resumed(sentinel_set: SentinelSet):
    """No replica to confirm: StoreUnavailable naming WAIT, never an answer. The primary applied
    the claims, so a reader sees them taken; the same batch, once a replica is back, is answered
    won through its receipt (not "already claimed")."""
    pages = fingerprints(500)
    leased = fingerprints(50)
    with (
        open_replicated("set", sentinel_set.url) as store,
        open_store(
            "set", namespace="d-set", policy_digest=POLICY, redis_url=sentinel_set.url, capacity=10, error_rate=0.01
        ) as reader,
    ):
        dedup = Deduplicator("set", store=store)
        urls = [f"https://example.com/lease/{i}" for i in range(len(leased))]
        assert all(dedup.claim_many(urls, lease=60))
        for replica in sentinel_set.replicas:
            replica.stop()
        with pytest.raises(StoreUnavailable, match="WAIT confirmed the batch on 0 of the 1 replicas"):
            store.claim_many(pages)
        assert all(reader.contains_many(pages))  # applied on the primary, yet not answered
        with pytest.raises(StoreUnavailable, match="WAIT"):
            dedup.done(urls[:25])
        with pytest.raises(StoreUnavailable, match="WAIT"):
            dedup.release(urls[25:])
        with pytest.raises(StoreUnavailable, match="WAIT"):
            dedup.renew(urls[25:], 60)
        sentinel_set.replicas[0].start()
        for _ in range(50):  # the replica resyncs; each try waits 1 s at most
            try:
                assert store.claim_many(pages) == [True] * len(pages)
                break
            except StoreUnavailable:
                continue
        else:
            pytest.fail("the replica never confirmed the batch")
        assert dedup.done(urls[:25]) == [True] * 25
        assert dedup.release(urls[25:]) == [True] * 25
    assert _replication(sentinel_set.replicas[0].port).get("master_link_status") == "up"


@pytest.mark.slow
def test_replicated_on_a_cluster_waits_on_every_master(replicated_cluster: RedisClusterServers):
    pages = fingerprints(3_000)
    for strategy in ("set", "sharded-set"):
        with open_replicated(strategy, replicated_cluster.url, STEADY, RetryPolicy()) as store:
            assert store.in_cluster
            assert sum(store.claim_many(pages)) == len(pages)
            assert not any(store.claim_many(pages))

        async def claim_async(strategy: str = strategy) -> List[bool]:
            async with open_async_store(
                strategy,
                namespace=f"a-{strategy}",
                policy_digest=POLICY,
                redis_url=replicated_cluster.url,
                capacity=100_000,
                error_rate=0.001,
                durability=STEADY,
            ) as store:
                return await store.claim_many(pages)

        assert all(asyncio.run(claim_async()))
    # Every master ran part of each batch, and its replica holds what it answered.
    masters = [port for port in replicated_cluster.ports if _replication(port).get("role") == "master"]
    assert len(masters) == 3 and all(keys_on(port) > 0 for port in masters)
    assert sum(keys_on(port) for port in masters) == sum(
        keys_on(port) for port in replicated_cluster.ports if port not in masters
    )
