"""Behaviour of the Bloom filter, run against both twins through the ``bloom_cls`` fixture."""

from __future__ import annotations

import hashlib
import inspect
import io
import math
import os
import pydoc
import random
import sys
import threading
import time

import mmh3
import numpy as np
import pytest

import crawldedup
from crawldedup import bloom, fingerprints
from crawldedup.bloom import storage
from crawldedup.bloom.sizing import choose_shape, expected_false_positive_rate

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

HASH_FUNCTIONS = [pytest.param(fingerprints.py_hash_many, id="py")]
if fingerprints.HAS_EXTENSION:
    from crawldedup.fingerprints import _fingerprints_c

    HASH_FUNCTIONS.append(pytest.param(_fingerprints_c.hash_many, id="cy", marks=pytest.mark.cython))


def urls(prefix: str, count: int) -> list[str]:
    return [f"https://{prefix}.example/item/{i}?ref=x" for i in range(count)]


def random_keys(count: int, seed: int) -> list:
    """Random str and bytes keys: empty, ASCII, non-ASCII (up to 4-byte UTF-8), every length 0-100."""
    rng = random.Random(seed)
    alphabet = "abcXYZ019/?&=%-_.~ éü中文日本🙂\u0000\u07ff\uffff"
    keys: list = ["", b""]
    while len(keys) < count:
        length = rng.randrange(0, 101)
        if rng.random() < 0.5:
            keys.append("".join(rng.choice(alphabet) for _ in range(length)))
        else:
            keys.append(rng.randbytes(length))
    return keys


# -- hashing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("hash_many", HASH_FUNCTIONS)
def test_hash_many_equals_mmh3_on_random_inputs(hash_many):
    keys = random_keys(10_000, seed=1)
    hashes = hash_many(keys)
    expected = [mmh3.hash64(k.encode("utf-8") if isinstance(k, str) else k, signed=False) for k in keys]
    assert hashes.dtype == np.uint64 and hashes.shape == (10_000, 2)
    assert [tuple(map(int, row)) for row in hashes] == expected


@pytest.mark.parametrize("hash_many", HASH_FUNCTIONS)
def test_hash_many_accepts_every_bytes_like(hash_many):
    data = b"https://a.example/\xc3\xa9"
    keys = [data, bytearray(data), memoryview(data), memoryview(b"x" + data)[1:], data.decode("utf-8")]
    hashes = hash_many(keys)
    assert (hashes == hashes[0]).all()
    assert hash_many(iter(keys)).shape == (5, 2)
    assert hash_many([]).shape == (0, 2)


@pytest.mark.parametrize("hash_many", HASH_FUNCTIONS)
@pytest.mark.parametrize("bad", [5, None, 1.5, ["a"], object()])
def test_hash_many_rejects_other_types_naming_them(hash_many, bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        hash_many(["ok", bad])


@pytest.mark.parametrize("hash_many", HASH_FUNCTIONS)
def test_hash_many_rejects_lone_surrogates(hash_many):
    with pytest.raises(UnicodeEncodeError):
        hash_many(["a\ud800"])


def test_fingerprint_is_mmh3_hash_bytes_and_hash_many_row():
    for key in ["", "https://example.com/", "https://例え.jp/パス"]:
        digest = crawldedup.fingerprint(key)
        assert digest == mmh3.hash_bytes(key.encode("utf-8"))
        assert len(digest) == 16
        if sys.byteorder == "little":
            assert fingerprints.hash_many([key])[0].tobytes() == digest


# -- membership ---------------------------------------------------------------------------------


def test_add_returns_true_only_when_new(bloom_cls):
    bf = bloom_cls(1000, 0.01)
    assert bf.add("https://a.example/") is True
    assert bf.add("https://a.example/") is False
    assert "https://a.example/" in bf
    assert "https://b.example/" not in bf
    assert bf.approx_items == 1


def test_str_and_its_utf8_bytes_are_one_key(bloom_cls):
    bf = bloom_cls(1000, 0.01)
    bf.add("https://é.example/")
    for same in (
        b"https://\xc3\xa9.example/",
        bytearray(b"https://\xc3\xa9.example/"),
        memoryview(b"https://\xc3\xa9.example/"),
    ):
        assert same in bf
        assert bf.add(same) is False


@pytest.mark.parametrize("bad", [5, None, 2.0, ("a",)])
def test_other_types_are_type_errors_naming_the_type(bloom_cls, bad):
    bf = bloom_cls(1000, 0.01)
    name = type(bad).__name__
    with pytest.raises(TypeError, match=name):
        bf.add(bad)
    with pytest.raises(TypeError, match=name):
        bad in bf  # noqa: B015
    with pytest.raises(TypeError, match=name):
        bf.add_many(["a", "b", bad])
    with pytest.raises(TypeError, match=name):
        bf.contains_many(["a", bad])
    assert bf.approx_items == 0
    assert not bf.contains_many(["a", "b"]).any(), "a failed batch added nothing"


def test_a_bad_key_late_in_a_long_batch_adds_nothing(bloom_cls):
    # Past the first 4,096-key chunk of the compiled twin: every key is checked before any bit is set.
    keys = urls("late", 10_000)
    bf = bloom_cls(20_000, 0.01)
    with pytest.raises(TypeError, match="int"):
        bf.add_many(keys + [5])
    assert bf.approx_items == 0
    assert not bf.contains_many(keys).any(), "a failed batch added nothing"
    assert bf.add_many(keys).sum() > 9_900, "the same keys are new once the bad one is gone"


def test_no_false_negatives_and_batch_equals_single(bloom_cls):
    keys = urls("present", 20_000)
    single, batch = bloom_cls(20_000, 0.01), bloom_cls(20_000, 0.01)
    added = [single.add(k) for k in keys[:10_000]]
    assert list(batch.add_many(keys[:10_000])) == added
    assert sum(added) > 9_990, "only false positives of earlier keys read as already present"
    assert batch.contains_many(keys[:10_000]).all()
    assert all(k in single for k in keys[:10_000])
    absent = keys[10_000:]
    assert list(batch.contains_many(absent)) == [k in single for k in absent]


def test_add_many_answers_as_if_added_one_after_the_other(bloom_cls):
    # A crowded filter: duplicates inside the batch and keys made "present" by earlier ones.
    keys = [f"k{i % 700}" for i in range(1_500)]
    batch, single = bloom_cls(300, 0.2), bloom_cls(300, 0.2)
    result = batch.add_many(keys)
    expected = [single.add(k) for k in keys]
    assert result.dtype == np.bool_
    assert list(result) == expected
    assert 0 < result.sum() < 700, "some keys of the batch were false positives of earlier ones"
    assert batch.approx_items == single.approx_items == sum(expected)
    assert np.array_equal(batch._file.blocks(), single._file.blocks())


def test_update_consumes_any_iterable(bloom_cls):
    bf = bloom_cls(100_000, 0.01)
    bf.update(k for k in urls("gen", 70_000))  # more than one update chunk
    assert bf.contains_many(urls("gen", 70_000)).all()
    assert 69_500 < bf.approx_items <= 70_000  # keys that were false positives count once less


def test_hash_arrays_match_item_calls(bloom_cls):
    keys = urls("hashed", 5_000)
    by_items, by_hashes = bloom_cls(10_000, 0.01), bloom_cls(10_000, 0.01)
    hashes = fingerprints.hash_many(keys)
    assert list(by_hashes.add_hashes(hashes)) == list(by_items.add_many(keys))
    assert by_hashes.contains_hashes(hashes).all()
    assert np.array_equal(by_hashes._file.blocks(), by_items._file.blocks())
    assert by_hashes.contains_hashes(np.zeros((0, 2), np.uint64)).shape == (0,)


def test_hash_arrays_of_wrong_shape_or_dtype_are_rejected(bloom_cls):
    bf = bloom_cls(1000, 0.01)
    with pytest.raises(ValueError, match=r"shape \(n, 2\), got \(3,\)"):
        bf.contains_hashes(np.zeros(3, np.uint64))
    with pytest.raises(TypeError, match="float64"):
        bf.add_hashes(np.zeros((3, 2), np.float64))
    with pytest.raises(TypeError, match="int64"):
        bf.add_hashes(np.zeros((3, 2), np.int64))


# -- sizing and accuracy ------------------------------------------------------------------------


@pytest.mark.parametrize("error_rate", [0.01, 0.001])
def test_bits_per_item_within_1_2_of_the_optimum(error_rate):
    num_blocks, num_hashes = choose_shape(1_000_000, error_rate)
    bits_per_item = num_blocks * 512 / 1_000_000
    assert bits_per_item <= 1.2 * -math.log(error_rate) / math.log(2) ** 2
    assert expected_false_positive_rate(1_000_000, num_blocks, num_hashes) <= error_rate


@pytest.mark.parametrize("error_rate", [0.01, 0.001])
def test_measured_false_positive_rate_at_capacity(bloom_cls, error_rate):
    capacity = probes = 1_000_000
    bf = bloom_cls(capacity, error_rate)
    bf.update(f"https://in.example/{i}" for i in range(capacity))
    false_positives = sum(
        int(bf.contains_many([f"https://out.example/{i}" for i in range(start, start + 100_000)]).sum())
        for start in range(0, probes, 100_000)
    )
    measured = false_positives / probes
    assert measured <= error_rate
    # The exact model predicts the measurement (a wrong probe scheme would drift from it).
    model = expected_false_positive_rate(capacity, bf.num_blocks, bf.num_hashes)
    assert abs(measured - model) <= 5 * math.sqrt(model / probes) + 0.02 * model
    assert bf.estimated_error_rate == pytest.approx(model, rel=0.05)
    assert bf.approx_items >= capacity * 0.99


def test_statistics_track_the_fill(bloom_cls):
    bf = bloom_cls(10_000, 0.01)
    assert bf.fill_ratio == 0.0 and bf.estimated_error_rate == 0.0
    bf.add_many(urls("stats", 10_000))
    assert 0.3 < bf.fill_ratio < 0.7
    assert bf.estimated_error_rate < 0.01
    assert bf.num_bits == bf.num_blocks * 512
    assert bf.capacity == 10_000 and bf.error_rate == 0.01 and bf.num_hashes >= 1


@pytest.mark.parametrize(
    "capacity, error_rate, error",
    [
        (0, 0.01, ValueError),
        (-5, 0.01, ValueError),
        (10, 0.0, ValueError),
        (10, 1.0, ValueError),
        (10, float("nan"), ValueError),
        ("10", 0.01, TypeError),
        (10, "0.01", TypeError),
        (True, 0.01, TypeError),
    ],
)
def test_bad_parameters_name_the_value(bloom_cls, capacity, error_rate, error):
    with pytest.raises(error, match="capacity|error_rate"):
        bloom_cls(capacity, error_rate)


def test_metadata_is_stored_and_bounded(bloom_cls, tmp_path):
    path = tmp_path / "m.bloom"
    with bloom_cls(100, 0.01, path, metadata=b"policy=0123456789abcdef") as bf:
        assert bf.metadata == b"policy=0123456789abcdef"
    with bloom_cls.open(path) as bf:
        assert bf.metadata == b"policy=0123456789abcdef"
    with pytest.raises(ValueError, match="at most 1024 bytes, got 1025"):
        bloom_cls(100, 0.01, metadata=b"x" * 1025)
    with pytest.raises(TypeError, match="metadata must be bytes, got str"):
        bloom_cls(100, 0.01, metadata="x")


# -- life cycle ---------------------------------------------------------------------------------


def test_closed_filter_raises_like_a_closed_file(bloom_cls, tmp_path):
    bf = bloom_cls(100, 0.01, tmp_path / "c.bloom")
    bf.close()
    bf.close()  # closing twice is fine, like a file
    assert bf.closed
    calls = [
        lambda: bf.add("a"),
        lambda: "a" in bf,
        lambda: bf.add_many(["a"]),
        lambda: bf.contains_many(["a"]),
        lambda: bf.add_hashes(np.zeros((1, 2), np.uint64)),
        lambda: bf.contains_hashes(np.zeros((1, 2), np.uint64)),
        lambda: bf.approx_items,
        lambda: bf.fill_ratio,
        lambda: bf.flush(),
        lambda: bf.copy(),
        lambda: bf.capacity,
        lambda: bf.update(["a"]),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="I/O operation on closed filter"):
            call()
    assert "closed" in repr(bf)


def test_read_only_filter_refuses_writes(bloom_cls, tmp_path):
    path = tmp_path / "r.bloom"
    with bloom_cls(100, 0.01, path) as bf:
        bf.add("kept")
    before = path.read_bytes()
    with bloom_cls.open(path, "r") as bf:
        assert bf.read_only and "kept" in bf
        for write in (
            lambda: bf.add("x"),
            lambda: bf.add_many(["x"]),
            lambda: bf.update(["x"]),
            lambda: bf.add_hashes(fingerprints.hash_many(["x"])),
            lambda: bf.union(bloom_cls(100, 0.01)),
        ):
            with pytest.raises(io.UnsupportedOperation, match="read-only"):
                write()
        assert "x" not in bf
    assert path.read_bytes() == before, "opening read-only changed nothing, not even the header"


def test_open_rejects_unknown_modes(bloom_cls, tmp_path):
    path = tmp_path / "m.bloom"
    bloom_cls(100, 0.01, path).close()
    with pytest.raises(ValueError, match="mode must be 'r' or 'r\\+', got 'w'"):
        bloom_cls.open(path, "w")


def test_creating_over_a_file_needs_overwrite(bloom_cls, tmp_path):
    path = tmp_path / "o.bloom"
    with bloom_cls(100, 0.01, path) as bf:
        bf.add("old")
    with pytest.raises(FileExistsError):
        bloom_cls(100, 0.01, path)
    with bloom_cls.open(path) as bf:
        assert "old" in bf, "the failed create left the file alone"
    with bloom_cls(100, 0.01, path, overwrite=True) as bf:
        assert "old" not in bf
    assert os.listdir(tmp_path) == ["o.bloom"], "no temporary file is left behind"


def test_a_failed_create_leaves_nothing_at_the_path(bloom_cls, tmp_path, monkeypatch):
    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(storage, "_move_into_place", crash)
    with pytest.raises(OSError, match="disk full"):
        bloom_cls(1000, 0.01, tmp_path / "half.bloom")
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits and umask")
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_respect_the_umask(bloom_cls, tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        bloom_cls(100, 0.01, tmp_path / "u.bloom").close()
    finally:
        os.umask(old)
    assert (tmp_path / "u.bloom").stat().st_mode & 0o777 == mode


def test_repr_shows_the_shape_not_the_content(bloom_cls, tmp_path):
    path = tmp_path / "shape.bloom"
    with bloom_cls(1000, 0.01, path) as bf:
        bf.add("https://secret.example/")
        text = repr(bf)
        assert type(bf).__name__ in text and str(path) in text
        assert f"blocks={bf.num_blocks}" in text and f"num_hashes={bf.num_hashes}" in text and "approx_items=1" in text
        assert "secret" not in text


def test_union_of_compatible_filters(bloom_cls, tmp_path):
    left = bloom_cls(10_000, 0.01, tmp_path / "l.bloom")
    right = bloom_cls(10_000, 0.01)
    left.add_many(urls("left", 3_000))
    right.add_many(urls("right", 3_000))
    assert left.union(right) is left
    assert left.contains_many(urls("left", 3_000) + urls("right", 3_000)).all()
    assert 5_700 < left.approx_items < 6_300
    other = bloom_cls(10_000, 0.01)
    other.add("third")
    left |= other
    assert "third" in left


def test_union_across_twins_and_shape_mismatch(bloom_cls):
    left = bloom_cls(10_000, 0.01)
    right = bloom.PyBloomFilter(10_000, 0.01)
    right.add("from the python twin")
    left.union(right)
    assert "from the python twin" in left
    with pytest.raises(ValueError, match="different shapes"):
        left.union(bloom_cls(20_000, 0.01))
    with pytest.raises(ValueError, match="different shapes"):
        left.union(bloom_cls(10_000, 0.001))
    with pytest.raises(TypeError, match="set"):
        left.union({"a"})


def test_copy_is_independent(bloom_cls, tmp_path):
    original = bloom_cls(1000, 0.01, tmp_path / "a.bloom", metadata=b"m")
    original.add("shared")
    in_memory = original.copy()
    on_disk = original.copy(tmp_path / "b.bloom")
    for duplicate in (in_memory, on_disk):
        assert type(duplicate) is bloom_cls
        assert "shared" in duplicate and duplicate.metadata == b"m" and duplicate.approx_items == 1
        assert duplicate.num_blocks == original.num_blocks
    in_memory.add("only in copy")
    assert "only in copy" not in original
    on_disk.close()
    with bloom_cls.open(tmp_path / "b.bloom") as reopened:
        assert "shared" in reopened
    with pytest.raises(FileExistsError):
        original.copy(tmp_path / "b.bloom")


def test_unclean_file_recounts_approx_items(bloom_cls, tmp_path):
    path = tmp_path / "dirty.bloom"
    bf = bloom_cls(50_000, 0.01, path)
    bf.add_many(urls("dirty", 20_000))
    bf.flush()
    snapshot = tmp_path / "snapshot.bloom"
    snapshot.write_bytes(path.read_bytes())  # as a crash would leave it: header not marked clean
    bf.close()
    with bloom_cls.open(snapshot) as reopened:
        assert reopened.approx_items == pytest.approx(20_000, rel=0.03)
        assert reopened.contains_many(urls("dirty", 20_000)).all()


# -- threads ------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [True, False], ids=["add_many", "add"])
def test_concurrent_adds_of_one_key_give_exactly_one_true(bloom_cls, batch):
    keys = urls("race", 10_000)
    bf = bloom_cls(1_000_000, 0.001)  # nearly empty: no key is a false positive of another
    results: list = [None] * 16
    start = threading.Barrier(16)

    def worker(index: int) -> None:
        start.wait()
        if batch:
            results[index] = bf.add_many(keys)
        else:
            results[index] = np.array([bf.add(k) for k in keys])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wins = np.sum(results, axis=0)
    assert (wins == 1).all()
    assert bf.approx_items == 10_000


@pytest.mark.cython
@pytest.mark.skipif(not bloom.HAS_EXTENSION, reason="the compiled extension is not built")
@pytest.mark.parametrize("prehashed", [False, True], ids=["keys", "hashes"])
def test_a_large_batch_set_region_by_region_gives_the_reference_bits_and_answers(prehashed):
    """A batch large enough for the compiled twin to set its bits region by region (a filter of
    at least 256 regions of 16,384 blocks, 32 keys per region) gives the bytes and answers of
    the reference twin, which sets them in batch order: keys repeated inside the batch are new
    once, at their first place, and keys added before are not new."""
    capacity = 215_000_000
    num_blocks = choose_shape(capacity, 0.01)[0]
    regions = num_blocks // 16_384 + 1
    earlier = urls("earlier", 2_000)
    fresh = urls("regions", 32 * regions)
    batch = fresh[:5_000] + earlier[::2] + fresh[5_000:] + fresh[:3_000:3] + fresh[-100:]
    assert regions >= 256 and len(fresh) >= 32 * regions
    outcomes = []
    for cls in (bloom.PyBloomFilter, bloom.BloomFilter):
        with cls(capacity, 0.01) as bf:
            assert bf.num_blocks == num_blocks
            bf.add_many(earlier)
            new = bf.add_hashes(fingerprints.py_hash_many(batch)) if prehashed else bf.add_many(batch)
            outcomes.append((new, bf.approx_items, hashlib.sha256(bf._file.blocks()).hexdigest()))
    (reference, reference_count, reference_bits), (new, count, bits) = outcomes
    assert np.array_equal(new, reference) and count == reference_count and bits == reference_bits
    assert new.sum() == len(fresh) and new[:5_000].all() and not new[5_000:6_000].any() and not new[-1_100:].any()


@pytest.mark.cython
@pytest.mark.skipif(not bloom.HAS_EXTENSION, reason="the compiled extension is not built")
@pytest.mark.parametrize("method", ["contains_many", "add_many"])
def test_batch_calls_release_the_gil(method):
    from crawldedup.bloom._bloom_c import CBloomFilter

    bf = CBloomFilter(2_000_000, 0.01)
    keys = urls("gil", 2_000_000)
    counter = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)  # hands the GIL back at once (no forced switch below)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)  # the GIL changes hands only when released on purpose
    thread = threading.Thread(target=count)
    try:
        thread.start()
        while counter[0] == 0:
            time.sleep(0.001)
        before = counter[0]
        getattr(bf, method)(keys)
        during = counter[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(old_interval)
        thread.join()
    assert during > 0, "the counting thread never ran while the batch call worked"


def test_extension_loaded():
    if os.environ.get("CRAWLDEDUP_REQUIRE_EXTENSIONS") != "1":
        pytest.skip("set CRAWLDEDUP_REQUIRE_EXTENSIONS=1 to require the compiled extension")
    assert bloom.HAS_EXTENSION
    assert crawldedup.BloomFilter.__name__ == "CBloomFilter"


# -- documentation ------------------------------------------------------------------------------


def public_names(cls: type) -> list[str]:
    """The methods and properties a user of ``cls`` sees: public names and the ``in`` operator."""
    return sorted(name for name in dir(cls) if not name.startswith("_") or name == "__contains__")


def call_shape(function) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.cython
@pytest.mark.skipif(not bloom.HAS_EXTENSION, reason="the compiled extension is not built")
def test_compiled_filter_carries_the_reference_documentation():
    compiled, reference = crawldedup.BloomFilter, bloom.PyBloomFilter
    assert compiled is not reference
    assert public_names(compiled) == public_names(reference)
    assert compiled.__doc__ == reference.__doc__
    for name in public_names(reference):
        mine, theirs = getattr(compiled, name), getattr(reference, name)
        assert theirs.__doc__, f"{name} of the reference has no docstring"
        assert mine.__doc__ == theirs.__doc__, name
        if isinstance(theirs, property):
            continue
        assert call_shape(mine) == call_shape(theirs), name
    page = pydoc.render_doc(compiled, renderer=pydoc.plaintext)
    assert "__pyx" not in page and "cython" not in page
    assert "add(self, item: 'Any') -> 'bool'" in page


def _mapping_flags(path) -> set:
    """The VmFlags of this process's mapping of ``path`` (Linux /proc/self/smaps)."""
    flags: set = set()
    found = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if not line[0].isupper() and " " in line and not line.startswith("VmFlags"):
                found = line.rstrip().endswith(str(path))
            elif found and line.startswith("VmFlags:"):
                flags |= set(line.split()[1:])
    return flags


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="reads /proc/self/smaps (Linux)")
def test_a_bulk_load_asks_for_huge_pages_only_while_it_runs(bloom_cls, tmp_path):
    """A batch that touches most of a file's pages is advised huge pages while it sets its bits,
    and the advice is taken back after it: the bits are those of the same keys added in small
    batches, whose mapping is never advised."""
    keys = urls("bulk", 20_000)
    with (
        bloom_cls(2_000_000, 0.01, tmp_path / "bulk.bloom") as bulk,
        bloom_cls(2_000_000, 0.01, tmp_path / "small.bloom") as small,
    ):
        pages = os.path.getsize(tmp_path / "bulk.bloom") // 4096
        assert len(keys) * storage._BULK_PAGES_PER_KEY >= pages > 100 * storage._BULK_PAGES_PER_KEY
        assert pages * 4096 >= storage._HUGEPAGE_MIN_BYTES
        assert bulk.add_many(keys).all()
        for start in range(0, len(keys), 100):
            small.add_many(keys[start : start + 100])
        if hasattr(storage.mmap, "MADV_NOHUGEPAGE"):
            assert "nh" in _mapping_flags(tmp_path / "bulk.bloom")  # advised, then taken back
            assert not {"hg", "nh"} & _mapping_flags(tmp_path / "small.bloom")
        bulk.flush()
        small.flush()
    assert storage_blocks(tmp_path / "bulk.bloom") == storage_blocks(tmp_path / "small.bloom")


def storage_blocks(path) -> bytes:
    with bloom.open_filter(path) as bf:
        size = bf.num_bits // 8
    data = path.read_bytes()
    return data[len(data) - size :]
