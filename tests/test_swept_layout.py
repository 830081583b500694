"""set's swept layout (windowed namespaces): claim keys without expiry, set 64 at a time, whose
value holds their generation; a sweep paced by the clock deletes the forgotten ones.

Every test runs on a fake clock (the one clock the store ages by), against Redis 7, Valkey 8
and Valkey 9; the window tests of tests/test_store_windows.py run the layout too.
"""

from __future__ import annotations

import os
import random
from typing import Dict, List

import pytest
import redis

from crawldedup.stores import Lease, NamespaceConflict
from crawldedup.stores.factory import open_store
from crawldedup.stores.redis_keys import SWEEP_PASSES_PER_WINDOW, RedisKeyStore
from crawldedup.windows import ManualClock, Window

pytestmark = pytest.mark.server_matrix

DAY = 86_400.0
WINDOW = Window(30 * DAY, 4)
#: Near the wall clock: a key of the expiring layout expires by it too (EXAT of the store's clock).
START = WINDOW.generation(1_800_000_000.0) * WINDOW.span + 0.3 * WINDOW.span


def store(redis_url: str, clock: ManualClock, window: Window = WINDOW, **extra: object) -> RedisKeyStore:
    options: Dict[str, object] = {"namespace": "swept", **extra}
    opened = open_store(
        "set",
        policy_digest="0123456789abcdef",
        redis_url=redis_url,
        capacity=10_000,
        error_rate=0.01,
        window=window,
        clock=clock,
        **options,  # type: ignore[arg-type]
    )
    assert isinstance(opened, RedisKeyStore)
    return opened


def claim_keys(client: redis.Redis, s: RedisKeyStore) -> List[bytes]:
    """The namespace's claim keys: a group's tag and 16 fingerprint bytes."""
    tags = set(s._tags)
    keys = client.scan_iter(match=b"{%s:*" % s.namespace.encode(), count=1_000)
    return [key for key in keys if key[:-16] in tags]


def calls_of(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_a_new_windowed_namespace_keeps_its_generation_in_keys_without_expiry(redis_url):
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    pages = [os.urandom(16) for _ in range(2_000)]
    client.config_resetstat()
    with store(redis_url, clock) as s:
        assert s.window_layout == "swept" and s.meta["window_layout"] == "swept"
        assert all(s.claim_many(pages))
        # New pages are set together (MSETNX), not one SET each.
        assert calls_of(client, "msetnx") >= len(pages) // 64 and calls_of(client, "set") < 100
        assert not any(s.claim_many(pages))
        assert calls_of(client, "scan") == 0  # the clock did not move: no key was due to be looked at
        keys = claim_keys(client, s)
    assert len(keys) == len(pages)
    generation = WINDOW.generation(START)
    assert {client.get(key) for key in keys} == {b"g%d" % generation}
    assert {client.ttl(key) for key in keys} == {-1}
    client.close()


def test_a_worker_sends_a_slice_of_the_sweep_only_when_one_is_due(redis_url):
    # Each slice answers when the next is due (100 keys due, at the pace of a pass every W / 3
    # over the keyspace); until then the worker's calls send none. A slice runs DBSIZE once.
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    with store(redis_url, clock) as s:
        client.config_resetstat()
        for _ in range(5):
            assert all(s.claim_many([os.urandom(16) for _ in range(2_000)]))
        assert calls_of(client, "dbsize") == s.groups  # the first call's slices: none due yet
        assert calls_of(client, "scan") == 0
        clock.advance(WINDOW.seconds / SWEEP_PASSES_PER_WINDOW + 1)  # a whole pass is due
        assert all(s.claim_many([os.urandom(16) for _ in range(2_000)]))
        assert calls_of(client, "dbsize") == 2 * s.groups and calls_of(client, "scan") == s.groups
    client.close()


def test_a_namespace_made_before_the_layout_keeps_expiring_keys(redis_url):
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    pages = [os.urandom(16) for _ in range(300)]
    with store(redis_url, clock, namespace="old") as s:
        assert s.window_layout == "swept"
    client.hdel("old:meta", "window_layout")  # as a namespace made before the record named a layout
    with store(redis_url, clock, namespace="old") as s:
        assert s.window_layout == "expiring"
        assert all(s.claim_many(pages))
        keys = claim_keys(client, s)
        assert s.sweep() == 0
    assert len(keys) == len(pages)
    forgotten_at = WINDOW.forgotten_at(WINDOW.generation(START))
    assert all(abs(client.expiretime(key) - forgotten_at) <= 1 for key in keys)
    with pytest.raises(NamespaceConflict, match="expiring layout, this store asks for swept"):
        store(redis_url, clock, namespace="old", window_layout="swept")
    with pytest.raises(ValueError, match="window_layout"):
        store(redis_url, clock, namespace="other", window_layout="ticks")
    with store(redis_url, clock, namespace="chosen", window_layout="expiring") as s:
        assert s.meta["window_layout"] == "expiring" and all(s.claim_many(pages))
        assert all(client.ttl(key) > 0 for key in claim_keys(client, s))
    client.close()


def test_a_forgotten_key_is_claimed_again_and_swept_and_nothing_else_is(redis_url):
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    old = [os.urandom(16) for _ in range(1_000)]
    leased = os.urandom(16)
    with store(redis_url, clock) as s, store(redis_url, clock, namespace="swept2") as neighbour:
        client.set(b"{swept:0}" + b"x" * 15, b"g1")  # not a claim key: 15 bytes after the tag
        assert all(neighbour.claim_many(old))
        assert all(s.claim_many(old))
        assert s.claim_and_read([leased], lease=Lease("a", DAY, ["https://a.example/"])).won == [True]
        clock.advance(WINDOW.seconds / 2)
        recent = [os.urandom(16) for _ in range(500)]
        assert all(s.claim_many(recent))
        clock.advance(WINDOW.seconds * 0.8)  # old's generation is forgotten, recent's is not
        assert not any(s.contains_many(old)) and all(s.contains_many(recent))
        assert all(s.claim_many(old[:100]))  # forgotten: won again
        dropped = s.sweep(keys_per_slice=97)
        assert claim_keys(client, s)
        assert len(claim_keys(client, s)) == 100 + 500 + 1, dropped
        assert s.sweep() == 0  # a second pass finds nothing forgotten
        assert not any(s.claim_many(old[:100] + recent))
        assert s.claim_and_read([leased], lease=Lease("b", 60.0, ["https://a.example/"])).held == (0,)
        assert len(claim_keys(client, neighbour)) == len(old)  # another namespace's keys are its own
    assert client.get(b"{swept:0}" + b"x" * 15) == b"g1"
    client.close()


def test_a_cursor_that_is_not_the_sweeps_starts_a_new_pass(redis_url):
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    pages = [os.urandom(16) for _ in range(500)]
    with store(redis_url, clock) as s:
        assert all(s.claim_many(pages))
        for group in range(s.groups):
            client.set(b"{swept:%d}:cursor" % group, b"garbage")
        clock.advance(WINDOW.seconds + WINDOW.span + 1)
        assert all(s.claim_many(pages[:100]))  # the claims' slices start a new pass
        assert all(client.get(b"{swept:%d}:cursor" % g) != b"garbage" for g in range(s.groups))
        assert s.sweep() == 400 and len(claim_keys(client, s)) == 100
    client.close()


def test_a_leased_claim_is_made_lasting_by_done_and_swept_only_once_forgotten(redis_url):
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    page = os.urandom(16)
    with store(redis_url, clock) as s:
        assert s.claim_and_read([page], lease=Lease("a", 600.0, ["https://a.example/"])).won == [True]
        (key,) = claim_keys(client, s)
        assert (client.get(key), client.ttl(key)) == (b"L", -1)
        clock.advance(2 * WINDOW.seconds)
        s.sweep()
        assert client.get(key) == b"L"  # its lease, not its age, decides
        assert s.finish_leases([page], "a") == [True]
        assert (client.get(key), client.ttl(key)) == (b"g%d" % WINDOW.generation(clock()), -1)
        clock.advance(WINDOW.seconds - 1)
        assert s.sweep() == 0 and s.claim_many([page]) == [False]
        clock.advance(WINDOW.span + 2)
        assert s.sweep() == 1 and client.exists(key) == 0
        assert s.claim_many([page]) == [True]
    client.close()


def test_memory_stays_bounded_over_a_simulated_month(redis_url):
    # W = 3 days; every 4 hours of a month 300 new pages and 300 repeats are claimed. The sweep
    # keeps the pace of the clock (a pass every W / 3): a key is deleted at most two passes
    # after its generation is forgotten (at most W + W / G after its claim), so the keys never
    # outnumber the claims of the last W + W / G + 2 W / 3; once the claims stop and the window
    # has passed, sweep() leaves no claim key.
    window = Window(3 * DAY, 4)
    clock = ManualClock(START)
    client = redis.Redis.from_url(redis_url)
    rng = random.Random(3)
    steps_per_day = 6
    history: List[tuple] = []  # (time, pages won)
    seen: List[bytes] = []
    worst = 0.0
    bound = window.seconds + window.span + 2 * window.seconds / SWEEP_PASSES_PER_WINDOW
    with store(redis_url, clock, window=window) as s:
        for _ in range(30 * steps_per_day):
            fresh = [os.urandom(16) for _ in range(300)]
            repeats = rng.sample(seen, min(300, len(seen)))
            won = s.claim_many(fresh + repeats)
            history.append((clock(), sum(won)))
            seen.extend(fresh)
            recent = sum(n for at, n in history if clock() - at <= bound)
            kept = len(claim_keys(client, s))
            assert kept <= recent, f"{kept} keys held, {recent} claims made in the last {bound / DAY} days"
            worst = max(worst, kept / sum(n for at, n in history if clock() - at <= window.seconds))
            clock.advance(DAY / steps_per_day)
        assert worst < bound / window.seconds
        clock.advance(window.seconds + window.span + 1)
        s.sweep()
        assert claim_keys(client, s) == []
    client.close()


def test_the_swept_layout_on_a_cluster(redis_cluster_url):
    clock = ManualClock(START)
    pages = [os.urandom(16) for _ in range(3_000)]
    with store(redis_cluster_url, clock, namespace="swept-cluster") as s:
        assert s.in_cluster and s.window_layout == "swept"
        assert all(s.claim_many(pages))
        assert not any(s.claim_many(pages))
        clock.advance(WINDOW.seconds + WINDOW.span + 1)
        assert all(s.claim_many(pages[:1_000]))  # their slices sweep too: the clock moved
        assert not any(s.contains_many(pages[1_000:]))
        assert s.sweep() >= 0
        assert s.sweep() == 0
        assert not any(s.claim_many(pages[:1_000]))
        assert all(s.claim_many(pages[1_000:]))
