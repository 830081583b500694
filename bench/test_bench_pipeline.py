"""The whole claim pipeline on a crawl frontier with ~90% duplicate pages, against the plain design.

Plain design (the seed's): canonicalize, then ``SET visited:<sha1 hex> 1 NX EX ttl`` for every
URL, pipelined 1,000 per round trip, no local filter. The Deduplicator: the same
canonicalization, a local Bloom filter, and only its misses sent to each store, one round trip
per call. It is measured with calls of 1,000 URLs (same calls as the plain design: every call
still needs one round trip, carrying ~100 misses) and of 10,000 URLs (about 1,000 misses per
round trip, the plain design's payload).

Round trips are counted by the client itself (a connection that counts what it sends), so
they do not depend on timing. Run (one run, three rounds per case)::

    pytest bench/test_bench_pipeline.py --benchmark-group-by=group \\
        --benchmark-columns=median,ops,rounds -s

``test_summary`` prints claims/s, round trips and the ratios to the plain design.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import redis

from crawldedup import DEFAULT_POLICY, canonicalize_many
from crawldedup.dedup import Deduplicator
from crawldedup.fingerprints import Fingerprints, multiply_shift
from crawldedup.stores import RedisBloomStore, RedisKeyStore, RedisShardedSetStore, SQLiteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import frontier  # noqa: E402

LINKS = 100_000
#: Distinct pages to draw from: with Zipf popularity, 100,000 links name ~10,000 of them.
PAGES = 14_000
PLAIN_BATCH = 1_000
TTL_SECONDS = 30 * 86_400


def _stream() -> List[str]:
    chunks: List[str] = []
    frontier.generate(LINKS, PAGES, seed=7, write=chunks.append)
    # Relative links (BASE<TAB>LINK) need a base per link; the benchmark keeps absolute ones.
    return [line for line in "".join(chunks).split("\n") if line and "\t" not in line]


STREAM = _stream()
DISTINCT = len({u for u in canonicalize_many(STREAM).urls if u is not None})
RESULTS: Dict[str, Tuple[float, int]] = {}


class CountingConnection(redis.Connection):
    """A connection that counts the times it sends: one per command, one per pipeline."""

    sends = 0

    def send_packed_command(self, command, check_health=True):  # type: ignore[no-untyped-def]
        CountingConnection.sends += 1
        return super().send_packed_command(command, check_health)


def counting_client(url: str) -> redis.Redis:
    pool = redis.ConnectionPool.from_url(url, connection_class=CountingConnection)
    return redis.Redis(connection_pool=pool)


def record(name: str, benchmark, round_trips: int) -> None:
    median = benchmark.stats.stats.median
    RESULTS[name] = (len(STREAM) / median, round_trips)
    benchmark.extra_info.update(
        claims_per_second=len(STREAM) / median, round_trips=round_trips, urls=len(STREAM), distinct_pages=DISTINCT
    )


def plain_design(client: redis.Redis) -> int:
    won = 0
    for start in range(0, len(STREAM), PLAIN_BATCH):
        canonical = canonicalize_many(STREAM[start : start + PLAIN_BATCH]).urls
        pipe = client.pipeline(transaction=False)
        for url in canonical:
            if url is not None:
                pipe.set("visited:" + hashlib.sha1(url.encode()).hexdigest(), 1, nx=True, ex=TTL_SECONDS)
        won += sum(1 for ok in pipe.execute() if ok)
    return won


@pytest.mark.benchmark(group="pipeline")
def test_plain_set_nx(benchmark, redis_url):
    client = counting_client(redis_url)
    sends: List[int] = []

    def setup():
        client.flushall()
        CountingConnection.sends = 0
        return (), {}

    def run() -> None:
        won = plain_design(client)
        sends.append(CountingConnection.sends)
        assert won == DISTINCT

    benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    record("plain SET NX, 1,000 per round trip", benchmark, sends[-1])


def open_store(strategy: str, client: redis.Redis, tmp_path: Path):
    common = {"namespace": "bench", "policy_digest": DEFAULT_POLICY.digest}
    if strategy == "set":
        return RedisKeyStore(client=client, ttl_seconds=TTL_SECONDS, **common)
    if strategy == "sharded-set":
        return RedisShardedSetStore(client=client, capacity=1_000_000, **common)
    if strategy == "bloom":
        return RedisBloomStore(client=client, capacity=1_000_000, error_rate=0.001, **common)
    if strategy == "sqlite":
        return SQLiteStore(tmp_path / f"bench-{len(list(tmp_path.iterdir()))}.sqlite", **common)
    return None


@pytest.mark.parametrize("batch", [1_000, 10_000])
@pytest.mark.parametrize("strategy", ["local", "set", "sharded-set", "bloom", "sqlite"])
@pytest.mark.benchmark(group="pipeline")
def test_deduplicator(benchmark, redisbloom_url, tmp_path, strategy, batch):
    client = counting_client(redisbloom_url)
    sends: List[int] = []
    dedups: List[Deduplicator] = []

    def setup():
        client.flushall()
        CountingConnection.sends = 0
        store = open_store(strategy, client, tmp_path)
        dedups.append(Deduplicator(strategy, store=store, capacity=1_000_000, error_rate=0.001))
        CountingConnection.sends = 0  # opening the namespace is not part of the stream
        return (dedups[-1],), {}

    def run(dedup: Deduplicator) -> None:
        won = sum(sum(dedup.claim_many(STREAM[s : s + batch])) for s in range(0, len(STREAM), batch))
        sends.append(CountingConnection.sends if strategy not in ("local", "sqlite") else dedup.stats.round_trips)
        assert DISTINCT - 10 <= won <= DISTINCT  # RedisBloom may lose a few to false positives
        dedup.close()

    benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    record(f"Deduplicator {strategy}, calls of {batch:,}", benchmark, sends[-1])


def test_summary(capsys):
    if not RESULTS:
        pytest.skip("run with the benchmarks")
    plain_rate, plain_trips = RESULTS["plain SET NX, 1,000 per round trip"]
    lines = [
        f"{len(STREAM):,} URLs, {DISTINCT:,} distinct pages ({1 - DISTINCT / len(STREAM):.0%} duplicates)",
        "| design | claims/s (median of 3) | x plain | round trips | plain / ours |",
        "|---|---|---|---|---|",
    ]
    for name, (rate, trips) in RESULTS.items():
        fewer = f"{plain_trips / trips:.1f}" if trips else "no store"
        lines.append(f"| {name} | {rate:,.0f} | {rate / plain_rate:.1f} | {trips} | {fewer} |")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    for strategy in ("set", "sharded-set", "bloom"):
        _, trips = RESULTS[f"Deduplicator {strategy}, calls of 10,000"]
        assert plain_trips / trips >= 8


# --- the keys store alone: one script per group vs one SET NX per URL ------------------------

FINGERPRINTS = [hashlib.md5(str(i).encode()).digest() for i in range(100_000)]
KEYS_BATCH = 1_000


def _claim_with_script(store: RedisKeyStore) -> int:
    return sum(sum(store.claim_many(FINGERPRINTS[s : s + KEYS_BATCH])) for s in range(0, len(FINGERPRINTS), KEYS_BATCH))


def _claim_with_pipelined_set(store: RedisKeyStore) -> int:
    won = 0
    for start in range(0, len(FINGERPRINTS), KEYS_BATCH):
        pipe = store.client.pipeline(transaction=False)
        batch = FINGERPRINTS[start : start + KEYS_BATCH]
        groups = multiply_shift(Fingerprints.of(batch).first_halves, store.groups).tolist()
        for group, fp in zip(groups, batch):  # the store's keys: {<namespace>:<group>}<fingerprint>
            pipe.set(b"{%s:%d}" % (store.namespace.encode(), group) + fp, 1, nx=True, ex=TTL_SECONDS)
        won += sum(1 for ok in pipe.execute() if ok)
    return won


@pytest.mark.parametrize("groups", [1, 16])
@pytest.mark.parametrize("method", ["script", "pipelined-set"])
@pytest.mark.benchmark(group="keys-store")
def test_keys_store_claims(benchmark, redis_url, method, groups):
    claim = _claim_with_script if method == "script" else _claim_with_pipelined_set
    stores: List[RedisKeyStore] = []

    def setup():
        redis.Redis.from_url(redis_url).flushall()
        stores.append(
            RedisKeyStore(
                redis_url,
                namespace="bench",
                policy_digest=DEFAULT_POLICY.digest,
                ttl_seconds=TTL_SECONDS,
                groups=groups,
            )
        )
        return (stores[-1],), {}

    def run(store: RedisKeyStore) -> None:
        assert claim(store) == len(FINGERPRINTS)
        store.close()

    benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    benchmark.extra_info["claims_per_second"] = len(FINGERPRINTS) / benchmark.stats.stats.median
