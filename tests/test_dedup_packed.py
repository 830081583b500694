"""A batch prepared in another process arrives packed (crawldedup.dedup.packed): its canonical
URLs read the same as the batch's own lists, whichever way they are read, and claiming it wins
and strands the same pages."""

from __future__ import annotations

import pickle
from itertools import compress
from pathlib import Path
from typing import List

import numpy as np
import pytest

from crawldedup.dedup import Deduplicator, prepare_batch
from crawldedup.dedup.packed import PackedCanonical, PackedURLs, pick

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

URLS = [
    "https://Shop.example/a?b=2&a=1",
    "not a url",
    "https://bücher.example/buch/5#top",
    "mailto:x@y.example",
    "https://shop.example/a?a=1&b=2",
    "http://[::1]:8080/x/../y",
    "",
    "https://shop.example/%7Euser/ü?q=ä",
]


def _sent(urls: List[str]):
    """A batch as prepare_batch makes it, and as it arrives from another process."""
    prepared = prepare_batch(urls)
    return prepared, pickle.loads(pickle.dumps(prepared, protocol=pickle.HIGHEST_PROTOCOL))


def test_a_packed_batch_reads_as_the_lists_it_was_made_of() -> None:
    made, arrived = _sent(URLS)
    assert isinstance(arrived.valid, PackedURLs) and isinstance(arrived.canonical, PackedCanonical)
    assert list(arrived.canonical) == made.canonical and list(arrived.valid) == made.valid
    assert len(arrived.canonical) == len(URLS) and len(arrived.valid) == len(made.valid) == 5
    assert [arrived.canonical[i] for i in range(len(URLS))] == made.canonical
    assert [arrived.canonical[i] for i in range(-len(URLS), 0)] == made.canonical
    assert [arrived.valid[row] for row in range(len(made.valid))] == made.valid
    assert arrived.valid[-1] == made.valid[-1] and arrived.canonical[2:6] == made.canonical[2:6]
    assert arrived.valid[1:3] == made.valid[1:3]
    assert sorted(arrived.errors) == sorted(made.errors) == [1, 3, 6]
    assert np.array_equal(arrived.hashes, made.hashes) and np.array_equal(arrived.positions, made.positions)
    with pytest.raises(IndexError):
        arrived.valid[len(made.valid)]
    with pytest.raises(IndexError):
        arrived.canonical[len(URLS)]
    again = pickle.loads(pickle.dumps(arrived))  # sent on once more: the same bytes
    assert list(again.canonical) == made.canonical


@pytest.mark.parametrize("rows", [[], [3], [0, 4], [4, 0, 2], [0, 1, 2, 3, 4]])
def test_picking_rows_makes_the_same_strings_one_by_one_or_all_at_once(rows: List[int]) -> None:
    made, arrived = _sent(URLS)
    wanted = [made.valid[row] for row in rows]
    assert pick(arrived.valid, np.array(rows, dtype=np.intp)) == wanted  # few: one by one
    assert pick(made.valid, np.array(rows, dtype=np.intp)) == wanted
    arrived.valid.strings()  # once split, picked from the strings
    assert pick(arrived.valid, np.array(rows, dtype=np.intp)) == wanted


def test_an_empty_batch_and_one_of_refused_urls_pack() -> None:
    for urls in ([], ["nope", "mailto:a@b.example"]):
        made, arrived = _sent(urls)
        assert list(arrived.canonical) == made.canonical and list(arrived.valid) == made.valid == []
        assert pick(arrived.valid, np.zeros(0, dtype=np.intp)) == []


def test_a_packed_batch_is_claimed_as_the_batch_it_was_made_of(tmp_path: Path) -> None:
    urls = [f"https://shop.example/p/{i % 700}?utm_source=x" for i in range(2_000)] + URLS
    results = []
    for packed in (False, True):
        with Deduplicator(state=tmp_path / f"{packed}.bloom", capacity=10_000) as dedup:
            dedup.claim_batch(urls[:300])  # some pages seen before
            made, arrived = _sent(urls)
            held = dedup.hold_prepared(arrived if packed else made)
            winners = held.won_canonical()
            assert winners == list(compress(held.canonical, held.won))
            assert list(held.canonical) == made.canonical
            held.commit()
            results.append(winners)
            assert dedup.claim_batch(urls).won == [False] * len(urls)
    assert results[0] == results[1] and len(results[0]) == 400 + 4
