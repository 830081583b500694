"""Failover with real processes: the primary (or a cluster master) SIGKILLed under claiming workers.

Four worker processes (two blocking, two asyncio) each claim the same 20,000 pages in their
own order and spellings, in batches of 250 (0.1 s apart), repeating a batch that raised StoreUnavailable.
Once a fifth of the batches are answered, the primary is SIGKILLed:

- Sentinel (a primary, two replicas, three Sentinels; down after 1 s): the Sentinels promote a
  replica and the workers reach it through ``redis+sentinel://``.
- Cluster (3 masters with a replica each; node timeout 1 s): the killed master's replica takes
  its slots; the killed node is started again and rejoins as the new master's replica.

``durability="replicated"``: no page is won twice and none lost. ``durability="primary"``: none
lost, and the pages won twice (their claims died with the primary before its replicas had them)
are counted and recorded (``record_property("won_twice")``), not asserted: how many depends on
how far replication lags at the kill. Measured figures are in docs/stores.md, "Failover".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable, List, Tuple

import pytest
from conftest import RedisClusterServers, SentinelSet, _ask, _replication, _wait_for, race_processes

WORKER = Path(__file__).parent / "workers" / "failover_worker.py"
PAGES = 20_000
PROCESSES = 4
BATCHES = PROCESSES * -(-PAGES // 250)
#: Seconds the whole run may take: start, failover, and the rest of the claims.
TIMEOUT_SECONDS = 240

pytestmark = [pytest.mark.slow, pytest.mark.redis]


def run_with_kill(options: dict, tmp_path: Path, kill: Callable[[], None]) -> Tuple[Counter, int]:
    """Start the workers, let them go, call ``kill`` once a fifth of the batches are answered;
    count winners per canonical URL, and the batches the workers made again."""
    start = tmp_path / "start"
    outs = [tmp_path / f"won-{w}.json" for w in range(PROCESSES)]
    commands = [
        [sys.executable, str(WORKER), str(w), str(PAGES), str(start), str(out), json.dumps(options)]
        for w, out in enumerate(outs)
    ]

    def midway() -> None:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while sum(os.path.getsize(f"{out}.progress") for out in outs) < BATCHES // 5:
            assert time.monotonic() < deadline, "the workers made no progress"
            time.sleep(0.005)
        kill()

    codes = race_processes(commands, outs, start, TIMEOUT_SECONDS, midway)
    assert codes == [0] * PROCESSES
    results = [json.loads(out.read_text("ascii")) for out in outs]
    return Counter(url for result in results for url in result["won"]), sum(r["repeated"] for r in results)


def judge(winners: Counter, durability: str, repeated: int, record_property) -> None:
    twice = sum(1 for count in winners.values() if count > 1)
    record_property("won_twice", twice)
    record_property("repeated_batches", repeated)
    print(
        f"\n{durability}: {twice} of {PAGES} pages won twice, {PAGES - len(winners)} lost, "
        f"{repeated} batches made again"
    )
    assert len(winners) == PAGES, "a page was lost: no worker won it"
    assert repeated > 0, "the kill came after the workers were done"
    if durability == "replicated":
        assert twice == 0, f"{twice} pages won twice"


#: The Sentinel cases: durability, seconds the replicas stall before the kill. ``primary`` with a
#: plain kill (no page won twice in every run here: see docs/stores.md) runs only with
#: CRAWLDEDUP_FAILOVER_CASES=all, to keep the suite's time.
SENTINEL_CASES = [("replicated", 0), ("replicated", 4), ("primary", 4)]
if os.environ.get("CRAWLDEDUP_FAILOVER_CASES") == "all":
    SENTINEL_CASES.append(("primary", 0))


@pytest.mark.parametrize(
    "durability, lag_seconds",
    SENTINEL_CASES,
    ids=[f"{d}-killed{'-lagging' if lag else ''}" for d, lag in SENTINEL_CASES],
)
def test_sentinel_failover(durability, lag_seconds, sentinel_set: SentinelSet, tmp_path, record_property):
    """``killed-lagging``: the replicas stall (SIGSTOP) for 4 s before the kill, as a replica
    host that hangs or a link that stalls; the primary drops them after its ``repl-timeout``
    (2 s here) and goes on answering alone, then dies as they resume."""
    options = {"strategy": "set", "redis_url": sentinel_set.url, "namespace": "failover", "durability": durability}

    def kill() -> None:
        assert sentinel_set.primary.process is not None
        stall_then_kill(
            sentinel_set.primary.port,
            sentinel_set.primary.process,
            [replica.process for replica in sentinel_set.replicas if replica.process is not None],
            lag_seconds,
        )

    winners, repeated = run_with_kill(options, tmp_path, kill)
    assert sentinel_set.primary_port() in {r.port for r in sentinel_set.replicas}, "no replica was promoted"
    judge(winners, durability, repeated, record_property)


def stall_then_kill(port: int, primary: subprocess.Popen, replicas: List[subprocess.Popen], seconds: float) -> None:
    """SIGKILL the primary on ``port``; with ``seconds``, its replicas stall (SIGSTOP) that long
    first, past the primary's ``repl-timeout`` (2 s), and resume (SIGCONT) as it dies."""
    if seconds:
        assert _ask(port, "CONFIG", "SET", "repl-timeout", "2")
        for replica in replicas:
            replica.send_signal(signal.SIGSTOP)
        time.sleep(seconds)
    primary.send_signal(signal.SIGKILL)
    for replica in replicas:
        replica.send_signal(signal.SIGCONT)


def _masters(cluster: RedisClusterServers) -> List[int]:
    return [i for i, port in enumerate(cluster.ports) if _replication(port).get("role") == "master"]


#: The cluster cases, as SENTINEL_CASES: a stalled replica only with CRAWLDEDUP_FAILOVER_CASES=all.
CLUSTER_CASES = [("replicated", 0), ("primary", 0)]
if os.environ.get("CRAWLDEDUP_FAILOVER_CASES") == "all":
    CLUSTER_CASES += [("replicated", 4), ("primary", 4)]


@pytest.mark.parametrize(
    "durability, lag_seconds", CLUSTER_CASES, ids=[f"{d}-killed{'-lagging' if lag else ''}" for d, lag in CLUSTER_CASES]
)
def test_cluster_failover(durability, lag_seconds, replicated_cluster: RedisClusterServers, tmp_path, record_property):
    import redis

    # The victim: the master of the first hash-tag group's slot (every batch touches it).
    client = redis.RedisCluster.from_url(replicated_cluster.url)
    try:
        owner = client.get_node_from_key(b"{failover:0}").port
    finally:
        client.close()
    victim = replicated_cluster.ports.index(owner)
    entry = next(port for port in replicated_cluster.ports if port != owner)  # workers open through a survivor
    options = {
        "strategy": "set",
        "redis_url": f"redis://127.0.0.1:{entry}/0",
        "namespace": "failover",
        "durability": durability,
    }

    replica = next(
        i for i, port in enumerate(replicated_cluster.ports) if _replication(port).get("master_port") == owner
    )

    def kill() -> None:
        stall_then_kill(
            owner, replicated_cluster.processes[victim], [replicated_cluster.processes[replica]], lag_seconds
        )
        # Its replica takes over; the node then comes back as that replica's replica, so that
        # WAIT has a replica to count again on those slots.
        _wait_for(
            "the replica taking over",
            lambda: len(_masters(replicated_cluster)) == 3 and victim not in _masters(replicated_cluster),
            60,
        )
        replicated_cluster.restart(victim)

    winners, repeated = run_with_kill(options, tmp_path, kill)
    assert victim not in _masters(replicated_cluster)
    judge(winners, durability, repeated, record_property)
