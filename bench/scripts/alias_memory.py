"""Bytes per alias of redirects in each store's alias map, measured, and the bound holding.

Usage::

    nice python bench/scripts/alias_memory.py --aliases 1000000      # starts its own redis-server

Each store records N aliases (random requested and final fingerprints: fingerprints of canonical
URLs are uniform 128-bit values) in batches of 10,000 through ``claim_and_read(aliases=...)``,
with a bound of N (nothing replaced), then M more with the bound N (every new one replaces one):
the map must still hold N. Redis: ``INFO memory`` used_memory delta (the layout of ``set``,
``sharded-set`` and ``redisbloom`` is one); SQLite: the file's pages in use, the alias table
alone; local: the journal's bytes on disk and the process's traced Python memory (tracemalloc).
Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # conftest.py: the RedisServer the tests use

from conftest import RedisServer, find_server  # noqa: E402

from crawldedup.dedup.aliases import LocalAliases  # noqa: E402
from crawldedup.fingerprints import Fingerprints  # noqa: E402
from crawldedup.stores import Aliases, RedisKeyStore, SQLiteStore  # noqa: E402
from crawldedup.stores.redis_aliases import ALIAS_GROUPS, alias_key  # noqa: E402
from crawldedup.windows import system_clock  # noqa: E402

DIGEST = "0123456789abcdef"
BATCH = 10_000


def batches(n: int, bound: int, seed: int) -> Iterator[Aliases]:
    rng = random.Random(seed)
    for start in range(0, n, BATCH):
        count = min(BATCH, n - start)
        requested, finals = (Fingerprints.of([rng.randbytes(16) for _ in range(count)]) for _ in range(2))
        yield Aliases(requested, finals, bound)


def redis_row(url: str, n: int, more: int) -> Tuple[float, float, int]:
    client = redis.Redis.from_url(url, socket_timeout=600)
    client.execute_command("FLUSHALL", "SYNC")
    time.sleep(0.5)
    before = int(client.info("memory")["used_memory"])
    with RedisKeyStore(url, namespace="mem", policy_digest=DIGEST) as store:
        start = time.perf_counter()
        for aliases in batches(n, n, seed=1):
            store.claim_and_read((), (), aliases=aliases)
        seconds = time.perf_counter() - start
        per_alias = (int(client.info("memory")["used_memory"]) - before) / n
        for aliases in batches(more, n, seed=2):
            store.claim_and_read((), (), aliases=aliases)
    held = sum(client.hlen(alias_key("mem", g)) for g in range(ALIAS_GROUPS))
    client.close()
    return per_alias, n / seconds, held


def sqlite_row(tmp: Path, n: int, more: int) -> Tuple[float, float, int]:
    with SQLiteStore(tmp / "aliases.sqlite", namespace="mem", policy_digest=DIGEST) as store:
        start = time.perf_counter()
        for aliases in batches(n, n, seed=1):
            store.claim_and_read((), (), aliases=aliases)
        seconds = time.perf_counter() - start
        db = store._connection()
        pages = db.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'crawldedup_aliases%'").fetchone()[0]
        for aliases in batches(more, n, seed=2):
            store.claim_and_read((), (), aliases=aliases)
        held = db.execute("SELECT count(*) FROM crawldedup_aliases").fetchone()[0]
    return pages / n, n / seconds, held


def local_row(tmp: Path, n: int, more: int) -> Tuple[str, float, int]:
    tracemalloc.start()
    aliases_map = LocalAliases(str(tmp / "state.aliases"), None, system_clock)
    start = time.perf_counter()
    for aliases in batches(n, n, seed=1):
        aliases_map.record(aliases)
    seconds = time.perf_counter() - start
    memory = tracemalloc.get_traced_memory()[0] / n
    tracemalloc.stop()
    disk = (tmp / "state.aliases").stat().st_size / n
    for aliases in batches(more, n, seed=2):
        aliases_map.record(aliases)
    held = len(aliases_map)
    aliases_map.close()
    return f"{memory:.1f} in memory, {disk:.1f} on disk", n / seconds, held


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aliases", type=int, default=1_000_000, help="N, also the bound")
    parser.add_argument("--more", type=int, default=100_000, help="M aliases recorded into the full map")
    args = parser.parse_args(argv)
    n, more = args.aliases, args.more
    binary = find_server("redis7")
    if binary is None:
        parser.error("no redis-server (the test extra installs one)")
    server = RedisServer(binary, None)
    server.start()
    rows = []
    try:
        per_alias, rate, held = redis_row(server.url, n, more)
        rows.append(("Redis hashes (`set`, `sharded-set`, `redisbloom`)", f"{per_alias:.1f}", f"{rate:,.0f}", held))
        with tempfile.TemporaryDirectory() as tmp:
            per_alias, rate, held = sqlite_row(Path(tmp), n, more)
            rows.append(("SQLite table and index (on disk)", f"{per_alias:.1f}", f"{rate:,.0f}", held))
            shown, rate, held = local_row(Path(tmp), n, more)
            rows.append(("local map and journal", shown, f"{rate:,.0f}", held))
    finally:
        server.stop()
    print(
        f"| alias map ({n:,} aliases, bound {n:,}) | bytes per alias | aliases/s recorded | held after {more:,} more |"
    )
    print("|---|---|---|---|")
    for name, per_alias_text, rate_text, held in rows:
        print(f"| {name} | {per_alias_text} | {rate_text} | {held:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
