"""A batch's fingerprints keep one form, the (n, 2) uint64 array, until a store's wire format needs bytes."""

from __future__ import annotations

import numpy as np
import pytest

from crawldedup.dedup.pipeline import first_rows
from crawldedup.fingerprints import Fingerprints, fingerprint, hash_many

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

URLS = [f"https://shop.example/item/{i}" for i in range(50)]


def test_bytes_and_arrays_are_the_same_fingerprints() -> None:
    hashes = hash_many(URLS)
    fps = Fingerprints(hashes)
    assert fps.as_bytes() == [fingerprint(u) for u in URLS]
    assert np.array_equal(Fingerprints.of(fps.as_bytes()).hashes, hashes)
    assert Fingerprints.of(fps) is fps
    assert fps.tobytes() == b"".join(fingerprint(u) for u in URLS)
    assert np.array_equal(fps.first_halves, hashes[:, 0])
    assert fps.take([3, 1]).as_bytes() == [fingerprint(URLS[3]), fingerprint(URLS[1])]
    assert len(fps + fps.take([0])) == 51


@pytest.mark.parametrize(
    "items, error",
    [
        (["not bytes"], TypeError),
        ([b"short"], ValueError),
    ],
)
def test_fingerprints_from_bad_items_are_refused(items: list, error: type) -> None:
    with pytest.raises(error, match="fingerprints must be"):
        Fingerprints.of(items)


def test_an_array_of_another_shape_or_type_is_refused() -> None:
    with pytest.raises(TypeError, match="uint64"):
        Fingerprints(np.zeros((3, 2), dtype=np.int64))
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        Fingerprints(np.zeros((3, 3), dtype=np.uint64))


def test_first_rows_keeps_the_first_row_of_each_fingerprint_in_row_order() -> None:
    pages = [7, 3, 7, 9, 3, 3, 1, 9]
    hashes = hash_many([URLS[p] for p in pages])
    rows = np.arange(len(pages))
    found = first_rows(hashes, rows)
    assert found.rows.tolist() == [0, 1, 3, 6]
    # Every row points at its page's first row.
    assert [int(found.rows[i]) for i in found.inverse] == [0, 1, 0, 3, 1, 1, 6, 3]
    subset = first_rows(hashes, np.array([2, 4, 5, 7]))
    assert subset.rows.tolist() == [2, 4, 7]
    assert subset.inverse.tolist() == [0, 1, 1, 2]
    assert first_rows(hashes, np.zeros(0, dtype=np.intp)).rows.tolist() == []


def test_first_rows_tells_fingerprints_apart_by_both_halves() -> None:
    distinct = np.array([[5, 1], [2, 1], [9, 1], [7, 7], [3, 1]], dtype=np.uint64)
    found = first_rows(distinct, np.array([4, 0, 2]))
    assert (found.rows.tolist(), found.inverse.tolist()) == ([4, 0, 2], [0, 1, 2])
    # Equal first halves, different second ones: different fingerprints.
    shared = np.array([[5, 1], [5, 2], [5, 1], [2, 2]], dtype=np.uint64)
    found = first_rows(shared, np.arange(4))
    assert (found.rows.tolist(), found.inverse.tolist()) == ([0, 1, 3], [0, 1, 0, 2])
