"""The recrawl window in every strategy, against real servers: a page is not won again before
W, is won again by exactly one of four worker processes after W (1 + 1/G) (with and without
state files, with and without leases), the local filter answers as the store does over ten
windows of a fake clock, and one real 2-second window end to end.

These answers cannot depend on the filter's twin (test_bloom_windowed.py runs both), so the
process matrix runs in the compiled run only, to keep the pure-Python run short.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
import redis

from crawldedup import Deduplicator, NamespaceConflict, bloom
from crawldedup.fingerprints import Fingerprints, hash_many
from crawldedup.stores import Lease
from crawldedup.stores.factory import open_store
from crawldedup.windows import ManualClock, Window

DAY = 86_400.0
WINDOW = Window(30 * DAY, 4)
START = WINDOW.generation(1_800_000_000.0) * WINDOW.span + 0.3 * WINDOW.span
PAGES = [f"https://shop.example/item/{i}?a=1" for i in range(300)]
STRATEGIES = ["set", "sharded-set", "redisbloom", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
LEASE_STRATEGIES = {"set", "sharded-set"}
compiled_only = pytest.mark.skipif(not bloom.HAS_EXTENSION, reason="the twin cannot change a store's answers")


def options(strategy: str, request: pytest.FixtureRequest, tmp_path: Path) -> Dict[str, Any]:
    if strategy == "sqlite":
        return {"sqlite_path": str(tmp_path / "claims.sqlite")}
    if strategy == "postgres":
        return {"postgres_url": request.getfixturevalue("postgres_url")}
    return {"redis_url": request.getfixturevalue("redisbloom_url" if strategy == "redisbloom" else "redis_url")}


def claim(d: Deduplicator, pages: List[str], lease: bool) -> List[bool]:
    """Claim ``pages``; with a lease, finish the won ones at once (the page was fetched)."""
    won = d.claim_many(pages, lease=60.0 if lease else None)
    if lease:
        done = d.done([page for page, w in zip(pages, won) if w])
        assert all(done)
    return won


@pytest.mark.parametrize("strategy", STRATEGIES + ["local"])
@pytest.mark.parametrize("with_state", [False, True], ids=["memory", "state-file"])
def test_not_won_again_before_the_window_and_won_again_after_it(strategy, with_state, request, tmp_path):
    clock = ManualClock(START)
    extra = options(strategy, request, tmp_path) if strategy != "local" else {}
    state = tmp_path / "s.bloom" if with_state else None
    with Deduplicator(strategy, ttl_days=30, capacity=10_000, state=state, clock=clock, **extra) as d:
        assert sum(claim(d, PAGES, False)) >= len(PAGES) - 3  # RedisBloom may lose a page to its FP rate
        clock.advance(WINDOW.seconds - 1)
        assert not any(claim(d, PAGES, False)), "won again before the window"
        clock.advance(WINDOW.span + 1)
        assert sum(claim(d, PAGES, False)) >= len(PAGES) - 3, "not won again after W (1 + 1/G)"
        assert not any(claim(d, PAGES, False))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_worker_of_another_window_is_refused_naming_both(strategy, request, tmp_path):
    extra = options(strategy, request, tmp_path)

    def open_with(**window: Any) -> Deduplicator:
        return Deduplicator(strategy, namespace="crawl", capacity=10_000, state=None, **window, **extra)

    with open_with(ttl_days=30):
        open_with(ttl_days=30, generations=4).close()  # the same window: welcome
        with pytest.raises(
            NamespaceConflict,
            match=r"namespace 'crawl' was made for a recrawl window of 30 days in 4 "
            r"generations of 7\.5 days, this store uses a recrawl window of 30 "
            r"days in 6 generations of 5 days: give every worker the same",
        ):
            open_with(ttl_days=30, generations=6)
        with pytest.raises(
            NamespaceConflict,
            match=r"window of 30 days in 4 generations of 7\.5 days, this store uses "
            r"claims kept for ever \(ttl_days 0\)",
        ):
            open_with(ttl_days=0)
    with Deduplicator(strategy, namespace="kept", capacity=10_000, state=None, ttl_days=0, **extra):
        with pytest.raises(
            NamespaceConflict,
            match=r"namespace 'kept' was made for claims kept for ever \(ttl_days 0\), "
            r"this store uses a recrawl window of 2 days in 4 generations",
        ):
            Deduplicator(strategy, namespace="kept", capacity=10_000, state=None, ttl_days=2, **extra)


@pytest.mark.parametrize("strategy", ["set", "sqlite"])
def test_a_namespace_made_before_the_window_stamp_opens_with_any_window(strategy, request, tmp_path):
    extra = options(strategy, request, tmp_path)
    Deduplicator(strategy, namespace="old", capacity=10_000, state=None, ttl_days=30, **extra).close()
    if strategy == "sqlite":  # as a file made before the column existed reads
        with sqlite3.connect(extra["sqlite_path"]) as db:
            db.execute("UPDATE crawldedup_namespaces SET recrawl_window = NULL")
    else:
        redis.Redis.from_url(extra["redis_url"]).hdel("old:meta", "window")
    for ttl_days in (0, 7):
        with Deduplicator(strategy, namespace="old", capacity=10_000, state=None, ttl_days=ttl_days, **extra) as d:
            assert d.claim_many([f"https://old.example/{ttl_days}"]) == [True]


@pytest.mark.parametrize("strategy", sorted(LEASE_STRATEGIES))
def test_a_lease_done_late_starts_its_window_when_done(strategy, request, tmp_path):
    clock = ManualClock(START)
    with Deduplicator(strategy, ttl_days=30, capacity=10_000, clock=clock, **options(strategy, request, tmp_path)) as d:
        assert all(d.claim_many(PAGES[:50], lease=600))
        clock.advance(WINDOW.span)  # fetched over a generation boundary
        assert all(d.done(PAGES[:50]))
        clock.advance(WINDOW.seconds - 1)  # W after the claim, not yet W after the done
        assert not any(d.claim_many(PAGES[:50]))
        clock.advance(WINDOW.span + 1)
        assert all(d.claim_many(PAGES[:50]))


WORKER = textwrap.dedent("""
    import json, sys
    from crawldedup import Deduplicator
    from crawldedup.windows import ManualClock
    options = json.loads(sys.argv[1])
    lease = options.pop("lease")
    pages = options.pop("pages")
    clock = ManualClock(options.pop("start"))
    d = Deduplicator(clock=clock, ttl_days=30, capacity=10_000, **options)
    print("ready", flush=True)
    for line in sys.stdin:
        clock.advance(float(line) - clock())
        won = d.claim_many(pages, lease=60.0 if lease else None)
        if lease:
            d.done([p for p, w in zip(pages, won) if w])
        print(json.dumps([i for i, w in enumerate(won) if w]), flush=True)
    d.close()
""")


def run_phases(workers: List[subprocess.Popen], times: List[float]) -> List[List[List[int]]]:
    """Each phase: every worker claims the pages at that time; the rows each won."""
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    phases = []
    for moment in times:
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(f"{moment!r}\n")
            worker.stdin.flush()
        phases.append([json.loads(worker.stdout.readline()) for worker in workers if worker.stdout])
    return phases


@compiled_only
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("with_state, lease", [(False, False), (True, True)], ids=["memory", "state-file-leases"])
def test_exactly_one_of_four_workers_wins_a_page_again_after_the_window(strategy, with_state, lease, request, tmp_path):
    lease = lease and strategy in LEASE_STRATEGIES
    workers = []
    for n in range(4):
        setup = {
            "strategy": strategy,
            "pages": PAGES,
            "lease": lease,
            "start": START,
            "state": str(tmp_path / f"w{n}.bloom") if with_state else None,
            **options(strategy, request, tmp_path),
        }
        workers.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, json.dumps(setup)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
        )
    try:
        first, before, after, again = run_phases(
            workers,
            [
                START,
                START + WINDOW.seconds - 1,
                START + WINDOW.seconds * (1 + 1 / WINDOW.generations),
                START + WINDOW.seconds * (1 + 1 / WINDOW.generations) + 1,
            ],
        )
    finally:
        for worker in workers:
            worker.communicate(timeout=60)
    for phase in (first, after):
        won = sorted(row for rows in phase for row in rows)
        assert len(won) == len(set(won)), "a page won by two workers"
        assert len(won) >= len(PAGES) - 3  # RedisBloom may lose a page to its FP rate
    assert [rows for rows in before if rows] == [], "won again before the window"
    assert [rows for rows in again if rows] == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_local_filter_answers_as_the_store_over_ten_windows(strategy, request, tmp_path):
    # Random claims at random times over ten windows: after every step the local filter and the
    # store agree on every page, but for the local filter's false positives (and RedisBloom's).
    rng = random.Random(15)
    clock = ManualClock(START)
    fingerprints = Fingerprints(hash_many(PAGES))
    no_claims = Fingerprints(hash_many([]))
    disagreements = 0
    with Deduplicator(
        strategy,
        ttl_days=30,
        capacity=10_000,
        state=tmp_path / "s.bloom",
        clock=clock,
        sample_rate=0,
        **options(strategy, request, tmp_path),
    ) as d:
        assert d.store is not None
        won_at = {}
        while clock() < START + 10 * WINDOW.seconds:
            sample = rng.sample(PAGES, 40)
            won_at.update((page, clock()) for page, won in zip(sample, d.claim_many(sample)) if won)
            clock.advance(rng.uniform(0.05, 0.6) * WINDOW.span)
            local = d.local_filter.contains_hashes(fingerprints.hashes)
            stored = d.store.claim_and_read(no_claims, fingerprints).present
            for page, mine, theirs in zip(PAGES, local.tolist(), stored):
                assert mine or not theirs, "the store remembers a page the local filter forgot"
                # A store whose window is exact per URL (sharded-set's ticks) forgets a claim W
                # after it, the local filter at the end of W's last generation: not a disagreement.
                exact = not theirs and clock() - won_at.get(page, clock()) >= WINDOW.seconds
                disagreements += mine != theirs and not exact
    assert disagreements <= 0.02 * len(PAGES) * 10 * WINDOW.live_count * 2


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["local", "set", "sqlite"])
def test_a_real_two_second_window_end_to_end(strategy, request, tmp_path):
    # W = 2 s in 4 generations of 0.5 s: seen for >= 2 s, won again by 2.5 s, by the wall clock.
    extra = options(strategy, request, tmp_path) if strategy != "local" else {}
    with Deduplicator(
        strategy, ttl_days=2 / DAY, generations=4, capacity=1_000, state=tmp_path / "s.bloom", **extra
    ) as d:
        # The claim is stamped between these two readings of the clock the window runs on: the
        # bounds are taken from them, so that a slow call moves no verdict.
        before = time.time()
        assert all(d.claim_many(PAGES[:20]))
        claimed_by = time.time()
        while time.time() < before + 1.9:
            answers = d.claim_many(PAGES[:20])
            if time.time() < before + 2.0:
                assert not any(answers), "won again before the window passed"
            elif any(answers):  # a slow call answered after the 2 s: it may win them, anew
                claimed_by = time.time()
            time.sleep(0.2)
        time.sleep(max(0.0, claimed_by + 2.55 - time.time()))
        assert all(d.claim_many(PAGES[:20])), "not won again W (1 + 1/G) after the claim"


def test_sharded_set_answers_a_shards_claims_together_as_set_answers_each(redis_url):
    # With a window in the generations layout, sharded-set answers the claims a call has for one shard together (one
    # SMISMEMBER per live set and one SADD), set each claim by itself: the same answers over
    # random calls of 1 to 300 claims (repeats included; 16 shards, so from 1 to about 20
    # claims a shard), lease claims, done and release, across generations.
    rng = random.Random(21)
    clock = ManualClock(START)
    urls = [f"https://shop.example/p/{i}" for i in range(400)]
    pool = hash_many(urls)
    stores = [
        open_store(
            strategy,
            namespace=f"alike-{strategy}",
            policy_digest="0123456789abcdef",
            redis_url=redis_url,
            capacity=400,
            error_rate=0.01,
            window=WINDOW,
            clock=clock,
            **({"window_layout": "generations"} if strategy == "sharded-set" else {}),
        )
        for strategy in ("set", "sharded-set")
    ]
    try:
        assert stores[1].shards == 16
        outcomes = set()
        for _ in range(60):
            rows = [rng.randrange(len(urls)) for _ in range(rng.choice([1, 2, 40, 300]))]
            batch = Fingerprints(pool[rows])
            owner = rng.choice(["a", "b"])
            lease = Lease(owner, 60.0, [urls[r] for r in rows]) if rng.random() < 0.3 else None
            answers = [store.claim_and_read(batch, lease=lease) for store in stores]
            assert answers[0] == answers[1]
            outcomes.update(zip(answers[0].won, [i in answers[0].held for i in range(len(rows))]))
            if lease is not None:
                won = Fingerprints(batch.hashes[answers[0].won])
                settle = "finish_leases" if rng.random() < 0.5 else "release_leases"
                assert [getattr(store, settle)(won, owner) for store in stores] == [[True] * len(won)] * 2
            clock.advance(rng.uniform(0.1, 0.7) * WINDOW.span)
        assert outcomes == {(True, False), (False, False), (False, True)}  # won, seen, held
    finally:
        for store in stores:
            store.close()
