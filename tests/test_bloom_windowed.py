"""The windowed filter: generations in slots, the window's two bounds, both twins' bytes, the
file (reopen, kinds, corruption), union and a SIGKILL during a rotation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import List

import pytest

from crawldedup import FilterFileError, bloom
from crawldedup.bloom.format import FilterKindError
from crawldedup.windows import ManualClock, Window

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

WINDOWED = [pytest.param(bloom.PyWindowedBloomFilter, id="py")]
if bloom.HAS_EXTENSION:
    WINDOWED.append(pytest.param(bloom.WindowedBloomFilter, id="cy", marks=pytest.mark.cython))
DAY = 86_400.0
WINDOW = Window(30 * DAY, 4)
START = 1_800_000_000.0


@pytest.fixture(params=WINDOWED)
def windowed_cls(request: pytest.FixtureRequest) -> type:
    return request.param


def keys(prefix: str, count: int) -> List[str]:
    return [f"https://{prefix}.example/item/{i}?ref=x" for i in range(count)]


def test_a_key_is_seen_for_the_window_and_forgotten_by_its_overshoot(windowed_cls, tmp_path):
    # Claims at the start, middle and end of a generation: each is seen until t + W and gone by t + W (1 + 1/G).
    clock = ManualClock(START)
    bf = windowed_cls(10_000, 0.01, WINDOW, tmp_path / "w.bloom", clock=clock)
    span = WINDOW.span
    first = WINDOW.generation(START) + 1
    for offset in (0.0, 0.5 * span, span - 1.0):
        claimed_at = first * span + offset
        clock.advance(claimed_at - clock())
        key = f"https://a.example/{offset}"
        assert bf.add(key)
        assert not bf.add(key)
        clock.advance(WINDOW.seconds - 1.0)
        assert key in bf, "forgotten before the window"
        clock.advance(1.0)
        assert key in bf or clock() >= WINDOW.forgotten_at(first)
        clock.advance(claimed_at + WINDOW.seconds * (1 + 1 / WINDOW.generations) - clock())
        assert key not in bf, "still seen after the window and its overshoot"
        assert bf.add(key), "not won again after the window"
        first = WINDOW.generation(clock()) + 1
    bf.close()


def test_approx_items_counts_the_live_generations(windowed_cls):
    clock = ManualClock(START)
    bf = windowed_cls(50_000, 0.01, WINDOW, clock=clock)
    for generation in range(8):
        assert bf.add_many(keys(f"g{generation}", 1_000)).sum() >= 990
        clock.advance(WINDOW.span)
    live = bf.generations()
    assert len(live) == WINDOW.live_count - 1  # the current generation holds nothing yet
    assert 4 * 990 <= bf.approx_items == sum(g.approx_items for g in live) <= 4 * 1_000
    assert bf.contains_many(keys("g7", 1_000)).all() and bf.contains_many(keys("g4", 1_000)).all()
    assert bf.contains_many(keys("g3", 1_000)).sum() <= 30  # forgotten: only false positives remain


@pytest.mark.parametrize("writer", WINDOWED)
@pytest.mark.parametrize("reader", WINDOWED)
def test_both_twins_write_the_same_bytes_and_read_each_other(writer, reader, tmp_path):
    paths = []
    for cls in (writer, reader):
        clock = ManualClock(START)
        path = tmp_path / f"{cls.__name__}-{len(paths)}.bloom"
        with cls(20_000, 0.01, WINDOW, path, clock=clock) as bf:
            for generation in range(7):
                bf.add_many(keys(f"g{generation}", 700) + keys("every", 50))
                clock.advance(WINDOW.span * 0.8)
        paths.append(path)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    clock = ManualClock(START + 7 * WINDOW.span * 0.8)
    probe = keys("g6", 700) + keys("g1", 700) + keys("absent", 2_000)
    with writer.open(paths[0], clock=clock) as a, reader.open(paths[0], clock=clock) as b:
        assert (a.contains_many(probe) == b.contains_many(probe)).all()
        assert a.generations() == b.generations()


def test_it_reopens_with_the_same_answers_and_counts(windowed_cls, tmp_path):
    clock = ManualClock(START)
    path = tmp_path / "w.bloom"
    with windowed_cls(20_000, 0.01, WINDOW, path, clock=clock, metadata=b"stamp") as bf:
        for generation in range(3):
            bf.add_many(keys(f"g{generation}", 2_000))
            clock.advance(WINDOW.span)
        answers = bf.contains_many(keys("g0", 2_000) + keys("absent", 2_000))
        generations = bf.generations()
    with bloom.open_filter(path, "r+", clock=clock) as again:
        assert isinstance(again, bloom.WindowedBloomFilter)
        assert again.window == WINDOW and again.metadata == b"stamp"
        assert (again.contains_many(keys("g0", 2_000) + keys("absent", 2_000)) == answers).all()
        assert again.generations() == generations


def test_the_kinds_do_not_open_as_each_other(tmp_path):
    plain, windowed = tmp_path / "plain.bloom", tmp_path / "windowed.bloom"
    bloom.BloomFilter(1_000, 0.01, plain).close()
    bloom.WindowedBloomFilter(1_000, 0.01, WINDOW, windowed).close()
    with pytest.raises(FilterKindError, match="windowed.bloom: a windowed filter"):
        bloom.BloomFilter.open(windowed)
    with pytest.raises(FilterKindError, match="plain.bloom: a plain filter without a recrawl window"):
        bloom.WindowedBloomFilter.open(plain)
    frozen = Path(__file__).parent / "data" / "format-v1.bloom"
    with bloom.open_filter(frozen) as old:  # the frozen v1 file opens as a plain filter
        assert not isinstance(old, bloom.WindowedBloomFilter)
        assert all(line in old for line in (Path(__file__).parent / "data" / "format-v1-keys.txt").read_text().split())


def test_a_corrupted_window_field_is_a_filter_file_error(tmp_path):
    path = tmp_path / "w.bloom"
    bloom.WindowedBloomFilter(1_000, 0.01, WINDOW, path).close()
    data = bytearray(path.read_bytes())
    data[1104 + 8] ^= 0x01  # the generations field: the checksum no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(FilterFileError, match="checksum"):
        bloom.open_filter(path)


def test_union_needs_the_same_window_and_keeps_generations(windowed_cls):
    clock = ManualClock(START)
    a = windowed_cls(10_000, 0.01, WINDOW, clock=clock)
    b = windowed_cls(10_000, 0.01, WINDOW, clock=clock)
    a.add_many(keys("a", 500))
    clock.advance(WINDOW.span)
    b.add_many(keys("b", 500))
    a.union(b)
    assert a.contains_many(keys("a", 500) + keys("b", 500)).all()
    clock.advance(WINDOW.seconds)  # a's generation is forgotten, b's (one later) still live
    assert a.contains_many(keys("a", 500)).sum() < 25 and a.contains_many(keys("b", 500)).all()
    with pytest.raises(ValueError, match="different windows"):
        a.union(windowed_cls(10_000, 0.01, Window(DAY, 4), clock=clock))
    with pytest.raises(ValueError, match="windowed filter with a plain one"):
        a.union(bloom.BloomFilter(10_000, 0.01))
    with pytest.raises(ValueError, match="plain filter with a windowed one"):
        bloom.BloomFilter(10_000, 0.01).union(a)


def test_the_false_positive_rate_stays_under_target_over_the_window(windowed_cls):
    # Capacity keys live, fed evenly over the window, then all in one burst: measured <= error_rate.
    for spread in (WINDOW.live_count, 1):
        clock = ManualClock(START)
        bf = windowed_cls(40_000, 0.01, WINDOW, clock=clock)
        per_generation = 40_000 // spread
        for generation in range(spread):
            bf.add_many(keys(f"{spread}-{generation}", per_generation))
            if generation < spread - 1:
                clock.advance(WINDOW.span)
        rate = bf.contains_many(keys("absent", 200_000)).mean()
        assert rate <= 0.01, (spread, rate)
        assert bf.estimated_error_rate <= 0.01


ROTATOR = textwrap.dedent("""
    import sys
    from crawldedup.bloom import WindowedBloomFilter
    from crawldedup.windows import ManualClock, Window
    path, start, run = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    window = Window(30 * 86400.0, 4)
    clock = ManualClock(start)
    bf = WindowedBloomFilter.open(path, "r+", clock=clock)
    for i in range(1, 100_000):
        clock.advance(window.span)
        bf.add_many([f"https://{run}.example/{i}/{j}" for j in range(20)])
        print(i, flush=True)
""")


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_sigkill_during_rotations_keeps_every_claim_of_the_live_window(tmp_path):
    # Big slots and small batches: a rotation (zeroing 2.4 MB) is most of each step.
    path = tmp_path / "w.bloom"
    start = WINDOW.generation(START) * WINDOW.span
    bloom.WindowedBloomFilter(2_000_000, 0.01, WINDOW, path, clock=ManualClock(start)).close()
    for run, delay in enumerate((0.05, 0.12, 0.2)):
        child = subprocess.Popen(
            [sys.executable, "-c", ROTATOR, str(path), str(start), f"r{run}"],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert child.stdout is not None
        first = child.stdout.readline()  # it is rotating now
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        done = [int(line) for line in (first + out).split()]
        last = done[-1] if done else 0
        # The child may have died rotating to last + 1: the generations live then are kept.
        after = ManualClock(start + (last + 1) * WINDOW.span)
        with bloom.WindowedBloomFilter.open(path, "r+", clock=after) as reopened:
            for i in range(max(1, last + 1 - WINDOW.generations), last + 1):
                batch = [f"https://r{run}.example/{i}/{j}" for j in range(20)]
                assert reopened.contains_many(batch).all(), (delay, last, i)
            assert reopened.add_many([f"https://r{run}.example/after"]).all()
        start += (last + 1) * WINDOW.span  # the next run starts where this one ended
