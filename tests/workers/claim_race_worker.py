"""One worker of the claim race (run as a script by tests/test_claim_race.py, never imported).

Usage: claim_race_worker.py WORKER PAGES START_FILE OUT_FILE JSON_DEDUP_ARGS

Claims every page once, in its own order and spellings, in batches of 1,000, after
START_FILE appears (so that all workers race), then writes the canonical URLs it won.
OUT_FILE.ready appears once the worker is ready to start. With ``"lease": seconds`` among the
arguments, each batch is claimed with a lease and its winners finished with ``done`` (exit
code 3 when a done is refused). With ``"service_urls": [URL, ...]``, worker ``w`` claims through
the ``crawldedup serve`` at ``URL[w % len]`` (a ServiceClient) instead of a Deduplicator of its own.
"""

import json
import os
import random
import sys
import time

from crawldedup import ServiceClient
from crawldedup.dedup import Deduplicator

SPELLINGS = (
    "https://site.example/p/{i}?a=1&b=2",
    "HTTPS://SITE.EXAMPLE:443/p/{i}/?b=2&a=1",
    "https://site.example/p/{i}?a=1&utm_source=w{w}&b=2#reviews",
    "https://Site.Example/p/{i}?gclid=x{w}&b=2&a=1",
)
BATCH = 1_000


def main() -> int:
    worker, pages, start_file, out_file, options = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        sys.argv[3],
        sys.argv[4],
        sys.argv[5],
    )
    order = list(range(pages))
    random.Random(worker).shuffle(order)
    urls = [SPELLINGS[(i + worker) % len(SPELLINGS)].format(i=i, w=worker) for i in order]
    options = json.loads(options)
    lease = options.pop("lease", None)
    services = options.pop("service_urls", None)
    with ServiceClient(services[worker % len(services)]) if services else Deduplicator(**options) as dedup:
        open(out_file + ".ready", "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(start_file):
            if time.monotonic() > deadline:
                return 2
            time.sleep(0.005)
        won = []
        for start in range(0, pages, BATCH):
            batch = dedup.claim_batch(urls[start : start + BATCH], lease=lease)
            winners = [c for c, w in zip(batch.canonical, batch.won) if w]
            if lease is not None and not all(dedup.done(winners)):
                return 3
            won.extend(winners)
    with open(out_file, "w", encoding="ascii") as out:
        out.write("\n".join(won))
    return 0


if __name__ == "__main__":
    sys.exit(main())
