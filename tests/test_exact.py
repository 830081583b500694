"""The exact tier: a Bloom filter in front of sorted runs. Answers against a Python set over random
streams (repeats, restarts, spills, merges, windows), both twins' kernels and files, kills at
every step of a change, damaged files named, one writer."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List, Set

import numpy as np
import pytest

from crawldedup import exact
from crawldedup.exact import ExactFileError, PyExactFilter, _runs_py
from crawldedup.exact import format as fmt
from crawldedup.exact.store import FANOUT, size_class
from crawldedup.windows import ManualClock, Window

pytestmark = pytest.mark.twins

TWINS = [pytest.param(PyExactFilter, id="py")]
KERNEL_TWINS = [pytest.param(_runs_py, id="py")]
if exact.HAS_EXTENSION:
    from crawldedup.exact import _runs_c

    TWINS.append(pytest.param(exact.ExactFilter, id="cy", marks=pytest.mark.cython))
    KERNEL_TWINS.append(pytest.param(_runs_c, id="cy", marks=pytest.mark.cython))
DAY = 86_400.0
START = 1_800_000_000.0


@pytest.fixture(params=TWINS)
def exact_cls(request: pytest.FixtureRequest) -> type:
    return request.param


@pytest.fixture(params=KERNEL_TWINS)
def kernels(request: pytest.FixtureRequest):
    return request.param


def fingerprints(ids: np.ndarray) -> np.ndarray:
    """Distinct ``(h1, h2)`` rows for integer ids (splitmix64 of each id, twice)."""

    def mix(x: np.ndarray) -> np.ndarray:
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))

    ids = np.asarray(ids, dtype=np.uint64)
    return np.stack([mix(ids), mix(ids ^ np.uint64(0xDEADBEEF))], axis=1)


def expected(model: Set[int], ids: np.ndarray) -> List[bool]:
    """What a claim of ``ids`` answers against ``model`` (a set), learning them."""
    answers = []
    for key in ids.tolist():
        answers.append(key not in model)
        model.add(key)
    return answers


def streams(seed: int, batches: int, universe: int, size: int) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    for _ in range(batches):
        yield rng.integers(0, universe, rng.integers(1, size))


# -- kernels -----------------------------------------------------------------------------------


def encoded(kernels, keys: np.ndarray):
    prefix = fmt.prefix_bits(len(keys))
    index = np.zeros((1 << prefix) + 1, dtype=np.uint64)
    stream = np.zeros(fmt.stream_bytes(len(keys), prefix), dtype=np.uint8)
    kernels.encode_run(keys, prefix, index, stream)
    return index, stream, prefix


@pytest.mark.parametrize("count", [1, 2, 7, 8, 9, 63, 64, 65, 4095, 4096, 5000, 70_000])
def test_the_kernels_of_both_twins_sort_encode_probe_and_merge_alike(kernels, count):
    rng = np.random.default_rng(count)
    keys = rng.integers(0, 2**64, count, dtype=np.uint64, endpoint=False)
    keys[: min(count, 2)] = [0, 2**64 - 1][: min(count, 2)]  # the extremes of the key space
    ordered = kernels.sort_keys(keys)
    assert ordered.tolist() == sorted(keys.tolist())
    index, stream, prefix = encoded(kernels, ordered)
    reference = encoded(_runs_py, ordered)
    assert index.tobytes() == reference[0].tobytes() and stream.tobytes() == reference[1].tobytes()
    assert not stream[-fmt.STREAM_PADDING :].any() and int(index[-1]) == count
    assert kernels.decode_run(index, stream, prefix).tolist() == ordered.tolist()
    absent = rng.integers(0, 2**64, 500, dtype=np.uint64)
    queries = np.concatenate([keys[::2], absent, keys ^ np.uint64(1), keys + np.uint64(1)])
    assert kernels.probe_run(index, stream, prefix, queries).tolist() == np.isin(queries, keys).tolist()
    parts = [np.sort(keys[i::3]) for i in range(3) if len(keys[i::3])]
    merged_index = np.zeros_like(index)
    merged_stream = np.zeros_like(stream)
    kernels.merge_runs([encoded(kernels, part) for part in parts], prefix, merged_index, merged_stream)
    assert merged_index.tobytes() == index.tobytes() and merged_stream.tobytes() == stream.tobytes()


def test_a_run_of_clustered_keys_sorts_and_probes(kernels):
    # Keys are hashes, but a caller may give any uint64: all in one bucket, or equal top bits.
    keys = np.arange(10_000, dtype=np.uint64) * np.uint64(3) + np.uint64(2**63)
    ordered = kernels.sort_keys(keys[::-1])
    assert ordered.tolist() == keys.tolist()
    index, stream, prefix = encoded(kernels, ordered)
    queries = np.arange(2**63, 2**63 + 30_000, dtype=np.uint64)
    assert kernels.probe_run(index, stream, prefix, queries).tolist() == np.isin(queries, keys).tolist()


def test_prefix_bits_keep_buckets_of_16_to_31_keys():
    assert fmt.prefix_bits(1) == fmt.MIN_PREFIX_BITS
    for keys in (1 << 13, 10**6, 10**9, 10**10):
        assert 16 <= keys / 2 ** fmt.prefix_bits(keys) < 32
    # 1e9 keys: 39-bit suffixes and 8-byte offsets of 2**25 buckets, 5.14 bytes a key.
    assert fmt.run_file_bytes(10**9, fmt.prefix_bits(10**9)) / 10**9 == pytest.approx(5.143, abs=0.001)


# -- against a Python set ----------------------------------------------------------------------


def test_answers_equal_a_set_over_spills_merges_and_restarts(exact_cls, tmp_path):
    # A small Bloom filter at 30%: most repeats and many new keys go to the runs. Tiny buffers
    # make every batch spill and merge.
    model: Set[int] = set()
    path = tmp_path / "s.bloom"
    bloom_errors = exact_cls(300, 0.3, path, buffer_keys=50)
    for step, ids in enumerate(streams(1, 80, 3_000, 120)):
        if step % 17 == 16:  # a restart
            bloom_errors.close()
            bloom_errors = exact_cls.open(path, "r+", buffer_keys=50)
        assert bloom_errors.add_hashes(fingerprints(ids)).tolist() == expected(model, ids)
        assert len(bloom_errors) == len(model)
    probe = np.arange(4_000)
    assert bloom_errors.contains_hashes(fingerprints(probe)).tolist() == [i in model for i in probe.tolist()]
    assert len({run.generation for run in bloom_errors.runs()}) == 1
    classes: Dict[int, int] = {}
    for run in bloom_errors.runs():
        if run.path is not None:
            classes[size_class(run.keys, FANOUT)] = classes.get(size_class(run.keys, FANOUT), 0) + 1
    assert classes and all(count < FANOUT for count in classes.values())
    bloom_errors.close()


def test_a_key_repeated_in_a_batch_is_new_once_and_the_first_wins(exact_cls):
    with exact_cls(1_000, 0.01) as exact_set:
        ids = np.array([5, 6, 5, 5, 7, 6, 8])
        assert exact_set.add_hashes(fingerprints(ids)).tolist() == [True, True, False, False, True, False, True]
        again = np.array([9, 5, 9])
        assert exact_set.add_hashes(fingerprints(again)).tolist() == [True, False, False]
        assert len(exact_set) == 5


def test_two_pages_sharing_the_first_64_bits_are_one_key(exact_cls):
    # The collision budget in action: h1 is the key, so a second page with the same h1 is seen.
    with exact_cls(1_000, 0.01) as exact_set:
        rows = np.array([[7, 1], [7, 2], [8, 3]], dtype=np.uint64)
        assert exact_set.add_hashes(rows).tolist() == [True, False, True]


def test_str_keys_and_the_api_of_the_bloom_filter(exact_cls, tmp_path):
    with exact_cls(1_000, 0.01, tmp_path / "k.bloom") as exact_set:
        assert exact_set.add("https://a.example/")
        assert not exact_set.add("https://a.example/")
        assert "https://a.example/" in exact_set and "https://b.example/" not in exact_set
        assert exact_set.add_many(["x", "y", "x"]).tolist() == [True, True, False]
        exact_set.update(f"u{i}" for i in range(100))
        assert exact_set.contains_many(["u1", "u99", "v1"]).tolist() == [True, True, False]
        assert len(exact_set) == exact_set.approx_items == 103
        assert exact_set.nbytes > exact_set.bloom.num_bits // 8
    with pytest.raises(ValueError, match="closed"):
        exact_set.add("z")
    reader = exact_cls.open(tmp_path / "k.bloom", "r")
    assert "u5" in reader and len(reader) == 103
    with pytest.raises(OSError, match="read-only"):
        reader.add("z")
    reader.close()


def test_in_memory_it_spills_into_memory_and_answers_the_same(exact_cls):
    model: Set[int] = set()
    with exact_cls(200, 0.2, buffer_keys=40) as exact_set:
        for ids in streams(2, 40, 2_000, 100):
            assert exact_set.add_hashes(fingerprints(ids)).tolist() == expected(model, ids)
        assert exact_set.directory is None and all(run.path is None for run in exact_set.runs())
        assert len(exact_set.runs()) > 1


def test_it_grows_its_bloom_filter_past_capacity_and_stays_exact(exact_cls, tmp_path):
    model: Set[int] = set()
    with exact_cls(100, 0.01, tmp_path / "g.bloom", buffer_keys=500) as exact_set:
        for ids in streams(3, 30, 5_000, 400):
            assert exact_set.add_hashes(fingerprints(ids)).tolist() == expected(model, ids)
        assert exact_set.grown and len(exact_set.stages()) > 1
    with exact_cls.open(tmp_path / "g.bloom", "r") as reader:
        probe = np.arange(6_000)
        assert reader.contains_hashes(fingerprints(probe)).tolist() == [i in model for i in probe.tolist()]


def test_merge_makes_one_run_and_union_adds_another_sets_keys(exact_cls, tmp_path):
    first = exact_cls(5_000, 0.01, tmp_path / "a.bloom", buffer_keys=64)
    second = exact_cls(5_000, 0.01, tmp_path / "b.bloom", buffer_keys=64)
    first.add_hashes(fingerprints(np.arange(0, 1_000)))
    second.add_hashes(fingerprints(np.arange(500, 2_000)))
    first.merge()
    assert [run.keys for run in first.runs()] == [1_000]
    first.union(second)
    assert len(first) == 2_000
    assert first.contains_hashes(fingerprints(np.arange(2_100))).tolist() == [i < 2_000 for i in range(2_100)]
    assert first.add_hashes(fingerprints(np.array([1_999, 2_000]))).tolist() == [False, True]
    first.close()
    second.close()


# -- windows -----------------------------------------------------------------------------------


def test_with_a_window_keys_are_forgotten_generation_by_generation(exact_cls, tmp_path):
    window = Window(4 * DAY, 4)
    clock = ManualClock(START)
    path = tmp_path / "w.bloom"
    exact_set = exact_cls(2_000, 0.2, path, window=window, clock=clock, buffer_keys=30)
    claimed: Dict[int, int] = {}  # id -> the generation of its claim

    def alive(key: int, now: int) -> bool:
        return key in claimed and claimed[key] >= now - window.generations

    for step, ids in enumerate(streams(4, 60, 1_500, 60)):
        if step % 7 == 6:
            clock.advance(window.span * 0.6)
        if step % 23 == 22:
            exact_set.close()
            exact_set = exact_cls.open(path, "r+", clock=clock, buffer_keys=30)
        now = window.generation(clock())
        wanted = []
        for key in ids.tolist():
            fresh = not alive(key, now)
            wanted.append(fresh)
            if fresh:
                claimed[key] = now
        assert exact_set.add_hashes(fingerprints(ids)).tolist() == wanted
    now = window.generation(clock())
    live = {key for key in claimed if alive(key, now)}
    assert len(exact_set) == len(live)
    assert {g.generation for g in exact_set.generations()} >= {claimed[key] for key in live}
    assert min(run.generation for run in exact_set.runs()) >= now - window.generations  # forgotten: deleted
    exact_set.close()


def test_a_false_positive_of_an_old_generation_is_renewed_in_the_filter(exact_cls):
    # A tiny windowed filter is saturated by generation 0, so generation 1's keys are its false
    # positives there: the tier holds them from generation 1, and so must the filter, after
    # generation 0 is forgotten.
    window = Window(4 * DAY, 4)
    clock = ManualClock(START)
    with exact_cls(10, 0.5, window=window, clock=clock) as exact_set:
        exact_set.add_hashes(fingerprints(np.arange(0, 400)))
        clock.advance(window.span)
        later = fingerprints(np.arange(1_000, 1_300))
        assert exact_set.add_hashes(later).all()
        clock.advance(window.span * window.generations)  # generation 0 forgotten, generation 1 still live
        assert exact_set.contains_hashes(later).all()
        assert not exact_set.add_hashes(later).any()
        assert exact_set.add_hashes(fingerprints(np.arange(0, 400))).all()


# -- both twins' bytes -------------------------------------------------------------------------


def write_state(cls: type, path: Path, window: bool) -> None:
    clock = ManualClock(START)
    options = {"window": Window(4 * DAY, 4), "clock": clock} if window else {}
    exact_set = cls(500, 0.1, path, buffer_keys=64, **options)
    for step, ids in enumerate(streams(5, 40, 2_500, 90)):
        exact_set.add_hashes(fingerprints(ids))
        if window and step % 10 == 9:
            clock.advance(DAY)
    exact_set.close()


@pytest.mark.parametrize("window", [False, True], ids=["plain", "windowed"])
def test_both_twins_write_the_same_files(window, tmp_path):
    twins = [PyExactFilter] + ([exact.ExactFilter] if exact.HAS_EXTENSION else [])
    contents = []
    for number, cls in enumerate(twins):
        folder = tmp_path / str(number)
        folder.mkdir()
        write_state(cls, folder / "s.bloom", window)
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        contents.append({str(p.relative_to(folder)): p.read_bytes() for p in files})
    assert len(contents[0]) > 4
    assert all(found == contents[0] for found in contents[1:])


def test_the_frozen_example_opens_with_its_answers(exact_cls, tmp_path):
    # tests/data/exact-v1/ was written by tests/data/make_exact_v1.py; a reader of version 1 must
    # always read it, and a writer must still write its bytes.
    data = Path(__file__).parent / "data"
    with exact_cls.open(data / "exact-v1" / "s.bloom", "r") as frozen:
        urls = [f"https://shop.example/item/{i}?ref=exact-v1" for i in range(3_000)]
        assert frozen.contains_many(urls).tolist() == [i % 3 == 0 for i in range(3_000)]
        assert len(frozen) == 1_000 and len(frozen.runs()) > 2
    folder = tmp_path / "again"
    folder.mkdir()
    subprocess.run([sys.executable, str(data / "make_exact_v1.py"), str(folder)], check=True)
    for file in (data / "exact-v1").rglob("*"):
        if file.is_file():
            assert (folder / file.relative_to(data / "exact-v1")).read_bytes() == file.read_bytes(), file.name


# -- damage ------------------------------------------------------------------------------------


def flushed_state(cls: type, path: Path) -> List[Path]:
    exact_set = cls(2_000, 0.01, path, buffer_keys=100)
    exact_set.add_hashes(fingerprints(np.arange(1_000)))
    exact_set.close()
    return sorted(Path(f"{path}.exact").glob("run-*.run"))


def test_a_truncated_or_flipped_run_is_named(exact_cls, tmp_path):
    path = tmp_path / "d.bloom"
    runs = flushed_state(exact_cls, path)
    victim = runs[0]
    data = bytearray(victim.read_bytes())
    data[-20] ^= 0x10
    victim.write_bytes(bytes(data))
    with pytest.raises(ExactFileError, match=f"{victim.name}: corrupted run: checksum"):
        exact_cls.open(path, "r")
    victim.write_bytes(bytes(data[:-100]))
    with pytest.raises(ExactFileError, match=f"{victim.name}: truncated run"):
        exact_cls.open(path, "r")
    victim.unlink()
    with pytest.raises(ExactFileError, match=f"{victim.name}: missing"):
        exact_cls.open(path, "r+")


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda p: p.write_bytes(b""), "truncated manifest"),
        (lambda p: p.write_bytes(p.read_bytes()[:-1] + bytes([p.read_bytes()[-1] ^ 1])), "corrupted manifest"),
        (lambda p: p.write_bytes(b"CDDEXMAN" + bytes([9]) + p.read_bytes()[9:]), "newer than this crawldedup"),
        (lambda p: p.write_bytes(b"GARBAGE!" * 20), "not a crawldedup exact manifest"),
        (lambda p: p.unlink(), "missing"),
    ],
    ids=["empty", "checksum", "newer", "foreign", "missing"],
)
def test_a_damaged_manifest_is_named(exact_cls, tmp_path, damage, problem):
    path = tmp_path / "m.bloom"
    flushed_state(exact_cls, path)
    damage(Path(f"{path}.exact") / "MANIFEST")
    with pytest.raises(ExactFileError, match=problem):
        exact_cls.open(path, "r+")


def test_a_run_lost_to_a_power_loss_before_any_flush_is_dropped_not_read(exact_cls, tmp_path, caplog):
    # Runs spilled since the last flush are not durable: a power loss may take them. The tier
    # opens without them (their pages may be won again), and never answers from a bad file.
    path = tmp_path / "p.bloom"
    exact_set = exact_cls(5_000, 0.01, path, buffer_keys=100)
    exact_set.add_hashes(fingerprints(np.arange(300)))
    exact_set.flush()
    exact_set.add_hashes(fingerprints(np.arange(300, 1_000)))
    new_runs = [Path(run.path) for run in exact_set.runs() if run.path and not run.durable]
    assert new_runs
    snapshot = {p: p.read_bytes() for p in Path(f"{path}.exact").iterdir()}
    exact_set.close()
    for file, content in snapshot.items():  # the state as the kill left it, then a torn run
        file.write_bytes(content)
    damaged = new_runs[-1]
    damaged.write_bytes(damaged.read_bytes()[:5_000])
    with caplog.at_level(logging.WARNING, logger="crawldedup.exact"):
        reopened = exact_cls.open(path, "r+", buffer_keys=100)
    assert damaged.name in caplog.text and "dropped" in caplog.text
    held = reopened.contains_hashes(fingerprints(np.arange(1_200)))
    assert held[:300].all() and not held[1_000:].any()  # flushed keys kept, nothing invented
    reopened.close()


def test_a_torn_log_keeps_its_flushed_keys(exact_cls, tmp_path, caplog):
    path = tmp_path / "l.bloom"
    exact_set = exact_cls(5_000, 0.01, path, buffer_keys=10_000)
    exact_set.add_hashes(fingerprints(np.arange(100)))
    exact_set.flush()
    exact_set.add_hashes(fingerprints(np.arange(100, 200)))
    log = Path(f"{path}.exact") / "log"
    content = bytearray(log.read_bytes())
    exact_set.close()
    content[4096 + 8 * 150] ^= 0xFF  # an unflushed key torn by a power loss
    log.write_bytes(bytes(content))
    with caplog.at_level(logging.WARNING, logger="crawldedup.exact"):
        reopened = exact_cls.open(path, "r")
    assert "flushed keys are kept" in caplog.text
    assert len(reopened) == 100
    reopened.close()
    content[4096 + 8 * 50] ^= 0xFF  # a flushed one too: the log is damaged
    log.write_bytes(bytes(content))
    with pytest.raises(ExactFileError, match="corrupted log"):
        exact_cls.open(path, "r")


def test_another_window_or_no_tier_is_refused(exact_cls, tmp_path):
    path = tmp_path / "x.bloom"
    flushed_state(exact_cls, path)
    manifest = Path(f"{path}.exact") / "MANIFEST"
    os.rename(Path(f"{path}.exact"), tmp_path / "elsewhere")
    with pytest.raises(ExactFileError, match="has no exact tier beside it"):
        exact_cls.open(path, "r+")
    os.rename(tmp_path / "elsewhere", Path(f"{path}.exact"))
    assert manifest.exists()
    windowed = tmp_path / "y.bloom"
    exact_cls(100, 0.01, windowed, window=Window(DAY, 2)).close()
    os.rename(Path(f"{windowed}.exact"), tmp_path / "y-tier")
    os.rename(Path(f"{path}.exact"), Path(f"{windowed}.exact"))
    with pytest.raises(ExactFileError, match="made for no recrawl window, opened with 1 days"):
        exact_cls.open(windowed, "r+")


# -- writers -----------------------------------------------------------------------------------


def test_one_writer_at_a_time_and_readers_see_a_snapshot(exact_cls, tmp_path):
    path = tmp_path / "o.bloom"
    writer = exact_cls(1_000, 0.01, path)
    writer.add_hashes(fingerprints(np.arange(10)))
    with pytest.raises(BlockingIOError, match="open for writing by another process"):
        exact_cls.open(path, "r+")
    reader = exact_cls.open(path, "r")
    assert len(reader) == 10
    reader.close()
    writer.close()
    exact_cls.open(path, "r+").close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_may_not_write_its_parents_tier(exact_cls, tmp_path):
    writer = exact_cls(1_000, 0.01, tmp_path / "f.bloom")
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover  (runs in the child)
        try:
            writer.add_hashes(fingerprints(np.arange(5)))
            os.write(write, b"wrote")
        except BlockingIOError:
            os.write(write, b"refused")
        os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read, 16) == b"refused"
    assert writer.add_hashes(fingerprints(np.arange(5))).all()
    writer.close()


# -- kills -------------------------------------------------------------------------------------

KILLER = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    from test_exact import fingerprints, streams
    from crawldedup import exact
    from crawldedup.exact import runs, store
    cls = exact.PyExactFilter if {python} else exact.ExactFilter
    point, nth = {point!r}, {nth}
    calls = [0]
    def die_on(module, name):
        real = getattr(module, name)
        def dying(*args, **kwargs):
            calls[0] += 1
            if calls[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
            result = real(*args, **kwargs)
            return result
        setattr(module, name, dying)
    if point == "rename":
        die_on(runs.os, "replace")
    elif point == "manifest":
        die_on(store, "replace_file")
    elif point == "reset":
        from crawldedup.exact import log
        die_on(log.Log, "reset")
    path = {path!r}
    exact_set = cls.open(path, "r+", buffer_keys=40) if os.path.exists(path) else cls(300, 0.2, path, buffer_keys=40)
    for step, ids in enumerate(streams(9, 200, 3_000, 60)):
        if step < {skip}:
            continue
        new = exact_set.add_hashes(fingerprints(ids))
        sys.stdout.write(f"{{step}} {{''.join('1' if n else '0' for n in new)}}\\n")
        sys.stdout.flush()
    """
)


@pytest.mark.parametrize("point", ["rename", "manifest", "reset"])
def test_a_kill_at_any_step_of_a_spill_or_merge_keeps_every_answer(exact_cls, tmp_path, point):
    # Kill the writer at the n-th run rename, manifest replacement or log reset (the steps of a
    # spill and a merge), reopen, go on: the answers of the whole stream equal a set's.
    path = tmp_path / "k.bloom"
    model: Set[int] = set()
    batches = list(streams(9, 200, 3_000, 60))
    step = 0
    for nth in (2, 5, 11):
        script = KILLER.format(
            tests=str(Path(__file__).parent),
            python=exact_cls is PyExactFilter,
            point=point,
            nth=nth,
            path=str(path),
            skip=step,
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == -signal.SIGKILL, done.stderr
        for line in done.stdout.splitlines():
            number, answers = line.split()
            assert int(number) == step
            assert [c == "1" for c in answers] == expected(model, batches[step])
            step += 1
        # The batch in flight at the kill was not answered: a key it added may or may not be held.
        if step < len(batches):
            with exact_cls.open(path, "r") as reader:
                held = reader.contains_hashes(fingerprints(batches[step]))
            for key, is_held in zip(batches[step].tolist(), held.tolist()):
                if is_held:
                    model.add(key)
            step += 1
    with exact_cls.open(path, "r+", buffer_keys=40) as reopened:
        probe = np.arange(3_100)
        assert reopened.contains_hashes(fingerprints(probe)).tolist() == [i in model for i in probe.tolist()]
        leftovers = [p.name for p in Path(f"{path}.exact").iterdir() if p.name.endswith(".tmp")]
        assert leftovers == []
        listed = {Path(run.path).name for run in reopened.runs() if run.path}
        assert {p.name for p in Path(f"{path}.exact").glob("run-*.run")} == listed


def test_the_documented_offsets_read_the_frozen_example():
    # docs/format.md, "The exact tier", read with struct alone.
    import struct
    import zlib

    tier = Path(__file__).parent / "data" / "exact-v1" / "s.bloom.exact"
    manifest = (tier / "MANIFEST").read_bytes()
    assert manifest[:8] == b"CDDEXMAN" and struct.unpack_from("<III", manifest, 8) == (1, 64, 0)
    (runs,) = struct.unpack_from("<I", manifest, 32)
    assert len(manifest) == 56 + 48 * runs + 4
    assert struct.unpack_from("<I", manifest, len(manifest) - 4)[0] == zlib.crc32(manifest[:-4])
    total = 0
    for i in range(runs):
        sequence, generation, keys, prefix, crc, size, flags, _ = struct.unpack_from("<QqQIIQII", manifest, 56 + 48 * i)
        data = (tier / f"run-{sequence:016x}.run").read_bytes()
        assert data[:8] == b"CDDEXRUN" and len(data) == size and flags == 1 and generation == -1
        assert struct.unpack_from("<IIIIQ", data, 8) == (1, 4096, 64, prefix, keys)
        assert struct.unpack_from("<I", data, 64)[0] == crc == zlib.crc32(data[4096:])
        assert struct.unpack_from("<I", data, 4092)[0] == zlib.crc32(data[:4092])
        index = np.frombuffer(data, dtype="<u8", count=(1 << prefix) + 1, offset=4096)
        width = 64 - prefix
        stream = data[4096 + 8 * ((1 << prefix) + 1) :]
        bits = int.from_bytes(stream, "little")
        first = (int(np.searchsorted(index, 0, side="right")) - 1) << width | (bits & ((1 << width) - 1))
        assert int(index[-1]) == keys and first == int(
            exact.PY_KERNELS.decode_run(index, np.frombuffer(stream, np.uint8), prefix)[0]
        )
        total += keys
    log = (tier / "log").read_bytes()
    slots = [struct.unpack_from("<8sIIQqQQIIQI", log, 128 * s) for s in range(2)]
    state = max(slots, key=lambda slot: slot[9])
    count = state[5]
    assert state[0] == b"CDDEXLOG" and state[7] == zlib.crc32(log[4096 : 4096 + 8 * count]) and state[6] == count
    assert total + count == 1_000
