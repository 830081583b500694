"""CPU a URL of the claim pipeline, the client's and the Redis server's, for the crawldedup this
interpreter imports: robust where wall time is not (a shared machine), so two builds compare.

    python bench/scripts/pipeline_cpu.py --redis-url redis://127.0.0.1:6379/0 --batch 1000
    PYTHONPATH=/path/to/other/checkout/src python bench/scripts/pipeline_cpu.py ...  # another build

The stream: ``examples/frontier.py``'s 100,000 links to 14,000 pages (seed 7), absolute ones only,
claimed by ``Deduplicator("set")`` in calls of ``--batch`` (the database is flushed each round).
Builds without an option (``--policy``, ``--local-tier``) run without it.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import redis

from crawldedup import Deduplicator, RedisKeyStore


def stream(examples: Path) -> List[str]:
    sys.path.insert(0, str(examples))
    import frontier  # type: ignore[import-not-found]

    chunks: List[str] = []
    frontier.generate(100_000, 14_000, seed=7, write=chunks.append)
    return [line for line in "".join(chunks).split("\n") if line and "\t" not in line]


def options(policy: str, local_tier: str) -> Tuple[Dict[str, Any], Any]:
    import crawldedup

    chosen = getattr(crawldedup, f"POLICY_{policy.upper()}", crawldedup.DEFAULT_POLICY)
    parameters = inspect.signature(Deduplicator).parameters
    kw: Dict[str, Any] = {}
    if "policy" in parameters:
        kw["policy"] = chosen
    if "local_tier" in parameters:
        kw["local_tier"] = local_tier
    return kw, chosen


def server_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--policy", default="v2", help="v1, v2 or v3 (a build without it: its default)")
    parser.add_argument("--local-tier", default="bloom", help="bloom or exact (a build without the option: its own)")
    parser.add_argument("--examples", type=Path, default=Path(__file__).resolve().parents[2] / "examples")
    args = parser.parse_args()
    urls = stream(args.examples)
    kw, policy = options(args.policy, args.local_tier)
    client = redis.Redis.from_url(args.redis_url)
    client_us: List[float] = []
    server_us: List[float] = []
    for _ in range(args.rounds):
        client.flushall()
        store = RedisKeyStore(client=client, ttl_seconds=30 * 86_400, namespace="bench", policy_digest=policy.digest)
        dedup = Deduplicator("set", store=store, capacity=1_000_000, error_rate=0.001, **kw)
        started, server = time.process_time(), server_cpu(client)
        for start in range(0, len(urls), args.batch):
            dedup.claim_many(urls[start : start + args.batch])
        client_us.append((time.process_time() - started) / len(urls) * 1e6)
        server_us.append((server_cpu(client) - server) / len(urls) * 1e6)
        dedup.close()
    print(
        f"{len(urls):,} links, calls of {args.batch:,}: client {statistics.median(client_us):.2f} us a link "
        f"({min(client_us):.2f}-{max(client_us):.2f}), server {statistics.median(server_us):.2f} "
        f"({min(server_us):.2f}-{max(server_us):.2f})"
    )


if __name__ == "__main__":
    main()
