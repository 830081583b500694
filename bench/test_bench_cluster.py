"""Claims per second on a local 3-master Redis Cluster against a single Redis node.

The same store code on both: 100,000 new fingerprints claimed in batches of 1,000 (one
pipeline per batch on one node; one pipeline per node on the cluster), with plain claims and
with leases (claim with a lease, then ``done``: two round trips per batch). The cluster's
three nodes run on the same machine as the client, so this measures the cost of the cluster
client and the fan-out, not the capacity three hosts would add. Run::

    pytest bench/test_bench_cluster.py --benchmark-group-by=param:mode \\
        --benchmark-columns=median,ops,rounds -s

``test_summary`` prints claims/s per case and the cluster / single-node ratio.
"""

from __future__ import annotations

import hashlib
from typing import Dict, List

import pytest

from crawldedup import DEFAULT_POLICY
from crawldedup.stores import Lease
from crawldedup.stores.factory import open_store

FINGERPRINTS = [hashlib.md5(b"cluster-%d" % i).digest() for i in range(100_000)]
URLS = [f"https://site.example/p/{i}" for i in range(len(FINGERPRINTS))]
BATCH = 1_000
OWNER = "bench-worker"
RESULTS: Dict[str, float] = {}


def claim_all(store, mode: str) -> int:
    won = 0
    for start in range(0, len(FINGERPRINTS), BATCH):
        fps = FINGERPRINTS[start : start + BATCH]
        if mode == "claims":
            won += sum(store.claim_many(fps))
        else:
            answers = store.claim_and_read(fps, lease=Lease(OWNER, 60, URLS[start : start + BATCH]))
            won += sum(store.finish_leases(fps, OWNER)) if all(answers.won) else 0
    return won


@pytest.mark.parametrize("mode", ["claims", "leases"])
@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
@pytest.mark.parametrize("where", ["single", "cluster"])
@pytest.mark.benchmark(group="cluster")
def test_claims(benchmark, request, where, strategy, mode):
    url = request.getfixturevalue("redis_url" if where == "single" else "redis_cluster_url")
    stores: List = []

    def setup():
        if where == "single":
            request.getfixturevalue("redis_server").client().flushall()
        else:
            request.getfixturevalue("redis_cluster").flush()
        stores.append(
            open_store(
                strategy,
                namespace="bench",
                policy_digest=DEFAULT_POLICY.digest,
                redis_url=url,
                capacity=1_000_000,
                error_rate=0.01,
                ttl_seconds=30 * 86_400,
            )
        )
        assert stores[-1].in_cluster == (where == "cluster")
        return (stores[-1],), {}

    def run(store) -> None:
        assert claim_all(store, mode) == len(FINGERPRINTS)
        store.close()

    benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    rate = len(FINGERPRINTS) / benchmark.stats.stats.median
    benchmark.extra_info["claims_per_second"] = rate
    RESULTS[f"{strategy} {mode} {where}"] = rate


def test_summary(capsys):
    if not RESULTS:
        pytest.skip("run with the benchmarks")
    lines = [
        "| store | mode | single node, claims/s | 3-master cluster, claims/s | cluster / single |",
        "|---|---|---|---|---|",
    ]
    for strategy in ("set", "sharded-set"):
        for mode in ("claims", "leases"):
            single, cluster = RESULTS[f"{strategy} {mode} single"], RESULTS[f"{strategy} {mode} cluster"]
            lines.append(f"| {strategy} | {mode} | {single:,.0f} | {cluster:,.0f} | {cluster / single:.2f} |")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
