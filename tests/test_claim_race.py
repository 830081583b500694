"""Races: many processes, threads and asyncio tasks claiming the same pages at once get one winner per page."""

from __future__ import annotations

import json
import runpy
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Sequence

import pytest
from conftest import ServeProcess, race_processes

from crawldedup import canonicalize
from crawldedup.canonical import HAS_EXTENSION
from crawldedup.dedup import Deduplicator

# Each test that uses a server runs against Redis 7, Valkey 8 and Valkey 9 (conftest.py). The
# races keep the cores busy with 8 processes each: under pytest-xdist (scripts/test) no other
# worker runs such a test meanwhile (conftest.cores_of_its_own), so each meets TIMEOUT_SECONDS.
pytestmark = [pytest.mark.server_matrix, pytest.mark.usefixtures("cores_of_its_own")]
WORKER = Path(__file__).parent / "workers" / "claim_race_worker.py"
ASYNC_WORKER = Path(__file__).parent / "workers" / "async_race_worker.py"
PROCESSES = 8
PAGES = 100_000
#: Pages of a race on Valkey: its scripts' atomicity shows in any race of thousands of batches
#: (25,000 pages: 200 batches of 1,000 from 8 workers), and four Valkey races at 100,000 pages
#: would add a minute to the suite.
VALKEY_PAGES = 25_000
TIMEOUT_SECONDS = 120
#: The asyncio race: 2 processes of 64 tasks on 20,000 pages, each page raced for by 16 tasks.
ASYNC_PROCESSES, ASYNC_TASKS, ASYNC_PAGES = 2, 64, 20_000


def pages_on(server_kind: str) -> int:
    return PAGES if server_kind == "redis7" else VALKEY_PAGES


def run_race(
    options: dict,
    tmp_path: Path,
    pages: int = PAGES,
    worker: Path = WORKER,
    tasks: Sequence[int] = (),
    processes: int = PROCESSES,
) -> Counter:
    """Start the workers, let them all go at once, and count winners per canonical URL.

    :param tasks: the worker's numeric arguments after the pages (the asyncio worker's tasks).
    """
    start = tmp_path / "start"
    outs = [tmp_path / f"won-{w}.txt" for w in range(processes)]
    commands = [
        [sys.executable, str(worker), str(w), str(pages), *map(str, tasks), str(start), str(out), json.dumps(options)]
        for w, out in enumerate(outs)
    ]
    codes = race_processes(commands, outs, start, TIMEOUT_SECONDS)
    assert codes == [0] * processes
    return Counter(url for out in outs for url in out.read_text("ascii").split("\n") if url)


@pytest.mark.slow
def test_eight_processes_one_winner_per_page(store_strategy, store_location, server_kind, tmp_path, record_property):
    pages = pages_on(server_kind)
    # RedisBloom sized at the race's 100,000 pages and 1%, so that its false positives show.
    sizing = {"capacity": pages, "error_rate": 0.01}
    if store_strategy != "bloom":
        sizing = {"capacity": 1_000_000, "error_rate": 0.001}
    options = {
        "strategy": store_strategy,
        "namespace": "race",
        **sizing,
        **{key: str(value) for key, value in store_location.items()},
    }
    winners = run_race(options, tmp_path, pages)
    expected = {f"https://site.example/p/{i}?a=1&b=2" for i in range(pages)}
    assert set(winners) <= expected
    assert max(winners.values()) == 1, "a page was won twice"
    without_winner = len(expected - set(winners))
    record_property("pages_without_winner", without_winner)
    print(f"{store_strategy}: {without_winner} of {pages} pages won by nobody")
    if store_strategy == "bloom":  # a page RedisBloom (or every local filter) took for seen: nobody won it
        assert without_winner <= pages * 0.01
    else:
        assert without_winner == 0


@pytest.mark.slow
@pytest.mark.parametrize("lease", [None, 60], ids=["claims", "leases"])
@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
def test_eight_processes_one_winner_per_page_on_a_cluster(strategy, lease, redis_cluster_url, server_kind, tmp_path):
    if server_kind != "redis7" and lease is None:
        # On Valkey the cluster races with leases only: their scripts run every step a plain
        # claim runs, and more (the suite's time budget keeps one cluster race per store).
        pytest.skip("on Valkey, the cluster race runs with leases")
    options = {
        "strategy": strategy,
        "namespace": "race",
        "capacity": 1_000_000,
        "error_rate": 0.001,
        "redis_url": redis_cluster_url,
        "lease": lease,
    }
    pages = pages_on(server_kind)
    winners = run_race(options, tmp_path, pages)
    assert set(winners) == {f"https://site.example/p/{i}?a=1&b=2" for i in range(pages)}
    assert max(winners.values()) == 1, "a page was won twice"


# The answer cannot depend on the twin (the store decides, the race is the servers'), and the
# pure-Python twin would canonicalize 320,000 URLs per race: the compiled run covers it.
needs_compiled = pytest.mark.skipif(not HAS_EXTENSION, reason="the same race runs with the compiled twin")


@needs_compiled
@pytest.mark.slow
@pytest.mark.parametrize(
    "where",
    [
        pytest.param(("set", "redis_url"), id="set", marks=pytest.mark.redis),
        pytest.param(("sharded-set", "redis_url"), id="sharded-set", marks=pytest.mark.redis),
        pytest.param(("sqlite", None), id="sqlite"),
        pytest.param(("postgres", "postgres_url"), id="postgres", marks=pytest.mark.postgres),
        pytest.param(("set", "redis_cluster_url"), id="set-cluster", marks=pytest.mark.redis),
        pytest.param(("sharded-set", "redis_cluster_url"), id="sharded-set-cluster", marks=pytest.mark.redis),
    ],
)
def test_async_tasks_of_two_processes_one_winner_per_page(where, request, tmp_path):
    strategy, fixture = where
    location = (
        {"sqlite_path": str(tmp_path / "claims.sqlite")}
        if fixture is None
        else {fixture.replace("_cluster", ""): request.getfixturevalue(fixture)}
    )
    options = {"strategy": strategy, "namespace": "async-race", "capacity": 1_000_000, "error_rate": 0.001, **location}
    winners = run_race(options, tmp_path, ASYNC_PAGES, ASYNC_WORKER, (ASYNC_TASKS,), ASYNC_PROCESSES)
    assert set(winners) == {f"https://site.example/p/{i}?a=1&b=2" for i in range(ASYNC_PAGES)}
    assert max(winners.values()) == 1, "a page was won twice"


#: The service race: 8 client processes, half on each of 2 ``crawldedup serve`` processes.
SERVICE_PAGES = 20_000


@needs_compiled
@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["redis_url", "redis_cluster_url"], ids=["redis", "cluster"])
def test_eight_clients_of_two_services_one_winner_per_page(fixture, request, tmp_path):
    # The server is asked for by name, so the servers' matrix (Redis 7, Valkey 8 and 9) leaves
    # this race alone: it runs on Redis 7 and the cluster, once each.
    args = [
        "--strategy",
        "set",
        "--redis-url",
        request.getfixturevalue(fixture),
        "--namespace",
        "race",
        "--capacity",
        "1000000",
    ]
    lease = 60 if fixture == "redis_cluster_url" else None  # through the cluster, leases and done too
    with ServeProcess(args) as first, ServeProcess(args) as second:
        winners = run_race({"service_urls": [first.url, second.url], "lease": lease}, tmp_path, SERVICE_PAGES)
    assert set(winners) == {f"https://site.example/p/{i}?a=1&b=2" for i in range(SERVICE_PAGES)}
    assert max(winners.values()) == 1, "a page was won twice"
    assert "Traceback" not in first.stderr + second.stderr


@pytest.mark.parametrize("worker", [WORKER, ASYNC_WORKER], ids=["threads", "async"])
def test_worker_spellings_are_one_page(worker):
    spellings = runpy.run_path(str(worker), run_name="spellings")["SPELLINGS"]
    assert {canonicalize(s.format(i=7, w=3)) for s in spellings} == {"https://site.example/p/7?a=1&b=2"}


def test_twenty_threads_one_url_one_winner(store_strategy, store_location):
    spellings = [
        "https://shop.example/item/1",
        "HTTPS://shop.example:443/item/1#x",
        "https://shop.example/item/1?utm_source=t",
    ]
    results: list[bool] = []
    barrier = threading.Barrier(20)
    with Deduplicator(store_strategy, namespace="threads", capacity=10_000, **store_location) as dedup:

        def claim(n: int) -> None:
            barrier.wait()
            results.append(dedup.claim(spellings[n % 3]))

        threads = [threading.Thread(target=claim, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(results) == [False] * 19 + [True]
