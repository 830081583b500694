"""An open-loop HTTP/1.1 load generator, as wrk2 and oha's rate mode are (neither is packaged here).

Each of ``--connections`` kept-alive connections sends its share of ``--rate`` requests a
second at fixed times, and each request's latency is timed from its scheduled send: a server
that falls behind delays the next sends of that connection, and the delay counts. The bodies
are made before the clock starts (``--batch`` new URLs each, in ``{"urls": [...]}``), and a
response is read no further than its status line, its ``Content-Length`` and its body, so that
the generator's own CPU per request stays a small share of the server's. It runs in its own
process (service_load.py starts it), never beside something else that could starve it.

Run::

    python bench/scripts/open_loop_http.py http://127.0.0.1:8707/v1/claim --rate 40 --seconds 4

Prints one JSON object: ``{"latencies": [seconds, ...], "seconds": <wall time of the run>,
"cpu_seconds": <this process's CPU time during the run>}``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
import uuid
from typing import List, Tuple
from urllib.parse import urlsplit

import orjson


def new_urls(run: str, n: int, batch: int) -> List[str]:
    """Batch ``n`` of run ``run``: ``batch`` URLs no other batch holds."""
    return [f"https://load.example/{run}/b{n}/p{i}?a=1" for i in range(batch)]


def bodies(count: int, batch: int) -> List[bytes]:
    """``count`` JSON bodies of ``batch`` URLs nobody claimed yet."""
    run = uuid.uuid4().hex[:12]
    return [orjson.dumps({"urls": new_urls(run, n, batch)}) for n in range(count)]


def request(host: str, path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes) -> None:
    """Send one request and read its whole response; anything but a 200 ends the run."""
    writer.write(data)
    head = await reader.readuntil(b"\r\n\r\n")
    status = head[9:12]
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        None,
    )
    if length is None:
        raise RuntimeError(f"a response without Content-Length: {head[:200]!r}")
    body = await reader.readexactly(length)
    if status != b"200":
        raise RuntimeError(f"HTTP {status.decode('ascii', 'replace')}: {body[:200]!r}")


async def run(url: str, connections: int, rate: float, seconds: float, batch: int) -> Tuple[List[float], float, float]:
    """Latencies from the scheduled sends, the run's wall seconds and this process's CPU seconds meanwhile."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    interval = connections / rate
    per_connection = int(seconds / interval) + 1
    prepared = [request(parts.netloc, parts.path, body) for body in bodies(connections * per_connection, batch)]
    streams = [await asyncio.open_connection(host, port) for _ in range(connections)]
    latencies: List[float] = []
    cpu = time.process_time()
    begin = time.perf_counter()

    async def connection(k: int) -> None:
        reader, writer = streams[k]
        offset = k * interval / connections
        for j in itertools.count():
            scheduled = begin + offset + j * interval
            if scheduled > begin + seconds:
                return
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await exchange(reader, writer, prepared[k * per_connection + j])
            latencies.append(time.perf_counter() - scheduled)

    try:
        await asyncio.gather(*(connection(k) for k in range(connections)))
    finally:
        for _, writer in streams:
            writer.close()
    return latencies, time.perf_counter() - begin, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="where to POST, e.g. http://127.0.0.1:8707/v1/claim")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rate", type=float, required=True, help="requests a second, all connections together")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--batch", type=int, default=1_000, help="URLs in each request")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:  # pragma: no cover  (Windows, PyPy)
        latencies, seconds, cpu = asyncio.run(run(args.url, args.connections, args.rate, args.seconds, args.batch))
    else:
        latencies, seconds, cpu = uvloop.run(run(args.url, args.connections, args.rate, args.seconds, args.batch))
    json.dump({"latencies": latencies, "seconds": seconds, "cpu_seconds": cpu}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
