"""Claims when every URL is new: each store against the plain design, in alternating rounds.

The plain design (the seed's): canonicalize, then ``SET visited:<sha1 hex> 1 NX EX <ttl>`` per
URL, pipelined 1,000 per round trip. Each store: a Deduplicator (no state file) claiming the
same stream in calls of 10,000. Every URL is new, so every claim reaches the store. One local
redis-server (with RedisBloom) serves all; each round uses fresh URLs and namespaces, and the
order of the runs alternates between rounds (the machine is shared). Besides claims/s, each
run reports the client's CPU per claim (this process, all its threads) and the redis-server's
(``INFO cpu`` before and after), so that the client's share and the server's can be told apart
(and compared on a busy machine, where claims/s are noisy)::

    nice python bench/scripts/all_new.py --urls 200000 --rounds 3             # window of 30 days (the default)
    nice python bench/scripts/all_new.py --urls 200000 --rounds 3 --ttl-days 0
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # conftest.py: the RedisServer the tests use

from conftest import started_redis_server  # noqa: E402

from crawldedup import Deduplicator, canonicalize_many  # noqa: E402

BATCH = 10_000
PLAIN_PIPELINE = 1_000
TTL_SECONDS = 30 * 86_400
STORES = ("set", "sharded-set", "redisbloom", "sqlite")


def server_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def plain(urls: List[str], client: redis.Redis) -> int:
    won = 0
    for start in range(0, len(urls), PLAIN_PIPELINE):
        pipe = client.pipeline(transaction=False)
        for url in canonicalize_many(urls[start : start + PLAIN_PIPELINE]).urls:
            if url is not None:
                pipe.set("visited:" + hashlib.sha1(url.encode()).hexdigest(), 1, nx=True, ex=TTL_SECONDS)
        won += sum(1 for ok in pipe.execute() if ok)
    return won


def through(strategy: str, urls: List[str], settings: Dict[str, object]) -> int:
    with Deduplicator(strategy, capacity=len(urls), **settings) as d:  # type: ignore[arg-type]
        return sum(sum(d.claim_many(urls[start : start + BATCH])) for start in range(0, len(urls), BATCH))


def timed(run: Callable[[], int], expected: int, client: redis.Redis) -> Tuple[float, float, float]:
    """Claims/s of ``run``, and the client's and the redis-server's CPU microseconds per claim."""
    cpu = server_cpu(client)
    began, own = time.perf_counter(), time.process_time()
    won = run()
    seconds, own = time.perf_counter() - began, time.process_time() - own
    # The local filter's and RedisBloom's false positives take a few new URLs for seen ones.
    assert won >= 0.99 * expected, f"won {won} of {expected} new URLs"
    return expected / seconds, own / expected * 1e6, (server_cpu(client) - cpu) / expected * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ttl-days", type=float, default=30.0, help="the stores' recrawl window (0: lasting claims)")
    parser.add_argument("--stores", default=",".join(STORES), help="the stores to run beside the plain design")
    args = parser.parse_args()
    server = started_redis_server()
    client = server.client()
    directory = tempfile.mkdtemp(prefix="crawldedup-all-new-")
    results: Dict[str, List[Tuple[float, float, float]]] = {}
    try:
        names = ("plain", *args.stores.split(","))
        for r in range(args.rounds):
            urls = [f"https://round{r}.example/item/{i}?ref=x" for i in range(args.urls)]
            for name in names if r % 2 == 0 else names[::-1]:
                if name == "plain":
                    run: Callable[[], int] = lambda: plain(urls, client)  # noqa: E731
                else:
                    where = (
                        {"sqlite_path": f"{directory}/r{r}.sqlite"} if name == "sqlite" else {"redis_url": server.url}
                    )
                    settings = {"namespace": f"r{r}-{name}", "ttl_days": args.ttl_days, **where}
                    run = lambda name=name, settings=settings: through(name, urls, settings)  # noqa: E731
                results.setdefault(name, []).append(timed(run, len(urls), client))
            client.flushall()
    finally:
        client.close()
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)
        shutil.rmtree(directory, ignore_errors=True)
    base = statistics.median(rate for rate, _, _ in results["plain"])
    print(
        f"{args.urls:,} new URLs, calls of {BATCH:,}, window {args.ttl_days:g} days, {args.rounds} rounds: "
        f"medians [ranges]"
    )
    print("| design | claims/s | x plain | client CPU us/claim | redis-server CPU us/claim |\n|---|---|---|---|---|")
    for name, rows in results.items():
        rates, own, cpus = zip(*rows)
        cpu = f"{statistics.median(cpus):.2f}" if name != "sqlite" else "-"
        print(
            f"| {name} | {statistics.median(rates):,.0f} [{min(rates):,.0f}-{max(rates):,.0f}] "
            f"| {statistics.median(rates) / base:.1f} | {statistics.median(own):.2f} | {cpu} |"
        )


if __name__ == "__main__":
    main()
