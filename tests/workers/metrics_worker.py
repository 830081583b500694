"""One process of the multiprocess metrics test (run as a script by tests/test_metrics.py, never imported).

Usage: metrics_worker.py WORKER PAGES OUT_FILE REDIS_URL

PROMETHEUS_MULTIPROC_DIR is set by the test before this process imports prometheus_client.
Claims pages 0..PAGES-1 (each worker in its own order, in batches of 500) on the ``set``
store with a local filter and every local hit sampled, then claims them all again; writes its
``DedupStats`` and its filter's fill as JSON to OUT_FILE.
"""

import dataclasses
import json
import random
import sys

from crawldedup.dedup import Deduplicator
from crawldedup.metrics import DedupMetrics

BATCH = 500


def main() -> int:
    worker, pages, out_file, redis_url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    order = list(range(pages))
    random.Random(worker).shuffle(order)
    urls = [f"https://site.example/p/{i}" for i in order]
    metrics = DedupMetrics()
    with Deduplicator("set", redis_url=redis_url, namespace="mp", capacity=100_000, sample_rate=1.0) as dedup:
        metrics.attach(dedup)
        for _ in range(2):
            for start in range(0, pages, BATCH):
                dedup.claim_many(urls[start : start + BATCH])
        fill = dedup.local_filter.approx_items / dedup.local_filter.capacity
        stats = dataclasses.asdict(dedup.stats)
    with open(out_file, "w", encoding="ascii") as out:
        json.dump({"stats": stats, "fill": fill}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
