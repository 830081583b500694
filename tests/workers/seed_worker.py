"""One worker on a seeded namespace (run as a script by tests/test_cli_migrate_state.py, never imported).

Usage: seed_worker.py KIND URLS_FILE OUT_FILE JSON_DEDUP_ARGS

KIND is ``blocking`` (a Deduplicator) or ``async`` (an AsyncDeduplicator). The worker claims
every URL of URLS_FILE (one per line) in its own shuffled order, in batches of 1,000, then
writes the canonical URLs it won, one per line, and its stats' seed hits on the last line.
"""

import asyncio
import json
import random
import sys

from crawldedup import AsyncDeduplicator, Deduplicator

BATCH = 1_000


def batches(urls: list, seed: int) -> list:
    order = list(urls)
    random.Random(seed).shuffle(order)
    return [order[start : start + BATCH] for start in range(0, len(order), BATCH)]


def won_of(batch) -> list:
    return [c for c, w in zip(batch.canonical, batch.won) if w]


async def run_async(urls: list, settings: dict) -> tuple:
    won = []
    async with AsyncDeduplicator(**settings) as dedup:
        for batch in batches(urls, 2):
            won += won_of(await dedup.claim_batch(batch))
        return won, dedup.stats.seed_hits


def run_blocking(urls: list, settings: dict) -> tuple:
    won = []
    with Deduplicator(**settings) as dedup:
        for batch in batches(urls, 1):
            won += won_of(dedup.claim_batch(batch))
        return won, dedup.stats.seed_hits


def main() -> None:
    kind, urls_file, out_file, settings = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    with open(urls_file) as source:
        urls = source.read().split()
    won, seed_hits = asyncio.run(run_async(urls, settings)) if kind == "async" else run_blocking(urls, settings)
    with open(out_file, "w") as out:
        out.write("".join(url + "\n" for url in won) + f"{seed_hits}\n")


if __name__ == "__main__":
    main()
