"""NearDuplicateIndex: answers equal a brute-force scan, files round-trip, bad files are refused."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from crawldedup.content import DEFAULT_CONTENT_POLICY, IndexFileError, NearDuplicateIndex
from crawldedup.content.index import blocks, popcount
from crawldedup.content.index_format import INDEX_HEADER_BYTES, IndexHeader

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

DATA = Path(__file__).parent / "data"


def _random(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)


def _flip(values: np.ndarray, bits: int, seed: int) -> np.ndarray:
    """Each value with ``bits`` distinct random bits flipped."""
    rng = np.random.default_rng(seed)
    out = values.copy()
    for i in range(len(out)):
        for bit in rng.choice(64, size=bits, replace=False):
            out[i] ^= np.uint64(1) << np.uint64(int(bit))
    return out


def _brute_force(stored: np.ndarray, queries: np.ndarray, k: int) -> set:
    found = set()
    for q, value in enumerate(queries):
        distance = popcount(stored ^ value)
        found.update((q, int(i), int(distance[i])) for i in np.flatnonzero(distance <= k))
    return found


STORED = _random(100_000, 1)
# Near neighbours of stored fingerprints at every distance up to 4, and unrelated queries.
QUERIES = np.concatenate([_flip(STORED[i * 60 : (i + 1) * 60], i, seed=i) for i in range(5)] + [_random(200, 2)])


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_queries_equal_a_brute_force_scan(k):
    index = NearDuplicateIndex(max_distance=k)
    for part in np.array_split(STORED, [1, 1000, 1500, 40_000, 70_000]):  # runs of uneven sizes, merged
        index.add_many(part)
    found = index.query_many(QUERIES)
    rows = set(zip(found.query.tolist(), found.ids.tolist(), found.distance.tolist()))
    assert len(rows) == len(found.query)  # one row per (query, match)
    expected = _brute_force(STORED, QUERIES, k)
    assert rows == expected and len(expected) >= 60 * (k + 1)


def test_rows_are_sorted_and_a_match_found_in_every_block_counts_once():
    index = NearDuplicateIndex()
    index.add_many([5, 5, 7, 2**64 - 1])
    found = index.query_many([2**64 - 1, 5])
    assert found.query.tolist() == [0, 1, 1, 1] and found.ids.tolist() == [3, 0, 1, 2]
    assert found.distance.tolist() == [0, 0, 0, 1]
    assert index.query(4) == [(0, 1), (1, 1), (2, 2)]


def test_blocks_cover_the_64_bits():
    for k in range(8):
        layout = blocks(k)
        assert len(layout) == k + 1 and sum(w for _, w in layout) == 64
        assert [o for o, _ in layout] == [sum(w for _, w in layout[:t]) for t in range(k + 1)]


def test_add_many_returns_consecutive_ids():
    index = NearDuplicateIndex()
    assert index.add_many([1, 2]).tolist() == [0, 1]
    assert index.add_many(np.array([3], dtype=np.uint64)).tolist() == [2]
    assert index.add_many([]).tolist() == [] and len(index) == 3


def test_a_file_round_trips(tmp_path):
    path = tmp_path / "pages.simidx"
    with NearDuplicateIndex(3, path) as index:
        index.add_many(STORED[:5000])
        index.flush()
        index.add_many(STORED[5000:6000])
    expected = _brute_force(STORED[:6000], QUERIES[:300], 3)
    with NearDuplicateIndex.open(path) as reader:
        assert len(reader) == 6000 and reader.max_distance == 3
        found = reader.query_many(QUERIES[:300])
        assert set(zip(found.query.tolist(), found.ids.tolist(), found.distance.tolist())) == expected
        with pytest.raises(ValueError, match="read-only"):
            reader.add_many([1])
    with NearDuplicateIndex(3, path) as again:  # an existing file is opened, ids go on
        assert again.add_many([STORED[0]]).tolist() == [6000]
        assert again.query(int(STORED[0])) == [(0, 0), (6000, 0)]
    assert path.stat().st_size == INDEX_HEADER_BYTES + 6001 * 48
    assert [p.name for p in tmp_path.iterdir()] == ["pages.simidx"]  # no temporary file left


def test_adds_reach_the_file_on_flush(tmp_path):
    path = tmp_path / "i.simidx"
    writer = NearDuplicateIndex(2, path)
    writer.add_many([10, 20])
    assert len(NearDuplicateIndex.open(path)) == 0
    writer.flush()
    assert len(NearDuplicateIndex.open(path)) == 2
    writer.close()
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.query_many([1])


def test_an_existing_file_of_another_distance_or_policy_is_refused(tmp_path):
    from crawldedup.content import ContentPolicy

    path = tmp_path / "i.simidx"
    NearDuplicateIndex(3, path).close()
    with pytest.raises(ValueError, match=f"{path}: holds an index of max_distance 3"):
        NearDuplicateIndex(2, path)
    with pytest.raises(ValueError, match="policy"):
        NearDuplicateIndex(3, path, policy=ContentPolicy(shingle_words=3))


def test_the_frozen_file_reads_and_is_rebuilt_byte_for_byte(tmp_path):
    """If this breaks, the index file format changed: decide on purpose (bump INDEX_FORMAT_VERSION)."""
    frozen = DATA / "index-v1.simidx"
    fingerprints = [int(line, 16) for line in (DATA / "index-v1-fingerprints.txt").read_text().split()]
    header = IndexHeader.unpack(frozen.read_bytes()[:INDEX_HEADER_BYTES], str(frozen), frozen.stat().st_size)
    assert (header.max_distance, header.count, header.policy_digest) == (3, 14, DEFAULT_CONTENT_POLICY.digest)
    with NearDuplicateIndex.open(frozen) as index:
        assert len(index) == len(fingerprints) and index.max_distance == 3
        for i, value in enumerate(fingerprints):
            assert (i, 0) in index.query(value)
    with NearDuplicateIndex(3, tmp_path / "again.simidx") as again:
        again.add_many(fingerprints)
    assert (tmp_path / "again.simidx").read_bytes() == frozen.read_bytes()


def _index_file(tmp_path) -> Path:
    path = tmp_path / "good.simidx"
    with NearDuplicateIndex(3, path) as index:
        index.add_many(STORED[:100])
    return path


def _repacked(page: bytes, offset: int, value: bytes) -> bytes:
    """The header page with ``value`` at ``offset`` and a valid checksum again."""
    page = page[:offset] + value + page[offset + len(value) : INDEX_HEADER_BYTES - 4]
    return page + struct.pack("<I", zlib.crc32(page))


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: b"", "empty file"),
        (lambda d: b"<html>" + d[6:], "bad magic"),
        (lambda d: d[:100], "truncated header"),
        (lambda d: d[:-12], "truncated tables"),
        (lambda d: d + b"\0", "trailing bytes"),
        (lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:], "corrupted header: checksum"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "corrupted tables: checksum"),
        (lambda d: _repacked(d, 8, struct.pack("<I", 2)) + d[INDEX_HEADER_BYTES:], "format version 2 is newer"),
        (lambda d: _repacked(d, 20, struct.pack("<I", 9)) + d[INDEX_HEADER_BYTES:], "max_distance must be in"),
    ],
)
def test_bad_files_are_refused_naming_the_file(tmp_path, damage, message):
    path = _index_file(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(IndexFileError, match=message) as caught:
        NearDuplicateIndex.open(path)
    assert str(caught.value).startswith(f"{path}: ")
    with pytest.raises(ValueError, match=message):
        NearDuplicateIndex(3, path)


def test_header_round_trips():
    header = IndexHeader(3, 12, "0123456789abcdef", 77)
    assert IndexHeader.unpack(header.pack(), "x", header.file_bytes) == header


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (5, TypeError, "got a single int"),
        ([-1], ValueError, "unsigned 64-bit"),
        (np.array([-3]), ValueError, "unsigned 64-bit"),
        ([2**64], ValueError, "unsigned 64-bit"),
        ([1.5], TypeError, "must hold ints"),
        (np.zeros((2, 2), dtype=np.uint64), ValueError, "one-dimensional"),
    ],
)
def test_bad_fingerprints_are_refused(bad, error, message):
    index = NearDuplicateIndex()
    with pytest.raises(error, match=message):
        index.add_many(bad)
    with pytest.raises(error, match=message):
        index.query_many(bad)


@pytest.mark.parametrize("k, error", [(-1, ValueError), (8, ValueError), (3.0, TypeError), (True, TypeError)])
def test_max_distance_is_checked(k, error):
    with pytest.raises(error, match="max_distance"):
        NearDuplicateIndex(k)


def test_open_checks_its_mode(tmp_path):
    with pytest.raises(ValueError, match="mode must be"):
        NearDuplicateIndex.open(_index_file(tmp_path), mode="w")
