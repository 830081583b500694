"""One process of the asyncio claim race (run as a script by tests/test_async_race.py, never imported).

Usage: async_race_worker.py WORKER PAGES TASKS START_FILE OUT_FILE JSON_DEDUP_ARGS

TASKS tasks of one AsyncDeduplicator claim the pages after START_FILE appears (so that both
processes race): task t claims every page i with i % 8 == t % 8, in its own order and
spellings, in batches of 500, so that each page is raced for by 8 tasks of each process. Then
the process writes the canonical URLs its tasks won, one per line. OUT_FILE.ready appears once the
store is open.
"""

import asyncio
import json
import os
import random
import sys
import time

from crawldedup import AsyncDeduplicator

SPELLINGS = (
    "https://site.example/p/{i}?a=1&b=2",
    "HTTPS://SITE.EXAMPLE:443/p/{i}/?b=2&a=1",
    "https://site.example/p/{i}?a=1&utm_source=w{w}&b=2#reviews",
    "https://Site.Example/p/{i}?gclid=x{w}&b=2&a=1",
)
BATCH = 500
#: Tasks that share one set of pages.
SHARES = 8


async def claim_all(dedup: AsyncDeduplicator, task: int, pages: int) -> list:
    order = list(range(task % SHARES, pages, SHARES))
    random.Random(task).shuffle(order)
    urls = [SPELLINGS[(i + task) % len(SPELLINGS)].format(i=i, w=task) for i in order]
    won = []
    for start in range(0, len(urls), BATCH):
        batch = await dedup.claim_batch(urls[start : start + BATCH])
        won.extend(c for c, w in zip(batch.canonical, batch.won) if w)
    return won


async def main() -> int:
    worker, pages, tasks = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    start_file, out_file, options = sys.argv[4], sys.argv[5], json.loads(sys.argv[6])
    async with AsyncDeduplicator(**options) as dedup:
        open(out_file + ".ready", "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(start_file):
            if time.monotonic() > deadline:
                return 2
            await asyncio.sleep(0.005)
        results = await asyncio.gather(*(claim_all(dedup, worker * tasks + t, pages) for t in range(tasks)))
    with open(out_file, "w", encoding="ascii") as out:
        out.write("\n".join(url for won in results for url in won))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
