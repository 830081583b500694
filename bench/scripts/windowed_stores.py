"""Claims/s and bytes per URL of each store with a recrawl window and without (or, with
``--compare durability``, of each Redis store with ``durability="primary"`` and
``"replicated"``), in alternating A/B rounds (the machine is shared): a Deduplicator with no
state file claims N distinct URLs in calls of 10,000, in a fresh namespace each round.

    nice python bench/scripts/windowed_stores.py --urls 200000 --rounds 3   # starts its own redis-server and PostgreSQL
    nice python bench/scripts/windowed_stores.py --compare durability --urls 200000 --rounds 3

``--compare durability`` starts a primary with one replica; ``replicated`` waits for it
(``WAIT 1``) after every batch, without a window.

Bytes per URL are the store's own measure (``store_bytes_per_url``; postgres: the namespace's
table, index and free space, ``pg_total_relation_size``). With a window, one generation holds
every claim here. PostgreSQL runs with its defaults (fsync on: each batch's commit waits for the
WAL's flush).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # conftest.py: the RedisServer the tests use

from conftest import PostgresServer, RedisServer, find_postgres_bin, started_redis_server  # noqa: E402

from crawldedup import Deduplicator  # noqa: E402
from crawldedup.config import DedupConfig  # noqa: E402

BATCH = 10_000
STRATEGIES = ("set", "sharded-set", "redisbloom", "sqlite", "postgres")
#: What each comparison varies: label -> the settings of its Deduplicators.
COMPARISONS = {
    "window": {"plain": {"ttl_days": 0.0}, "windowed": {"ttl_days": 30.0}},
    "durability": {"primary": {"ttl_days": 0.0}, "replicated": {"ttl_days": 0.0, "durability": "replicated"}},
}


def run(
    strategy: str, settings: Dict[str, object], urls: List[str], locations: Dict[str, str], directory: str, name: str
) -> Tuple[float, Optional[float]]:
    where: Dict[str, str] = {"redis_url": locations["redis"]}
    if strategy == "sqlite":
        where = {"sqlite_path": f"{directory}/{name}.sqlite"}
    elif strategy == "postgres":
        where = {"postgres_url": locations["postgres"]}
    config = DedupConfig(strategy=strategy, namespace=name, capacity=len(urls), **where, **settings)  # type: ignore[arg-type]
    with Deduplicator(config=config) as d:
        began = time.perf_counter()
        for start in range(0, len(urls), BATCH):
            d.claim_many(urls[start : start + BATCH])
        seconds = time.perf_counter() - began
        return len(urls) / seconds, d.store_bytes_per_url()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="window")
    args = parser.parse_args()
    server = started_redis_server()
    servers: List[Union[RedisServer, PostgresServer]] = [server]
    locations = {"redis": server.url}
    strategies = STRATEGIES
    if args.compare == "window":
        bindir = find_postgres_bin()
        if bindir is None:
            sys.exit("PostgreSQL not found: apt-get install postgresql")
        postgres = PostgresServer(bindir, durable=True)
        postgres.start()
        servers.append(postgres)
        locations["postgres"] = postgres.url()
    if args.compare == "durability":
        servers.append(
            RedisServer(server.binary, server.module, extra_args=("--replicaof", "127.0.0.1", str(server.port)))
        )
        servers[-1].start()
        strategies = STRATEGIES[:3]  # the Redis stores
    directory = tempfile.mkdtemp(prefix="crawldedup-windowed-")
    results: Dict[Tuple[str, str], List[Tuple[float, Optional[float]]]] = {}
    try:
        variants = [
            (strategy, label, settings)
            for strategy in strategies
            for label, settings in COMPARISONS[args.compare].items()
        ]
        for r in range(args.rounds):
            urls = [f"https://round{r}.example/item/{i}?ref=x" for i in range(args.urls)]
            for strategy, label, settings in variants if r % 2 == 0 else variants[::-1]:
                results.setdefault((strategy, label), []).append(
                    run(strategy, settings, urls, locations, directory, f"r{r}-{strategy}-{label}")
                )
    finally:
        for one in servers:
            one.stop()
            shutil.rmtree(one.workdir, ignore_errors=True)
        shutil.rmtree(directory, ignore_errors=True)
    print(f"{args.urls:,} distinct URLs, calls of {BATCH:,}, {args.rounds} rounds, medians (ranges)")
    for (strategy, label), rows in results.items():
        rates = [rate for rate, _ in rows]
        sizes = [size for _, size in rows if size is not None]
        size = f"{statistics.median(sizes):.1f}" if sizes else "n/a"
        first = results[(strategy, next(iter(COMPARISONS[args.compare])))]
        ratio = statistics.median(rates) / statistics.median([rate for rate, _ in first])
        print(
            f"{strategy:12} {label:10} {statistics.median(rates):>10,.0f} claims/s "
            f"({min(rates):,.0f}-{max(rates):,.0f})"
            f"  {ratio:.2f}x   bytes/URL {size}"
        )


if __name__ == "__main__":
    main()
