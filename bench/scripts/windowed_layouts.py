"""Windowed claims: sharded-set's ticks layout, its generations layout and ``set`` against the
seed design with the same window, then bytes per URL of each layout, filled and after the window.

    nice python bench/scripts/windowed_layouts.py                        # Redis 7 (Debian's), the defaults
    nice python bench/scripts/windowed_layouts.py --server valkey9 --memory-urls 10000000

Speed, in alternating rounds (the machine is shared): the seed design canonicalizes and runs
``SET visited:<sha1 hex> 1 NX EX <30 days>`` per URL, pipelined 1,000 per round trip; each
store is a Deduplicator (no state file, window of 30 days in 4 generations) claiming the same
stream in calls of 10,000. Two streams: every URL new, and 90% repeats (each call: 1,000 new
URLs and 9,000 drawn from those before). Reported: claims/s (medians and ranges), the ratio to
the seed design of the same round, the client's CPU and the server's (``INFO cpu``) per claim.

Memory: ``used_memory`` growth while a store claims N random fingerprints (calls of 10,000;
fingerprints of canonical URLs are uniform, so random ones cost the same), with the calls'
five-minute receipts and once they are deleted (the claims' own bytes); then the clock (a
fake one) moves past the window and ``sweep()`` runs to the end: the bytes left per URL. The
seed design's keys expire on the server's clock, so its row has no "after". Headed by the
server's version and allocator (Debian's Redis: jemalloc; the Valkey wheels: libc malloc).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # conftest.py: the servers the tests use

from conftest import SERVER_KINDS, RedisServer, find_server  # noqa: E402

from crawldedup import DEFAULT_POLICY, Deduplicator, canonicalize_many  # noqa: E402
from crawldedup.stores.factory import open_store  # noqa: E402
from crawldedup.stores.sharded_set import RedisShardedSetStore, ticks_per_window  # noqa: E402
from crawldedup.windows import ManualClock, Window  # noqa: E402

BATCH = 10_000
PIPELINE = 1_000
DAYS = 30
WINDOW = Window(DAYS * 86_400.0, 4)
DIGEST = "0123456789abcdef"
#: Name -> (strategy, window layout of sharded-set).
DESIGNS: Dict[str, Tuple[str, Optional[str]]] = {
    "set": ("set", None),
    "sharded-set, generations": ("sharded-set", "generations"),
    "sharded-set, ticks": ("sharded-set", "ticks"),
}


def server_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def stream(round_: int, urls: int, repeats: bool) -> Tuple[List[List[str]], int]:
    """The calls of one round and how many distinct URLs they hold."""
    rng = random.Random(round_)
    new = (f"https://round{round_}.example/item/{i}?ref=x" for i in range(urls))
    calls: List[List[str]] = []
    seen: List[str] = []
    for _ in range(0, urls, BATCH):
        fresh = BATCH if not repeats or not seen else BATCH // 10
        call = [next(new) for _ in range(fresh)]
        call += [rng.choice(seen) for _ in range(BATCH - fresh)]
        seen.extend(call[:fresh])
        calls.append(call)
    return calls, len(seen)


def seed_design(calls: List[List[str]], client: redis.Redis) -> int:
    won = 0
    for call in calls:
        for start in range(0, len(call), PIPELINE):
            pipe = client.pipeline(transaction=False)
            for url in canonicalize_many(call[start : start + PIPELINE]).urls:
                if url is not None:
                    pipe.set("visited:" + hashlib.sha1(url.encode()).hexdigest(), 1, nx=True, ex=DAYS * 86_400)
            won += sum(1 for ok in pipe.execute() if ok)
    return won


def deduplicator(design: str, calls: List[List[str]], url: str, namespace: str, capacity: int) -> int:
    strategy, layout = DESIGNS[design]
    store = open_store(
        strategy,
        namespace=namespace,
        policy_digest=DEFAULT_POLICY.digest,
        redis_url=url,
        capacity=capacity,
        error_rate=0.01,
        window=WINDOW,
        window_layout=layout,
    )
    with Deduplicator(strategy, namespace=namespace, ttl_days=DAYS, capacity=capacity, store=store) as d:
        return sum(sum(d.claim_many(call)) for call in calls)


def timed(run: Callable[[], int], distinct: int, claims: int, client: redis.Redis) -> Tuple[float, float, float]:
    """Claims/s of ``run``, and the client's and the server's CPU microseconds per claim."""
    cpu = server_cpu(client)
    began, own = time.perf_counter(), time.process_time()
    won = run()
    seconds, own = time.perf_counter() - began, time.process_time() - own
    assert won >= 0.99 * distinct, f"won {won} of {distinct} distinct URLs"  # the local filter's FPs
    return claims / seconds, own / claims * 1e6, (server_cpu(client) - cpu) / claims * 1e6


def speed(url: str, client: redis.Redis, urls: int, rounds: int) -> None:
    for repeats in (False, True):
        results: Dict[str, List[Tuple[float, float, float]]] = {}
        ratios: Dict[str, List[float]] = {}
        names = ("seed design", *DESIGNS)
        for r in range(rounds):
            calls, distinct = stream(r, urls, repeats)
            rates: Dict[str, float] = {}
            for name in names if r % 2 == 0 else names[::-1]:
                if name == "seed design":
                    run: Callable[[], int] = partial(seed_design, calls, client)
                else:
                    namespace = f"r{r}-{name}".replace(", ", "-")
                    run = partial(deduplicator, name, calls, url, namespace, distinct)
                results.setdefault(name, []).append(timed(run, distinct, urls, client))
                rates[name] = results[name][-1][0]
                client.flushall()
            for name in DESIGNS:
                ratios.setdefault(name, []).append(rates[name] / rates["seed design"])
        kind = "90% repeats" if repeats else "all new"
        print(f"\n{urls:,} URLs ({kind}), calls of {BATCH:,}, window {DAYS} days in 4 generations, {rounds} rounds")
        print(
            "| design | claims/s, median [range] | x seed design, median [range] "
            "| client CPU us/claim | server CPU us/claim |"
        )
        print("|---|---|---|---|---|")
        for name, rows in results.items():
            rates_, own, cpus = zip(*rows)
            paired = ratios.get(name, [1.0])
            print(
                f"| {name} | {statistics.median(rates_):,.0f} [{min(rates_):,.0f}-{max(rates_):,.0f}] "
                f"| {statistics.median(paired):.1f} [{min(paired):.1f}-{max(paired):.1f}] "
                f"| {statistics.median(own):.2f} | {statistics.median(cpus):.2f} |",
                flush=True,
            )


def fingerprints(n: int) -> Iterator[List[bytes]]:
    rng = random.Random(1)
    for start in range(0, n, BATCH):
        blob = rng.randbytes(16 * min(BATCH, n - start))
        yield [blob[i : i + 16] for i in range(0, len(blob), 16)]


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def memory(url: str, client: redis.Redis, n: int) -> None:
    rows = []
    client.execute_command("FLUSHALL", "SYNC")
    before = used(client)
    for batch in fingerprints(n):
        pipe = client.pipeline(transaction=False)
        for fp in batch:
            pipe.set("visited:" + hashlib.sha1(fp).hexdigest(), 1, nx=True, ex=DAYS * 86_400)
        pipe.execute()
    seed = (used(client) - before) / n
    rows.append(("seed design, `SET visited:<sha1 hex> 1 NX EX`", seed, seed, None, None))
    for design, (strategy, layout) in DESIGNS.items():
        client.execute_command("FLUSHALL", "SYNC")
        time.sleep(0.5)
        before = used(client)
        clock = ManualClock(time.time())  # near the server's clock: hashes and sets expire by it too
        store = open_store(
            strategy,
            namespace="mem",
            policy_digest=DIGEST,
            redis_url=url,
            capacity=n,
            error_rate=0.01,
            window=WINDOW,
            clock=clock,
            window_layout=layout,
        )
        with store:
            began = time.perf_counter()
            for batch in fingerprints(n):
                store.claim_many(batch)
            rate = n / (time.perf_counter() - began)
            with_receipts = (used(client) - before) / n
            receipts = list(client.scan_iter(match=b"*:receipt:*", count=10_000))
            for start in range(0, len(receipts), 10_000):
                client.delete(*receipts[start : start + 10_000])
            filled = (used(client) - before) / n
            after: Optional[float] = None
            if isinstance(store, RedisShardedSetStore) and store.window_layout == "ticks":
                clock.advance(WINDOW.seconds + WINDOW.seconds / ticks_per_window(WINDOW) + 1)
                while store.sweep(strings_per_group=10_000):
                    pass
                after = (used(client) - before) / n
        rows.append((design, with_receipts, filled, after, rate))
        print(f"  {design}: {filled:.2f} B/URL, after the window {after}", file=sys.stderr, flush=True)
    info = {**client.info("server"), **client.info("memory")}
    version = f"Valkey {info['valkey_version']}" if "valkey_version" in info else f"Redis {info['redis_version']}"
    print(f"\n{version}, mem_allocator={info.get('mem_allocator')}, {n:,} URLs claimed, window {DAYS} days")
    print("| layout | bytes per URL, filled | with the calls' receipts | after the window, swept | claims/s filling |")
    print("|---|---|---|---|---|")
    for name, with_receipts, filled, after, rate in rows:
        print(
            f"| {name} | {filled:.2f} | {with_receipts:.2f} | {'-' if after is None else f'{after:.2f}'} "
            f"| {'-' if rate is None else f'{rate:,.0f}'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=200_000, help="URLs per round of the speed runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory-urls", type=int, default=10_000_000, help="0: no memory run")
    parser.add_argument("--server", choices=SERVER_KINDS, default=SERVER_KINDS[0])
    parser.add_argument("--only", choices=("speed", "memory"), help="run one half")
    args = parser.parse_args()
    binary = find_server(args.server)
    if binary is None:
        parser.error(f"no server binary for {args.server} (the test extra installs them)")
    server = RedisServer(binary, None)
    server.start()
    client = redis.Redis.from_url(server.url, socket_timeout=600)
    try:
        if args.only != "memory":
            speed(server.url, client, args.urls, args.rounds)
        if args.only != "speed" and args.memory_urls:
            memory(server.url, client, args.memory_urls)
    finally:
        client.close()
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
