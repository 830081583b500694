"""The service's application on uvicorn (httptools, uvloop), as ``crawldedup serve`` ran it before its own front.

For ``service_load.py --stacks``: the same AsyncDeduplicator settings and ServiceApp as serve,
only the HTTP server differs. Prints ``... listening on http://HOST:PORT`` on stderr, as serve
does. Run::

    python bench/scripts/serve_uvicorn.py --strategy set --redis-url redis://127.0.0.1:6379/0 --namespace load
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import uvicorn

from crawldedup import AsyncDeduplicator
from crawldedup.metrics import DedupMetrics
from crawldedup.service import server
from crawldedup.service.app import ServiceApp


async def main(args: argparse.Namespace) -> None:
    dedup = await AsyncDeduplicator.from_env(
        strategy=args.strategy, redis_url=args.redis_url, namespace=args.namespace, capacity=args.capacity
    ).open()
    metrics = DedupMetrics()
    metrics.attach(dedup)
    sock = server.listen("127.0.0.1", 0)
    config = uvicorn.Config(
        ServiceApp(dedup, metrics),
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
        date_header=False,
        http="httptools",
    )
    uvicorn_server = uvicorn.Server(config)
    serving = asyncio.ensure_future(uvicorn_server.serve(sockets=[sock]))
    while not uvicorn_server.started:
        await asyncio.sleep(0.01)
    print(f"serve_uvicorn: listening on {server.address(sock)}", file=sys.stderr, flush=True)
    await serving
    await dedup.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for option in ("--strategy", "--redis-url", "--namespace"):
        parser.add_argument(option)
    parser.add_argument("--capacity", type=int)
    loop = server.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(main(parser.parse_args()))
