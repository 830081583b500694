"""sharded-set's ticks layout (windowed namespaces): strings of 5-byte records (a member and the
tick of its claim), one lookup per claim; the window exact to a tick, memory bounded by sweeps.

Every test runs on a fake clock (the one clock the store ages by), against Redis 7, Valkey 8
and Valkey 9; the real 2-second window of tests/test_store_windows.py runs the layout too.
"""

from __future__ import annotations

import os
import random
import re
import struct
from typing import Dict, List

import pytest
import redis

from crawldedup.fingerprints import Fingerprints
from crawldedup.stores import Lease, NamespaceConflict
from crawldedup.stores.factory import open_store
from crawldedup.stores.migration import Migration, MigrationConflict
from crawldedup.stores.sharded_set import CLAIMS_PER_SWEPT_HASH, RedisShardedSetStore, ticks_per_window
from crawldedup.windows import ManualClock, Window

pytestmark = pytest.mark.server_matrix

DAY = 86_400.0
WINDOW = Window(30 * DAY, 4)
#: Ahead of the wall clock (strings expire by it too: EXAT of the store's clock).
START = WINDOW.generation(1_800_000_000.0) * WINDOW.span + 0.3 * WINDOW.span


def store(redis_url: str, clock: ManualClock, window: Window = WINDOW, **extra: object) -> RedisShardedSetStore:
    options: Dict[str, object] = {"namespace": "ticks", "capacity": 10_000, **extra}
    opened = open_store(
        "sharded-set",
        policy_digest="0123456789abcdef",
        redis_url=redis_url,
        error_rate=0.01,
        window=window,
        clock=clock,
        **options,  # type: ignore[arg-type]
    )
    assert isinstance(opened, RedisShardedSetStore)
    return opened


def strings(client: redis.Redis, namespace: str = "ticks") -> List[bytes]:
    """The namespace's strings of claims, ``{<namespace>:<g>}:<shard>:t<sub>``."""
    name = re.compile(rb"\{%s:\d+\}:\d+:t\d+" % re.escape(namespace.encode()))
    return [key for key in client.scan_iter(match=b"{%s:*" % namespace.encode(), count=1_000) if name.fullmatch(key)]


def held(client: redis.Redis, namespace: str = "ticks") -> int:
    """Claims the namespace's strings hold: 5 bytes each after a 5-byte header."""
    pipe = client.pipeline(transaction=False)
    keys = strings(client, namespace)
    for key in keys:
        pipe.strlen(key)
    lengths = pipe.execute()
    assert all(length > 5 and (length - 5) % 5 == 0 for length in lengths)
    return sum(lengths) // 5 - len(keys)


def test_a_new_windowed_namespace_keeps_five_byte_records_of_member_and_tick(redis_url):
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    pages = [os.urandom(16) for _ in range(2_000)]
    with store(redis_url, clock) as s:
        assert s.window_layout == "ticks" and s.meta["window_layout"] == "ticks" and s.split == 2
        assert all(s.claim_many(pages))
    keys = strings(client)
    assert keys and all(client.type(key) == b"string" and 0 < client.ttl(key) for key in keys)
    span = ticks_per_window(WINDOW)
    now = int(START // (WINDOW.seconds / span))
    members = set()
    for key in keys:
        value = client.get(key)
        stamp, leased = struct.unpack(">IB", value[:5])
        assert (stamp, leased) == (now, 0)
        records = [value[i : i + 5] for i in range(5, len(value), 5)]
        assert {record[4] for record in records} == {now % 255}  # every claim's tick, mod 255
        sub = int(key.rpartition(b":t")[2])
        assert all(struct.unpack("<i", record[:4])[0] % 2 == sub for record in records)
        members.update(record[:4] for record in records)
    assert members == {page[8:12] for page in pages}  # fingerprint bytes 8-11
    client.close()


def test_a_namespace_made_before_the_ticks_layout_keeps_generations(redis_url):
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    pages = [os.urandom(16) for _ in range(500)]
    with store(redis_url, clock, window_layout="generations") as old:
        assert all(old.claim_many(pages))
    client.hdel("ticks:meta", "window_layout")  # as a namespace made before the field was
    with store(redis_url, clock) as joined:
        assert joined.window_layout == "generations"
        assert not any(joined.claim_many(pages))
        assert all(joined.claim_many([os.urandom(16) for _ in range(100)]))
    assert strings(client) == []  # nothing written in the other layout
    with pytest.raises(NamespaceConflict, match="generations layout, this store asks for ticks"):
        store(redis_url, clock, window_layout="ticks")
    client.close()


def test_each_claim_is_seen_for_the_window_and_forgotten_within_a_tick(redis_url):
    # Pages claimed at random times; after every step of the clock, a page claimed less than W
    # ago is present, one claimed more than W + a tick ago is absent (and won again).
    rng = random.Random(7)
    clock = ManualClock(START)
    tick = WINDOW.seconds / ticks_per_window(WINDOW)
    claimed_at: Dict[bytes, float] = {}
    with store(redis_url, clock) as s:
        for _ in range(400):
            fresh = [os.urandom(16) for _ in range(rng.randint(0, 30))]
            assert all(s.claim_many(fresh))
            claimed_at.update((page, clock()) for page in fresh)
            clock.advance(rng.uniform(0.0, 0.3) * tick)
            pages = list(claimed_at)
            present = s.contains_many(pages)
            for page, seen in zip(pages, present):
                age = clock() - claimed_at[page]
                assert seen or age >= WINDOW.seconds, f"forgotten {age / tick:.2f} ticks before W"
                assert not seen or age <= WINDOW.seconds + tick, f"kept {age / tick:.2f} ticks past W"
            forgotten = [page for page, seen in zip(pages, present) if not seen]
            assert all(s.claim_many(forgotten))
            claimed_at.update((page, clock()) for page in forgotten)
    assert len(claimed_at) > 3_000


def test_batched_claims_answer_as_claims_one_by_one(redis_url):
    # One call with a string's claims together (one GET and one SET per string) answers as the
    # same claims sent one per call: repeats, lease claims, done and release, across sweeps.
    rng = random.Random(21)
    clock = ManualClock(START)
    urls = [f"https://shop.example/p/{i}" for i in range(300)]
    pool = [os.urandom(16) for _ in urls]
    stores = [store(redis_url, clock, namespace=name, capacity=300) for name in ("together", "alone")]
    try:
        assert stores[0].shards == 16
        for _ in range(80):
            rows = [rng.randrange(len(urls)) for _ in range(rng.choice([1, 2, 40, 200]))]
            owner = rng.choice(["a", "b"])
            leased = rng.random() < 0.3
            lease = Lease(owner, 60.0, [urls[r] for r in rows]) if leased else None
            together = stores[0].claim_and_read([pool[r] for r in rows], lease=lease).won
            alone = [
                stores[1].claim_and_read([pool[r]], lease=Lease(owner, 60.0, [urls[r]]) if leased else None).won[0]
                for r in rows
            ]
            assert together == alone
            if leased:
                won = Fingerprints.of([pool[r] for r, w in zip(rows, together) if w])
                settle = "finish_leases" if rng.random() < 0.5 else "release_leases"
                assert [getattr(s, settle)(won, owner) for s in stores] == [[True] * len(won)] * 2
            clock.advance(rng.uniform(0.05, 0.5) * WINDOW.span)
    finally:
        for s in stores:
            s.close()


def test_a_leased_claim_outlives_the_window_until_its_lease_decides(redis_url):
    clock = ManualClock(START)
    page = os.urandom(16)
    with store(redis_url, clock) as s:
        assert s.claim_and_read([page], lease=Lease("a", 600.0, ["https://a.example/"])).won == [True]
        clock.advance(2 * WINDOW.seconds)
        assert s.sweep() >= 0
        assert s.claim_and_read([page], lease=Lease("b", 600.0, ["https://a.example/"])).held == (0,)
        assert s.finish_leases([page], "a") == [True]
        clock.advance(WINDOW.seconds - 1)
        assert s.claim_many([page]) == [False]  # done made it lasting, from now
        clock.advance(WINDOW.seconds / ticks_per_window(WINDOW) + 2)
        assert s.claim_many([page]) == [True]


def test_memory_stays_bounded_over_a_simulated_month(redis_url):
    # W = 3 days; every 4 hours of a month 300 new pages and 300 repeats are claimed. The
    # strings never hold more than the claims of the last 1.5 windows (a claim is dropped at the
    # first sweep of its string after W, and a claim's call sweeps a string per 64 claims); once
    # the claims stop and the window has passed, sweep() leaves no string.
    window = Window(3 * DAY, 4)
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    rng = random.Random(3)
    steps_per_day = 6
    capacity = 300 * steps_per_day * 3
    history: List[tuple] = []  # (time, pages won)
    seen: List[bytes] = []
    worst = 0.0
    with store(redis_url, clock, window=window, capacity=capacity) as s:
        assert CLAIMS_PER_SWEPT_HASH * s.shards // s.groups >= 1
        for _ in range(30 * steps_per_day):
            fresh = [os.urandom(16) for _ in range(300)]
            repeats = rng.sample(seen, min(300, len(seen)))
            won = s.claim_many(fresh + repeats)
            history.append((clock(), sum(won)))
            seen.extend(fresh)
            recent = sum(n for at, n in history if clock() - at <= 1.5 * window.seconds)
            kept = held(client)
            assert kept <= recent, f"{kept} claims held, {recent} made in the last 1.5 windows"
            worst = max(worst, kept / sum(n for at, n in history if clock() - at <= window.seconds))
            clock.advance(DAY / steps_per_day)
        assert worst < 1.5
        clock.advance(window.seconds + window.seconds / ticks_per_window(window) + 1)
        while s.sweep(strings_per_group=3):
            pass
        assert strings(client) == []
    client.close()


def test_the_ticks_layout_on_a_cluster(redis_cluster_url):
    clock = ManualClock(START)
    pages = [os.urandom(16) for _ in range(3_000)]
    with store(redis_cluster_url, clock, namespace="ticks-cluster") as s:
        assert s.in_cluster and s.window_layout == "ticks"
        assert all(s.claim_many(pages))
        assert not any(s.claim_many(pages))
        clock.advance(WINDOW.seconds + WINDOW.seconds / ticks_per_window(WINDOW) + 1)
        assert all(s.claim_many(pages[:1_000]))
        assert not any(s.contains_many(pages[1_000:]))
        s.sweep()
        assert s.count_claims() == 1_000


def test_migrate_moves_a_generations_namespace_into_the_ticks_layout_resumably(redis_url):
    # A worker claims in the generations namespace across generations while passes copy it; a
    # pass killed after its first batch resumes; after the last pass (the worker stopped) the
    # ticks namespace holds every live claim, each seen at least W after it was made and
    # forgotten no later than the generations layout forgets it.
    rng = random.Random(5)
    clock = ManualClock(START)
    source = store(redis_url, clock, namespace="gens", window_layout="generations", capacity=4_000)
    target = store(redis_url, clock, namespace="moved", capacity=4_000)
    claimed_at: Dict[bytes, float] = {}

    def work(count: int) -> None:
        pages = [os.urandom(16) for _ in range(count)]
        assert all(source.claim_many(pages))
        claimed_at.update((page, clock()) for page in pages)
        clock.advance(rng.uniform(0.1, 0.4) * WINDOW.span)

    try:
        for _ in range(8):
            work(300)
        with pytest.raises(MigrationConflict, match="ticks layout"):
            Migration(source, store(redis_url, clock, namespace="other", capacity=40_000), batch=800)

        class Killed(Exception):
            pass

        def kill(copied: int, present: int) -> None:
            raise Killed

        with pytest.raises(Killed):
            Migration(source, target, batch=800).run_pass(progress=kill)
        assert Migration(source, target, batch=800).record()["cursor"] != "0"
        first = Migration(source, target, batch=800).run_pass(progress=lambda copied, present: work(20))
        assert first.passes == 1
        last = Migration(source, target, batch=800).run_pass()  # the worker stopped
        assert last.passes == 2 and last.copied > 0  # what the worker claimed during the first pass
        pages = list(claimed_at)
        live = source.contains_many(pages)
        assert sum(live) > 1_000 and target.contains_many(pages) == live
        for _ in range(6):  # the window's bounds hold in the new layout, until every copy is forgotten
            clock.advance(0.3 * WINDOW.span)
            held = target.contains_many(pages)
            for page, in_source, in_target in zip(pages, source.contains_many(pages), held):
                assert in_target or not in_source or clock() - claimed_at[page] >= WINDOW.seconds
                assert not in_target or in_source, "kept longer than the generations layout keeps it"
    finally:
        source.close()
        target.close()
