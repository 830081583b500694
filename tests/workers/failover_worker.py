"""One worker of the failover tests (run as a script by tests/test_failover.py, never imported).

Usage: failover_worker.py WORKER PAGES START_FILE OUT_FILE JSON_OPTIONS

Claims every page once, in its own order and the claim race's spellings, in batches of
``BATCH`` ``PAUSE_SECONDS`` apart, after START_FILE appears; an odd WORKER through an AsyncDeduplicator, an even one
through a Deduplicator. JSON_OPTIONS: ``strategy``, ``redis_url``, ``namespace``,
``durability``. A batch that raises StoreUnavailable (the primary died, no primary yet, WAIT
short of replicas) is made again, the same batch, until answered: its token resumes it.
OUT_FILE.ready appears once the worker is ready; OUT_FILE.progress grows a byte per answered
batch. OUT_FILE gets JSON: the canonical URLs won and the batches made again.
"""

import asyncio
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from claim_race_worker import SPELLINGS  # noqa: E402

from crawldedup import AsyncDeduplicator, Deduplicator, StoreUnavailable  # noqa: E402
from crawldedup.config import DedupConfig  # noqa: E402

BATCH = 250
#: Seconds between two batches: a run of 80 batches lasts 8 s at least, so that it outlasts
#: the stall and the kill the tests make once a fifth of it is done, however fast the machine.
PAUSE_SECONDS = 0.1
#: How long one batch may take to be answered, failovers included.
BATCH_DEADLINE_SECONDS = 90


def main() -> int:
    worker, pages, start_file, out_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    options = json.loads(sys.argv[5])
    order = list(range(pages))
    random.Random(worker).shuffle(order)
    urls = [SPELLINGS[(i + worker) % len(SPELLINGS)].format(i=i, w=worker) for i in order]
    config = DedupConfig(
        strategy=options["strategy"],
        redis_url=options["redis_url"],
        namespace=options["namespace"],
        durability=options["durability"],
        capacity=pages * 2,
        ttl_days=0,
    )
    batches = [urls[start : start + BATCH] for start in range(0, pages, BATCH)]
    run = claim_async if worker % 2 else claim_blocking
    won, repeated = run(config, batches, start_file, out_file)
    with open(out_file, "w", encoding="ascii") as out:
        json.dump({"won": won, "repeated": repeated}, out)
    return 0


def wait_for_start(start_file: str, out_file: str) -> None:
    open(out_file + ".ready", "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(start_file):
        if time.monotonic() > deadline:
            sys.exit(2)
        time.sleep(0.005)


def answered(progress, batch, result) -> list:
    progress.write(b".")
    progress.flush()
    return [c for c, w in zip(result.canonical, result.won) if w]


def claim_blocking(config, batches, start_file, out_file):
    won, repeated = [], 0
    with Deduplicator(config=config) as dedup, open(out_file + ".progress", "wb") as progress:
        wait_for_start(start_file, out_file)
        for batch in batches:
            deadline = time.monotonic() + BATCH_DEADLINE_SECONDS
            while True:
                try:
                    result = dedup.claim_batch(batch)
                    break
                except StoreUnavailable:
                    if time.monotonic() > deadline:
                        raise
                    repeated += 1
                    time.sleep(0.1)
            won.extend(answered(progress, batch, result))
            time.sleep(PAUSE_SECONDS)
    return won, repeated


def claim_async(config, batches, start_file, out_file):
    async def run():
        won, repeated = [], 0
        async with AsyncDeduplicator(config=config) as dedup:
            with open(out_file + ".progress", "wb") as progress:
                wait_for_start(start_file, out_file)
                for batch in batches:
                    deadline = time.monotonic() + BATCH_DEADLINE_SECONDS
                    while True:
                        try:
                            result = await dedup.claim_batch(batch)
                            break
                        except StoreUnavailable:
                            if time.monotonic() > deadline:
                                raise
                            repeated += 1
                            await asyncio.sleep(0.1)
                    won.extend(answered(progress, batch, result))
                    await asyncio.sleep(PAUSE_SECONDS)
        return won, repeated

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
