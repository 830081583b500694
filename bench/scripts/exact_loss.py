"""Pages lost with no fault at all: N distinct URLs claimed once, counted (run by hand).

The CI-sized case (9,000 pages into a capacity of 10,000) is tests/test_exact_loss.py; this is
the same count at scale, through one configuration at a time::

    python bench/scripts/exact_loss.py --config exact --urls 100000000
    python bench/scripts/exact_loss.py --config cli --urls 100000000 --dir /tmp/loss
    python bench/scripts/exact_loss.py --config sqlite --urls 10000000 --dir /tmp/loss
    python bench/scripts/exact_loss.py --config sharded-set --redis-url redis://127.0.0.1:6379/0 --urls 100000000
    python bench/scripts/exact_loss.py --config local --urls 100000000        # the Bloom filter alone
    python bench/scripts/exact_loss.py --config sqlite --local-tier bloom --urls 1000000 --dir /tmp/loss

Every configuration is sized for the crawl (``--capacity``, default ``--urls``) and keeps the
defaults otherwise: the recrawl window of 30 days, the exact local tier in front of a store.
Prints the URLs claimed, the pages won, the pages lost (claimed by nobody), claims/s and the
bytes per URL the local state holds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, Iterator, List

from crawldedup import Deduplicator


def urls(start: int, stop: int) -> List[str]:
    """Distinct pages: 100,003 hosts, one path each."""
    return [f"https://site{i % 100_003}.example/catalog/item-{i}" for i in range(start, stop)]


def batches(total: int, size: int) -> Iterator[List[str]]:
    for start in range(0, total, size):
        yield urls(start, min(total, start + size))


def through_api(args: argparse.Namespace) -> Dict[str, Any]:
    options: Dict[str, Any] = {"capacity": args.capacity or args.urls}
    if args.local_tier:
        options["local_tier"] = args.local_tier
    if args.dir:
        options["state"] = os.path.join(args.dir, "state.bloom")
    if args.config in ("set", "sharded-set"):
        options["redis_url"] = args.redis_url
    elif args.config == "sqlite":
        options["sqlite_path"] = os.path.join(args.dir or ".", "claims.sqlite")
    elif args.config == "postgres":
        options["postgres_url"] = args.postgres_url
    elif args.config == "service":
        options["service_url"] = args.service_url
    won = 0
    started = time.perf_counter()
    with Deduplicator(args.config, namespace=f"loss{os.getpid()}", **options) as dedup:
        for done, batch in enumerate(batches(args.urls, args.batch)):
            won += sum(dedup.claim_many(batch))
            if done % 100 == 0:
                sys.stderr.write(f"\r{(done + 1) * args.batch:,} claimed, {won:,} won ")
        seconds = time.perf_counter() - started
        per_url = dedup.store_bytes_per_url() if dedup.store is None else None
    sys.stderr.write("\n")
    return {"won": won, "seconds": seconds, "local_bytes_per_url": per_url}


def through_cli(args: argparse.Namespace) -> Dict[str, Any]:
    assert args.dir, "--dir: where the CLI's state file goes"
    command = [sys.executable, "-m", "crawldedup", "filter", "--capacity", str(args.capacity or args.urls)]
    command += ["--state", os.path.join(args.dir, "cli.bloom")]
    started = time.perf_counter()
    filtering = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    counter = subprocess.Popen(["wc", "-l"], stdin=filtering.stdout, stdout=subprocess.PIPE)
    assert filtering.stdin is not None and filtering.stdout is not None
    filtering.stdout.close()
    for batch in batches(args.urls, args.batch):
        filtering.stdin.write("".join(f"{url}\n" for url in batch).encode())
    filtering.stdin.close()
    printed = int(counter.communicate()[0])
    summary = filtering.stderr.read().decode() if filtering.stderr else ""
    assert filtering.wait() == 0, summary
    sys.stderr.write(summary)
    return {"won": printed, "seconds": time.perf_counter() - started, "local_bytes_per_url": None}


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config",
        required=True,
        choices=["exact", "local", "sqlite", "set", "sharded-set", "postgres", "service", "cli"],
    )
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--capacity", type=int)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--local-tier", choices=["exact", "bloom"], help="with a store: the local tier (default exact)")
    parser.add_argument("--dir", help="a directory for the state file (and SQLite's file); none: in memory")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgres-url")
    parser.add_argument("--service-url")
    args = parser.parse_args(argv)
    if args.dir:
        shutil.rmtree(args.dir, ignore_errors=True)
        os.makedirs(args.dir)
    result = through_cli(args) if args.config == "cli" else through_api(args)
    print(f"config: {args.config}")
    print(f"urls: {args.urls}")
    print(f"won: {result['won']}")
    print(f"lost: {args.urls - result['won']}")
    print(f"claims_per_s: {args.urls / result['seconds']:,.0f}")
    if result["local_bytes_per_url"] is not None:
        print(f"local_bytes_per_url: {result['local_bytes_per_url']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
