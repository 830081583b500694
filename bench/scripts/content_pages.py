"""Bytes per page and pages/s of Deduplicator.check_content, per page store family.

Usage::

    nice python bench/scripts/content_pages.py --pages 1000000     # starts its own redis-server

Each family checks N pages (URLs of 46 to 52 bytes, random SimHashes) in batches of 1,000,
twice: a first crawl (every page new) and a re-inspection (each page 0 to 5 bits off its first
fingerprint). Redis is measured by ``INFO memory`` used_memory over the pages (and by the
store's own sampled estimate), SQLite by the page tables' file pages, the local journal by its
file size. Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # conftest.py: the RedisServer the tests use

from conftest import RedisServer, find_redis_server  # noqa: E402

from crawldedup import Deduplicator  # noqa: E402

BATCH = 1_000


def pages(n: int) -> Tuple[List[str], List[int], List[int]]:
    """URLs, first fingerprints and re-inspection fingerprints (0 to 5 bits off)."""
    rng = random.Random(1)
    urls = [f"https://news.example/section-{i % 40}/article-{i}.html" for i in range(n)]
    first = [rng.getrandbits(64) for _ in range(n)]
    second = []
    for fp in first:
        for bit in rng.sample(range(64), rng.randint(0, 5)):
            fp ^= 1 << bit
        second.append(fp)
    return urls, first, second


def crawl(dedup: Deduplicator, urls: List[str], fps: List[int]) -> Tuple[float, Dict[str, int]]:
    """(pages/s, verdict counts) of one crawl of every page."""
    counts: Dict[str, int] = {}
    start = time.perf_counter()
    for i in range(0, len(urls), BATCH):
        for check in dedup.check_content(urls[i : i + BATCH], fps[i : i + BATCH]):
            counts[check.verdict] = counts.get(check.verdict, 0) + 1
    return len(urls) / (time.perf_counter() - start), counts


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument(
        "--stores",
        nargs="+",
        choices=("local", "sqlite", "redis"),
        default=("local", "sqlite", "redis"),
        help="which page stores to measure (default all)",
    )
    args = parser.parse_args(argv)
    n = args.pages
    urls, first, second = pages(n)
    rows = []
    binary = find_redis_server()
    if binary is None:
        parser.error("redis-server not found")
    server = RedisServer(binary, None)
    server.start()
    client = redis.Redis.from_url(server.url, socket_timeout=600)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            families = [
                ("local (journal)", {"strategy": "local", "state": Path(tmp) / "crawl.state"}),
                ("sqlite", {"strategy": "sqlite", "sqlite_path": Path(tmp) / "crawl.sqlite"}),
                ("Redis (any Redis strategy)", {"strategy": "sharded-set", "redis_url": server.url}),
            ]
            for name, options in families:
                if options["strategy"].replace("sharded-set", "redis") not in args.stores:
                    continue
                client.flushall()
                time.sleep(0.5)
                before = int(client.info("memory")["used_memory"])
                strategy = options.pop("strategy")
                with Deduplicator(strategy, namespace="bench", capacity=n, **options) as dedup:
                    rate_new, _ = crawl(dedup, urls, first)
                    rate_again, counts = crawl(dedup, urls, second)
                    sampled = dedup.store_bytes_per_page()
                    if strategy == "local":
                        measured = (Path(tmp) / "crawl.state.pages").stat().st_size / n
                    elif strategy == "sqlite":
                        measured = sampled
                    else:
                        # The sharded-set store holds no claims here: the growth is the pages'.
                        measured = (int(client.info("memory")["used_memory"]) - before) / n
                rows.append(
                    (
                        name,
                        f"{measured:.0f}",
                        f"{sampled:.0f}" if sampled else "-",
                        f"{rate_new:,.0f}",
                        f"{rate_again:,.0f}",
                        str(counts),
                    )
                )
                print("  " + " | ".join(rows[-1]), file=sys.stderr, flush=True)
    finally:
        client.close()
        server.stop()
    header = (
        f"store ({n:,} pages)",
        "bytes per page",
        "sampled estimate",
        "pages/s, first crawl",
        "pages/s, re-inspection",
        "re-inspection verdicts",
    )
    print("\n".join("| " + " | ".join(cells) + " |" for cells in [header, ("---",) * len(header), *rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
