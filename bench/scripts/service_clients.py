"""1,000 concurrent keep-alive clients of one ``crawldedup serve`` on a healthy Redis: latency and statuses.

Each client opens one connection and sends ``--requests`` claims of ``--urls`` new URLs back to
back on it (raw HTTP/1.1, so that the figure is the server's, not a Python client's). More
clients than the store's connections (100): requests wait their turn for one (up to
``--store-wait``), none is told the store failed. Prints the statuses counted and the p50 and
p99 of a request, timed from its send to its answer. Run::

    python bench/scripts/service_clients.py                     # 1,000 clients, 5 requests each
    python bench/scripts/service_clients.py --clients 500 --requests 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from conftest import ServeProcess, started_redis_server  # noqa: E402  (the tests' servers)
from service_load import percentile  # noqa: E402  (beside this script)

from crawldedup.service.server import new_event_loop  # noqa: E402


async def client(i: int, host: str, port: int, args: argparse.Namespace) -> List[Tuple[int, float]]:
    reader, writer = await asyncio.open_connection(host, port)
    answers = []
    for k in range(args.requests):
        body = json.dumps({"urls": [f"https://c{i}.example/{k}/{u}" for u in range(args.urls)]}).encode()
        sent = time.perf_counter()
        writer.write(b"POST /v1/claim HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        answers.append((int(head.split()[1]), time.perf_counter() - sent))
    writer.close()
    return answers


async def run(url: str, args: argparse.Namespace) -> List[Tuple[int, float]]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    runs = await asyncio.gather(*(client(i, host, int(port), args) for i in range(args.clients)))
    return [answer for answers in runs for answer in answers]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--requests", type=int, default=5, help="claims each client sends on its connection")
    parser.add_argument("--urls", type=int, default=10, help="new URLs a claim")
    parser.add_argument("--store-wait", default="60", help="the server's --store-wait")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.clients)), hard))
    load = os.getloadavg()[0]
    redis = started_redis_server()
    loop = new_event_loop()
    try:
        options = ["--strategy", "set", "--redis-url", redis.url, "--namespace", "clients"]
        with ServeProcess([*options, "--store-wait", args.store_wait]) as server:
            started = time.perf_counter()
            answers = loop.run_until_complete(run(server.url, args))
            seconds = time.perf_counter() - started
    finally:
        loop.close()
        redis.stop()
        shutil.rmtree(redis.workdir, ignore_errors=True)
    statuses = Counter(status for status, _ in answers)
    latencies = [latency for _, latency in answers]
    print(
        f"{args.clients:,} keep-alive clients x {args.requests} claims of {args.urls} new URLs, "
        f"{os.cpu_count()} cores, load average before/after {load:.1f}/{os.getloadavg()[0]:.1f}: "
        f"{len(answers):,} requests in {seconds:.1f} s; statuses {dict(statuses)}; "
        f"p50 {percentile(latencies, 0.5) * 1e3:.0f} ms, p99 {percentile(latencies, 0.99) * 1e3:.0f} ms, "
        f"mean {statistics.mean(latencies) * 1e3:.0f} ms"
    )
    return 0 if all(status < 500 for status in statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
