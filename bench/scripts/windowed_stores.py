"""Claims/s and bytes per URL of each store with a recrawl window and without, in alternating
A/B rounds (the machine is shared): a Deduplicator with no state file claims N distinct URLs
in calls of 10,000, in a fresh namespace each round.

    nice python bench/scripts/windowed_stores.py --urls 200000 --rounds 3   # starts its own redis-server

Bytes per URL are the store's own measure (``store_bytes_per_url``; the ``set`` store cannot
say, see bench/scripts/redis_memory.py). With a window, one generation holds every claim here.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # conftest.py: the RedisServer the tests use

from conftest import RedisServer, find_redis_server, find_redisbloom  # noqa: E402

from crawldedup import Deduplicator  # noqa: E402

BATCH = 10_000
STRATEGIES = ("set", "sharded-set", "redisbloom", "sqlite")


def run(strategy: str, ttl_days: float, urls: List[str], url: str, directory: str, name: str) -> Tuple[float, Optional[float]]:
    where = {"sqlite_path": f"{directory}/{name}.sqlite"} if strategy == "sqlite" else {"redis_url": url}
    with Deduplicator(strategy, namespace=name, ttl_days=ttl_days, capacity=len(urls), **where) as d:
        began = time.perf_counter()
        for start in range(0, len(urls), BATCH):
            d.claim_many(urls[start:start + BATCH])
        seconds = time.perf_counter() - began
        return len(urls) / seconds, d.store_bytes_per_url()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    binary = find_redis_server()
    if binary is None:
        sys.exit("redis-server not found")
    server = RedisServer(binary, find_redisbloom())
    server.start()
    directory = tempfile.mkdtemp(prefix="crawldedup-windowed-")
    results: Dict[Tuple[str, str], List[Tuple[float, Optional[float]]]] = {}
    try:
        variants = [(strategy, label, days) for strategy in STRATEGIES for label, days in (("plain", 0.0), ("windowed", 30.0))]
        for r in range(args.rounds):
            urls = [f"https://round{r}.example/item/{i}?ref=x" for i in range(args.urls)]
            for strategy, label, days in (variants if r % 2 == 0 else variants[::-1]):
                results.setdefault((strategy, label), []).append(
                    run(strategy, days, urls, server.url, directory, f"r{r}-{strategy}-{label}"))
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)
        shutil.rmtree(directory, ignore_errors=True)
    print(f"{args.urls:,} distinct URLs, calls of {BATCH:,}, {args.rounds} rounds, medians (ranges)")
    for (strategy, label), rows in results.items():
        rates = [rate for rate, _ in rows]
        sizes = [size for _, size in rows if size is not None]
        size = f"{statistics.median(sizes):.1f}" if sizes else "n/a"
        print(f"{strategy:12} {label:9} {statistics.median(rates):>10,.0f} claims/s ({min(rates):,.0f}-{max(rates):,.0f})"
              f"   bytes/URL {size}")


if __name__ == "__main__":
    main()
