"""What the fingerprint service adds to a claim's CPU: the serve process against the same Deduplicator called directly.

Claims of 1,000 new URLs, one at a time (no overlap, no queueing), in alternating rounds:

    direct  an AsyncDeduplicator in this process with serve's settings: this thread's CPU a claim
    serve   ``crawldedup serve`` on the same Redis, sent raw HTTP/1.1 requests: the serve
            process's CPU a claim (Linux's /proc)
    stub    the service's ASGI application on uvicorn as serve runs it, over a Deduplicator that
            answers at once: the HTTP, the JSON, the checks and the service's own metrics

CPU time, unlike latency, stays readable on a shared machine. Run::

    python bench/scripts/service_overhead.py --rounds 5 --claims 300
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Awaitable, Callable, Dict, List, Optional, Sequence, Tuple

import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from conftest import ServeProcess, started_redis_server  # noqa: E402  (the tests' servers)
from open_loop_http import exchange, new_urls, request  # noqa: E402  (beside this script)
from service_load import BATCH, CPU, options, settings  # noqa: E402

from crawldedup import AsyncDeduplicator  # noqa: E402
from crawldedup.dedup import ClaimBatch  # noqa: E402
from crawldedup.service import server  # noqa: E402


class AnswersAtOnce:
    """A Deduplicator whose claims are all won, at once."""

    async def claim_batch(
        self, urls: Sequence[str], base: Optional[str] = None, lease: Optional[float] = None
    ) -> ClaimBatch:
        return ClaimBatch([True] * len(urls), list(urls), {})


def run_stub() -> None:
    """Serve the service's application over :class:`AnswersAtOnce` on a free port, as serve does."""
    from crawldedup.metrics import DedupMetrics
    from crawldedup.service.app import ServiceApp

    async def main(stop: server.Stop) -> None:
        sock = server.listen("127.0.0.1", 0)
        app = ServiceApp(AnswersAtOnce(), DedupMetrics())
        await server.serve(app, sock, stop, lambda: print(server.address(sock), flush=True))

    server.run(main)


async def http_claims(url: str) -> Callable[[List[str]], Awaitable[None]]:
    """A claim sent as raw HTTP/1.1 on one kept-alive connection."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))

    async def claim(urls: List[str]) -> None:
        await exchange(reader, writer, request(host, "/v1/claim", orjson.dumps({"urls": urls})))

    return claim


async def measure(
    args: argparse.Namespace, serve: ServeProcess, stub_pid: int, stub_url: str, redis_url: str
) -> Dict[str, List[float]]:
    """CPU milliseconds a claim of each path, one figure a round."""
    direct = AsyncDeduplicator.from_env(**settings(args, redis_url))
    await direct.open()
    assert serve.process is not None
    serve_cpu, stub_cpu = CPU(serve.process.pid, redis_url), CPU(stub_pid, redis_url)
    paths: Dict[str, Tuple[Callable[[List[str]], Awaitable[object]], Callable[[], float]]] = {
        "direct": (direct.claim_many, time.thread_time),
        "serve": (await http_claims(serve.url), lambda: serve_cpu.read()[1]),
        "stub": (await http_claims(stub_url), lambda: stub_cpu.read()[1]),
    }
    run = uuid.uuid4().hex[:12]
    batches = iter(range(10**9))
    results: Dict[str, List[float]] = {name: [] for name in paths}
    try:
        for claim, _ in paths.values():  # the first claim of each loads what it needs
            await claim(new_urls(run, next(batches), BATCH))
        for _ in range(args.rounds):
            for name, (claim, clock) in paths.items():
                urls = [new_urls(run, next(batches), BATCH) for _ in range(args.claims)]
                before = clock()
                for batch in urls:
                    await claim(batch)
                results[name].append((clock() - before) / args.claims * 1e3)
    finally:
        await direct.aclose()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", default="set", help="claim store of both the server and the direct Deduplicator")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--claims", type=int, default=300, help="claims of each path a round")
    parser.add_argument("--stub", action="store_true", help=argparse.SUPPRESS)  # the stub server's own process
    args = parser.parse_args()
    if args.stub:
        run_stub()
        return 0
    redis = started_redis_server()
    stub = subprocess.Popen([sys.executable, __file__, "--stub"], stdout=subprocess.PIPE, text=True)
    loop = server.new_event_loop()  # serve's: uvloop when installed
    load_before = os.getloadavg()
    try:
        assert stub.stdout is not None
        stub_url = stub.stdout.readline().strip()
        with ServeProcess(options(settings(args, redis.url))) as serve:
            results = loop.run_until_complete(measure(args, serve, stub.pid, stub_url, redis.url))
    finally:
        loop.close()
        stub.terminate()
        stub.wait()
        redis.stop()
        shutil.rmtree(redis.workdir, ignore_errors=True)
    load = ", ".join(f"{value:.1f}" for value in (*load_before, *os.getloadavg()))
    print(
        f"\n{args.strategy} store, {BATCH:,}-URL claims one at a time, {args.rounds} rounds of {args.claims}, "
        f"load average (1, 5, 15 min) before and after: {load}\n"
    )
    print("| path | CPU ms a claim, median [min-max] |\n|---|---|")
    for name, figures in results.items():
        print(f"| {name} | {statistics.median(figures):.2f} [{min(figures):.2f}-{max(figures):.2f}] |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
