"""A filter that grows past its capacity (bloom/growing.py): stages, their error rates, their
files (format v3), both twins, readers, shared writers, windows and a SIGKILL during growth."""

from __future__ import annotations

import logging
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, List, Sequence

import numpy as np
import pytest

from crawldedup import Deduplicator, FilterFileError, bloom
from crawldedup.bloom.format import HEADER_BYTES, Header
from crawldedup.bloom.growing import GrowingFilter, stage_parameters, stage_path
from crawldedup.windows import ManualClock, Window

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

PLAIN = [pytest.param(bloom.PyBloomFilter, id="py")]
WINDOWED = [pytest.param(bloom.PyWindowedBloomFilter, id="py")]
if bloom.HAS_EXTENSION:
    PLAIN.append(pytest.param(bloom.BloomFilter, id="cy", marks=pytest.mark.cython))
    WINDOWED.append(pytest.param(bloom.WindowedBloomFilter, id="cy", marks=pytest.mark.cython))
WINDOW = Window(30 * 86_400.0, 4)
START = 1_800_000_000.0


@pytest.fixture(params=PLAIN)
def plain_cls(request: pytest.FixtureRequest) -> type:
    return request.param


def keys(prefix: str, count: int, start: int = 0) -> List[str]:
    return [f"https://{prefix}.example/item/{i}?ref=x" for i in range(start, start + count)]


def grown(cls: type, path: Path, capacity: int = 1_000) -> GrowingFilter:
    return GrowingFilter(cls(capacity, 0.01, path))


def test_a_full_filter_grows_and_keeps_every_key_and_the_error_rate(plain_cls, tmp_path):
    with grown(plain_cls, tmp_path / "g.bloom") as bf:
        new = np.concatenate([bf.add_many(keys("a", 5_000, start)) for start in range(0, 60_000, 5_000)])
        stages = bf.stages()
        assert len(stages) == 4 and bf.grown  # 1,000 -> 4,000 -> 16,000 -> 64,000
        assert new.sum() >= 60_000 * (1 - 0.01)
        assert bf.contains_many(keys("a", 60_000)).all()
        assert [(s.capacity, s.error_rate) for s in stages[1:]] == [stage_parameters(1_000, 0.01, i) for i in (1, 2, 3)]
        assert all(s.approx_items <= s.full_at for s in stages)
        assert bf.capacity == sum(s.capacity for s in stages) and bf.approx_items == sum(s.approx_items for s in stages)
        assert bf.expected_error_rate <= 0.01
        false_positives = bf.contains_many(keys("absent", 100_000)).mean()
        assert false_positives <= 0.01
        assert not bf.add_many(keys("a", 100)).any()  # old keys stay old in every stage
    assert [p.name for p in sorted(tmp_path.iterdir())] == [
        "g.bloom",
        "g.bloom.stage1",
        "g.bloom.stage2",
        "g.bloom.stage3",
    ]


def test_a_batch_across_a_growth_gives_each_key_new_once(plain_cls):
    with GrowingFilter(plain_cls(100, 0.01)) as bf:  # in memory
        batch = keys("d", 400)
        new = bf.add_many(batch + batch[::-1] + batch)
        assert bf.grown and new[:400].sum() >= 396 and not new[400:].any()


def test_it_reopens_with_the_same_answers_and_stages(plain_cls, tmp_path):
    path = tmp_path / "g.bloom"
    probe = keys("a", 30_000) + keys("absent", 20_000)
    with grown(plain_cls, path) as bf:
        bf.add_many(keys("a", 30_000))
        answers, stages = bf.contains_many(probe), bf.stages()
    reopened = bloom.open_filter(path, "r+")
    assert isinstance(reopened, GrowingFilter)
    with reopened:
        assert (reopened.contains_many(probe) == answers).all()
        assert reopened.stages() == stages
    with open(path, "rb") as file:
        header = Header.unpack(file.read(HEADER_BYTES), str(path), os.path.getsize(path))
    assert (header.version, header.stages) == (3, len(stages) - 1)


def written_alike(tmp_path: Path, twins: Sequence[type], write: Callable[[type, Path], None], files: int) -> Path:
    """``write(cls, folder)`` for each twin, each in a folder of its own; the folders hold ``files``
    files of the same names and the same bytes. Returns the first twin's folder."""
    folders = []
    for cls in twins:
        folder = tmp_path / f"{cls.__name__}-{len(folders)}"
        folder.mkdir()
        write(cls, folder)
        folders.append(folder)
    names = sorted(p.name for p in folders[0].iterdir())
    assert len(names) == files and names == sorted(p.name for p in folders[1].iterdir())
    for name in names:
        assert (folders[0] / name).read_bytes() == (folders[1] / name).read_bytes(), name
    return folders[0]


@pytest.mark.parametrize("writer", PLAIN)
@pytest.mark.parametrize("reader", PLAIN)
def test_both_twins_write_the_same_bytes_and_read_each_other(writer, reader, tmp_path):
    def write(cls: type, folder: Path) -> None:
        with grown(cls, folder / "g.bloom") as bf:
            for start in range(0, 25_000, 2_500):
                bf.add_many(keys("t", 2_500, start))

    folder = written_alike(tmp_path, (writer, reader), write, files=4)
    probe = keys("t", 25_000) + keys("absent", 5_000)
    with GrowingFilter(writer.open(folder / "g.bloom")) as a, GrowingFilter(reader.open(folder / "g.bloom")) as b:
        assert (a.contains_many(probe) == b.contains_many(probe)).all()


@pytest.mark.parametrize("writer", WINDOWED)
@pytest.mark.parametrize("reader", WINDOWED)
def test_both_windowed_twins_grow_into_the_same_bytes(writer, reader, tmp_path):
    def write(cls: type, folder: Path) -> None:
        clock = ManualClock(START)
        with GrowingFilter(cls(1_000, 0.01, WINDOW, folder / "w.bloom", clock=clock)) as bf:
            for start in range(0, 8_000, 1_000):
                bf.add_many(keys("w", 1_000, start))
                clock.advance(WINDOW.span * 0.6)

    written_alike(tmp_path, (writer, reader), write, files=3)


def test_a_reader_follows_the_writers_growth(plain_cls, tmp_path):
    path = tmp_path / "g.bloom"
    with grown(plain_cls, path) as writer:
        writer.add_many(keys("a", 500))
        with bloom.open_filter(path, "r") as reader:
            assert not isinstance(reader, GrowingFilter)  # not grown yet: a plain filter file
        with GrowingFilter(plain_cls.open(path, "r")) as reader:
            writer.add_many(keys("a", 5_000, 500))
            assert writer.grown
            assert reader.contains_many(keys("a", 5_500)).all()
            assert len(reader.stages()) == len(writer.stages())


def test_a_missing_or_foreign_stage_file_is_a_filter_file_error(plain_cls, tmp_path):
    path = tmp_path / "g.bloom"
    with grown(plain_cls, path) as bf:
        bf.add_many(keys("a", 10_000))
    stage = Path(stage_path(str(path), 2))
    stage.rename(tmp_path / "away")
    with pytest.raises(FilterFileError, match=r"g\.bloom: stage 2 of 2: .*no such file"):
        bloom.open_filter(path)
    plain_cls(16_000, 0.01, stage).close()  # a filter, but not this one's stage
    with pytest.raises(FilterFileError, match=r"g\.bloom\.stage2: not stage 2 of"):
        bloom.open_filter(path)


def test_the_v3_header_counts_stages_and_older_versions_keep_the_field_zero(tmp_path):
    page = bytearray(Header(1_000, 0.01, 10, 7, stages=2).pack())
    assert struct.unpack_from("<I", page, 8)[0] == 3 and struct.unpack_from("<I", page, 76)[0] == 2
    assert Header.unpack(bytes(page), "x", HEADER_BYTES + 640).stages == 2
    for version, stages, problem in ((3, 0, "stages must be in"), (1, 2, "unsupported reserved field 2")):
        struct.pack_into("<II", page, 8, version, 4096)
        struct.pack_into("<I", page, 76, stages)
        struct.pack_into("<I", page, 4092, __import__("zlib").crc32(bytes(page[:4092])))
        with pytest.raises(FilterFileError, match=problem):
            Header.unpack(bytes(page), "x", HEADER_BYTES + 640)
    # An ungrown filter is still written as before: v1 plain, v2 windowed.
    assert Header(1_000, 0.01, 10, 7).version == 1


def test_shared_writers_do_not_grow_and_say_so_until_one_is_alone(tmp_path, caplog):
    if not bloom.HAS_EXTENSION:
        pytest.skip("only the compiled filter shares a file with other writers")
    path = tmp_path / "g.bloom"
    bloom.BloomFilter(1_000, 0.01, path).close()
    first = GrowingFilter(bloom.BloomFilter.open(path, "r+"))
    second = GrowingFilter(bloom.BloomFilter.open(path, "r+"))  # another open file description: another writer
    with caplog.at_level(logging.WARNING, logger="crawldedup.bloom"):
        first.add_many(keys("a", 3_000))
        first.add_many(keys("a", 1_000, 3_000))
    assert not first.grown and not second.grown
    assert [r.getMessage() for r in caplog.records if "does not grow" in r.getMessage()] == [
        f"filter {path} is full (~{first.stages()[0].full_at} keys) and does not grow: other processes write it, "
        "and a filter grows only with its file to itself; its false-positive rate now rises above 0.01"
    ]
    second.close()
    first.add_many(keys("a", 1_000, 4_000))
    assert first.grown
    assert first.contains_many(keys("a", 5_000)).all()
    first.close()


@pytest.mark.parametrize("windowed_cls", WINDOWED)
def test_a_windowed_filter_grows_and_every_stage_forgets_after_the_window(windowed_cls, tmp_path):
    clock = ManualClock(START)
    with GrowingFilter(windowed_cls(1_000, 0.01, WINDOW, tmp_path / "w.bloom", clock=clock)) as bf:
        assert bf.add_many(keys("w", 6_000)).sum() >= 6_000 * 0.99
        assert bf.grown and bf.window == WINDOW
        clock.advance(WINDOW.seconds * 0.99)
        assert bf.contains_many(keys("w", 6_000)).all()
        clock.advance(WINDOW.seconds * (1 + 1 / WINDOW.generations))
        assert not bf.contains_many(keys("w", 6_000)).any()
        assert bf.add_many(keys("w", 100)).all()
    reopened = bloom.open_filter(tmp_path / "w.bloom", clock=clock)
    assert isinstance(reopened, GrowingFilter)
    with reopened:
        assert reopened.contains_many(keys("w", 100)).all() and reopened.window == WINDOW


def test_a_local_deduplicator_grows_in_its_state_file(tmp_path):
    state = tmp_path / "s.bloom"
    pages = [f"https://shop.example/p/{i}" for i in range(60_000)]
    with Deduplicator("local", capacity=1_000, error_rate=0.01, state=str(state), ttl_days=0) as dedup:
        won = sum(sum(dedup.claim_many(pages[i : i + 5_000])) for i in range(0, len(pages), 5_000))
        assert dedup.local_filter.grown
    assert won >= len(pages) * (1 - 0.01)
    with Deduplicator("local", capacity=1_000, error_rate=0.01, state=str(state), ttl_days=0) as dedup:
        assert not any(dedup.claim_many(pages[::7]))


@pytest.mark.slow
def test_done_means_capacity_10000_fed_a_million_pages(tmp_path):
    # The bar: at least (1 - error_rate) of a million distinct pages won, and the files
    # reopen with the same answers.
    state = tmp_path / "s.bloom"
    pages = [f"https://shop.example/p/{i}" for i in range(1_000_000)]
    with Deduplicator("local", capacity=10_000, error_rate=0.01, state=str(state), ttl_days=0) as dedup:
        won = sum(sum(dedup.claim_many(pages[i : i + 10_000])) for i in range(0, len(pages), 10_000))
        probe = pages[::13] + [f"https://other.example/{i}" for i in range(50_000)]
        answers = dedup.local_filter.contains_many(probe)
    assert won >= 1_000_000 * (1 - 0.01)
    with bloom.open_filter(state) as reopened:
        assert (reopened.contains_many(probe) == answers).all()


GROWER = textwrap.dedent("""
    import os, signal, sys
    from crawldedup import bloom
    from crawldedup.bloom import storage
    from crawldedup.bloom.growing import GrowingFilter

    path, run, crash = sys.argv[1:4]
    if crash == "before-count":      # the stage file is in place, the header does not count it yet
        write_header = storage.BloomFile.write_header
        def killed(self, header):
            if header.stages > self.header.stages:
                os.kill(os.getpid(), signal.SIGKILL)
            write_header(self, header)
        storage.BloomFile.write_header = killed
    elif crash == "before-rename":   # the stage file is complete under its temporary name
        storage._move_into_place = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    bf = GrowingFilter(bloom.open_filter_file(path, "r+"))
    for i in range(10**9):
        bf.add_many([f"https://{run}.example/{i}/{j}" for j in range(2_000)])
        print(i, flush=True)
""")


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
@pytest.mark.parametrize("kind", ["plain", "windowed"])
def test_a_sigkill_during_growth_keeps_every_claim(kind, tmp_path):
    path = tmp_path / "g.bloom"
    if kind == "plain":
        bloom.BloomFilter(3_000, 0.01, path).close()
    else:  # the system clock: a 30-day window forgets nothing during the test
        bloom.WindowedBloomFilter(3_000, 0.01, WINDOW, path).close()
    runs = [("before-rename", None), ("before-count", None), ("random", 0.2), ("random", 0.5)]
    for run, (crash, delay) in enumerate(runs):
        child = subprocess.Popen(
            [sys.executable, "-c", GROWER, str(path), f"r{run}", crash],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert child.stdout is not None
        first = child.stdout.readline()
        if delay is not None:
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL
        done = [int(line) for line in (first + out).split()]
        with bloom.open_filter(path, "r+") as reopened:
            claimed = [f"https://r{run}.example/{i}/{j}" for i in done for j in range(2_000)]
            assert done and reopened.contains_many(claimed).all(), crash
            stages = len(reopened.stages()) if isinstance(reopened, GrowingFilter) else 1
        # Killed at a growth: the next add grows, replacing an orphan stage file left behind.
        with GrowingFilter(bloom.open_filter_file(path, "r+")) as again:
            # New keys meet a filter whose stages together answer up to 1% falsely: 20 expected
            # of 2,000, so the bound leaves four standard deviations above that.
            assert again.add_many(keys(f"after{run}", 2_000)).sum() >= 2_000 - 20 - 4 * 5
            assert again.contains_many(keys(f"after{run}", 2_000)).all()
            assert crash == "random" or len(again.stages()) == stages + 1
