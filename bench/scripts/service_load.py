"""The fingerprint service under load, against the same Deduplicator called directly, in one run.

Starts a real Redis (what the tests use) and a real ``crawldedup serve`` on it, then measures,
alternating service and direct runs (the machine is shared and noisy):

    closed loop   1, 8 and 32 concurrent clients sending 1,000-URL claim batches back to back
                  (every URL new, so every claim reaches Redis): claims/s, p50 and p99 of a batch;
                  direct = the same number of tasks on one AsyncDeduplicator of the same settings
    open loop     8 clients, each sending batches at a fixed rate, together a third of the direct
                  claims/s at 8 clients; latency timed from each batch's scheduled send (as wrk2
                  and oha's rate mode time it), so a server that falls behind shows it. The
                  batches are made before the clock starts. Three runs at that rate: the direct
                  Deduplicator, the service through AsyncServiceClient (what a Python crawler
                  sees: httpx and the JSON on its side included), and the service from
                  open_loop_http.py, a wrk2-like generator in a process of its own sending
                  prepared bodies (the server's figure, not the Python client's)
    wrk           when installed (``apt-get install wrk``): the closed loop at 8 connections from
                  a C load tool, each request 1,000 new URLs made by a Lua script, so that the
                  figure is not the Python client's

The direct Deduplicator is configured as the server is (the environment, then the same
options: strategy, Redis, namespace, capacity), and this process runs on the server's event
loop (uvloop when installed). The load average before and after the run is printed with the
table: compare runs only at similar loads.

Run::

    python bench/scripts/service_load.py                       # ~2.5 minutes: 3 rounds of 4 s each
    python bench/scripts/service_load.py --rounds 5 --seconds 8 --strategy sharded-set
    python bench/scripts/service_load.py --stacks uvicorn --clients 8,32   # the front against uvicorn

Prints one markdown table: medians of the rounds, and [min-max]; its last column splits the CPU
time of a batch (medians) between the clients (this process, with the direct Deduplicator, and
the load tools it ran), the serve process and redis-server, which a busy machine distorts less
than latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Awaitable, Callable, Dict, List, Sequence, Tuple

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from all_new import server_cpu  # noqa: E402  (beside this script)
from conftest import ServeProcess, started_redis_server  # noqa: E402  (the tests' servers)
from open_loop_http import new_urls  # noqa: E402

from crawldedup import AsyncDeduplicator, AsyncServiceClient  # noqa: E402
from crawldedup.service.server import new_event_loop  # noqa: E402

BATCH = 1_000
#: ``--stacks``: the command that serves the same application on another HTTP stack.
STACKS = {"uvicorn": (str(Path(__file__).with_name("serve_uvicorn.py")),)}
#: Local filter capacity: every URL is new, and a run of all rounds claims some 30 million.
CAPACITY = 50_000_000
_run_ids = itertools.count()
#: One run's figures: claims/s, p50 and p99 seconds, batches, and CPU seconds of the clients
#: (this process and the load tools it ran), of the serve process and of redis-server.
Row = Tuple[float, float, float, int, Tuple[float, float, float]]
#: A run's figures: claims/s, p50 and p99 seconds, batches, and the CPU seconds of its load tool
#: (another process; 0 for this process's own clients).
Run = Tuple[float, float, float, int, float]

WRK_LUA = """
counter = 0
request = function()
  counter = counter + 1
  local parts = {}
  for i = 1, %(batch)d do
    parts[i] = '"https://wrk.example/%(run)s/' .. counter .. '/' .. i .. '"'
  end
  return wrk.format("POST", "/v1/claim", {["Content-Type"] = "application/json"},
                    '{"urls":[' .. table.concat(parts, ",") .. ']}')
end
"""


def fresh_batches() -> Callable[[], List[str]]:
    """Batches of URLs nobody claimed yet: every call one more."""
    run = uuid.uuid4().hex[:12]
    counter = itertools.count()
    return lambda: new_urls(run, next(counter), BATCH)


async def closed_loop(
    claim: Callable[[List[str]], Awaitable[object]], clients: int, seconds: float
) -> Tuple[float, List[float]]:
    """``clients`` tasks claiming batches back to back for ``seconds``: claims/s and each batch's seconds."""
    make = fresh_batches()
    latencies: List[float] = []
    stop = time.perf_counter() + seconds

    async def client() -> None:
        while time.perf_counter() < stop:
            urls = make()
            sent = time.perf_counter()
            await claim(urls)
            latencies.append(time.perf_counter() - sent)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return len(latencies) * BATCH / (time.perf_counter() - started), latencies


async def open_loop(
    claim: Callable[[List[str]], Awaitable[object]], clients: int, claims_per_second: float, seconds: float
) -> Tuple[float, List[float]]:
    """``clients`` tasks, each sending at its share of ``claims_per_second``; latency from the scheduled send."""
    make = fresh_batches()
    interval = clients * BATCH / claims_per_second
    per_client = int(seconds / interval) + 1
    batches = [make() for _ in range(clients * per_client)]  # made before the clock starts
    latencies: List[float] = []
    begin = time.perf_counter()

    async def client(i: int) -> None:
        for k in itertools.count():
            scheduled = begin + i * interval / clients + k * interval
            if scheduled > begin + seconds:
                return
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await claim(batches[i * per_client + k])
            latencies.append(time.perf_counter() - scheduled)

    await asyncio.gather(*(client(i) for i in range(clients)))
    return len(latencies) * BATCH / (time.perf_counter() - begin), latencies


async def open_loop_http(url: str, clients: int, claims_per_second: float, seconds: float) -> Run:
    """:func:`open_loop` from open_loop_http.py, a process of its own, against the service's ``/v1/claim``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("open_loop_http.py")),
        f"{url}/v1/claim",
        "--connections",
        str(clients),
        "--rate",
        str(claims_per_second / BATCH),
        "--seconds",
        str(seconds),
        "--batch",
        str(BATCH),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode:
        raise RuntimeError(f"open_loop_http.py exited {process.returncode}")
    run = json.loads(out)
    return summary(len(run["latencies"]) * BATCH / run["seconds"], run["latencies"], run["cpu_seconds"])


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run_wrk(url: str, connections: int, seconds: float, workdir: Path) -> Run:
    """wrk's closed loop of 1,000-URL claims (nothing else runs meanwhile)."""
    script = workdir / f"claim-{next(_run_ids)}.lua"
    script.write_text(WRK_LUA % {"batch": BATCH, "run": script.stem})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)) * BATCH  # type: ignore[union-attr]

    def latency(label: str) -> float:
        value, unit = re.search(rf"{label}%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
        return float(value) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]

    tool = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return rate, latency("50"), latency("99"), round(rate * seconds / BATCH), tool


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def cell(values: Sequence[float], scale: float = 1.0, digits: int = 0) -> str:
    scaled = [v * scale for v in values]
    return f"{statistics.median(scaled):,.{digits}f} [{min(scaled):,.{digits}f}-{max(scaled):,.{digits}f}]"


class CPU:
    """CPU seconds so far of this process (the clients, or the direct Deduplicator), of the serve
    process (Linux's /proc; 0 elsewhere) and of redis-server (``INFO cpu``)."""

    def __init__(self, serve_pid: int, redis_url: str) -> None:
        self.stat = Path(f"/proc/{serve_pid}/stat")
        self.redis = redis.Redis.from_url(redis_url)

    def read(self) -> Tuple[float, float, float]:
        serve = 0.0
        if self.stat.exists():
            fields = self.stat.read_text().rsplit(")", 1)[1].split()
            serve = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
        return time.process_time(), serve, server_cpu(self.redis)


def summary(rate: float, latencies: Sequence[float], tool_seconds: float = 0.0) -> Run:
    return rate, percentile(latencies, 0.5), percentile(latencies, 0.99), len(latencies), tool_seconds


async def timed(cpu: CPU, run: Callable[[], Awaitable[Run]]) -> Row:
    """One run's :data:`Row`: its load tool's CPU counts as the clients'."""
    before = cpu.read()
    rate, p50, p99, batches, tool = await run()
    clients, serve, redis_server = (now - then for now, then in zip(cpu.read(), before))
    return rate, p50, p99, batches, (clients + tool, serve, redis_server)


def in_process(latencies: Callable[[], Awaitable[Tuple[float, List[float]]]]) -> Callable[[], Awaitable[Run]]:
    """A run of this process's clients (no load tool)."""

    async def run() -> Run:
        return summary(*await latencies())

    return run


async def measure(
    args: argparse.Namespace, server: ServeProcess, redis_url: str, workdir: Path, others: Dict[str, ServeProcess]
) -> Dict[str, List[Row]]:
    """Every configuration, alternating, ``args.rounds`` times: name -> its rows.

    :param others: servers of the same application on other HTTP stacks (``--stacks``), in the closed loop.
    """
    results: Dict[str, List[Row]] = {}
    # The server's settings: the environment, then the options it was started with.
    direct = AsyncDeduplicator.from_env(**settings(args, redis_url))
    await direct.open()
    client = AsyncServiceClient(server.url)
    assert server.process is not None
    cpu = CPU(server.process.pid, redis_url)
    stacks = [("service", client, cpu)]
    for stack, other in others.items():
        assert other.process is not None
        stacks.append((f"service on {stack}", AsyncServiceClient(other.url), CPU(other.process.pid, redis_url)))
    try:
        # The first claim of a Deduplicator takes up to a second (its store's scripts, the filter's
        # first pages): made before any round, by both.
        await direct.claim_many(fresh_batches()())
        for _, stack_client, _ in stacks:
            await stack_client.claim_many(fresh_batches()())
        for round_ in range(args.rounds):
            for clients in args.clients:
                runs = [("direct", direct.claim_many, cpu)] + [(name, c.claim_many, u) for name, c, u in stacks]
                turn = round_ % len(runs)  # each goes first in turn
                for name, claim, used in runs[turn:] + runs[:turn]:
                    results.setdefault(f"{name}, {plural(clients, 'client')}", []).append(
                        await timed(used, in_process(lambda: closed_loop(claim, clients, args.seconds)))
                    )
            rated = 8 if 8 in args.clients else args.clients[0]
            direct_rate = statistics.median(row[0] for row in results[f"direct, {plural(rated, 'client')}"])
            open_rate = direct_rate / 3
            runs: List[Tuple[str, Callable[[], Awaitable[Run]]]] = [
                ("direct", in_process(lambda: open_loop(direct.claim_many, 8, open_rate, args.seconds))),
                (
                    "service (AsyncServiceClient)",
                    in_process(lambda: open_loop(client.claim_many, 8, open_rate, args.seconds)),
                ),
                ("service (open_loop_http.py)", lambda: open_loop_http(server.url, 8, open_rate, args.seconds)),
            ]
            turn = round_ % len(runs)  # each run goes first in turn
            for name, run in runs[turn:] + runs[:turn]:
                results.setdefault(f"{name}, open loop, 8 clients at 1/3 of direct's claims/s", []).append(
                    await timed(cpu, run)
                )
            if shutil.which("wrk"):
                results.setdefault("service, `wrk -t1 -c8`, a Lua body of 1,000 new URLs", []).append(
                    await timed(cpu, lambda: run_wrk(server.url, 8, args.seconds, workdir))
                )
    finally:
        for _, stack_client, _ in stacks:
            await stack_client.aclose()
        await direct.aclose()
    return results


def settings(args: argparse.Namespace, redis_url: str) -> Dict[str, object]:
    """The Deduplicator settings given to both the server (as options) and the direct one."""
    return {"strategy": args.strategy, "redis_url": redis_url, "namespace": "load", "capacity": CAPACITY}


def options(given: Dict[str, object]) -> List[str]:
    """:func:`settings` as ``crawldedup serve`` options."""
    return [part for name, value in given.items() for part in (f"--{name.replace('_', '-')}", str(value))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", default="set", help="claim store of both the server and the direct Deduplicator")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each measurement")
    parser.add_argument("--clients", default="1,8,32", help="concurrent clients of the closed loop")
    parser.add_argument(
        "--stacks",
        default="",
        help="also the closed loop against the application on these HTTP stacks, in the same run "
        "(uvicorn: bench/scripts/serve_uvicorn.py, the server before the service's own front)",
    )
    args = parser.parse_args()
    args.clients = [int(n) for n in args.clients.split(",")]
    redis = started_redis_server()
    workdir = Path(tempfile.mkdtemp(prefix="crawldedup-service-load-"))
    load_before = os.getloadavg()
    loop = new_event_loop()  # the server's: uvloop when installed
    others = {
        stack: ServeProcess(options(settings(args, redis.url)), command=STACKS[stack])
        for stack in filter(None, args.stacks.split(","))
    }
    try:
        with ServeProcess(options(settings(args, redis.url))) as server:
            for other in others.values():
                other.start()
            results = loop.run_until_complete(measure(args, server, redis.url, workdir, others))
    finally:
        for other in others.values():
            other.stop()
        loop.close()
        redis.stop()
        shutil.rmtree(redis.workdir, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
    load = ", ".join(f"{value:.1f}" for value in (*load_before, *os.getloadavg()))
    print(
        f"\n{args.strategy} store, {BATCH:,}-URL batches, {args.rounds} rounds of {args.seconds:g} s, "
        f"{os.cpu_count()} cores, load average (1, 5, 15 min) before and after: {load}; median [min-max]\n"
    )
    print(
        "| run | claims/s | p50 ms | p99 ms | CPU ms a batch: clients + serve + redis-server |\n|---|---|---|---|---|"
    )
    for name, rows in results.items():
        rates, p50s, p99s, batches, used = zip(*rows)
        shares = " + ".join(
            f"{statistics.median(u[part] / n for u, n in zip(used, batches)) * 1e3:.2f}" for part in range(3)
        )
        print(f"| {name} | {cell(rates)} | {cell(p50s, 1e3, 1)} | {cell(p99s, 1e3, 1)} | {shares} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
