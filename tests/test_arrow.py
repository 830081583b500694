"""The Arrow kernels give each row what canonicalize() and fingerprint() give it, under every
policy, whatever the column's layout (chunks, slices, nulls, string, large_string, string_view);
the buffer twins below them (canonicalize_buffers, hash_buffers) agree with each other."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import pytest
from conftest import required_module

from crawldedup import InvalidURL, canonicalize, fingerprint
from crawldedup.canonical import POLICIES, CanonicalPolicy, _canonical_py, canonicalize_buffers
from crawldedup.fingerprints import _fingerprints_py, hash_buffers, hash_many

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_urls import engine_urls  # noqa: E402

pa = required_module("pyarrow")
#: The kernels run on both twins' buffer paths: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins
from crawldedup.arrow import (  # noqa: E402
    FINGERPRINT_TYPE,
    canonicalize_array,
    fingerprint_array,
    fingerprint_halves,
    url_columns,
    with_url_columns,
)

ROWS = engine_urls(2000)
POLICY_LIST = [pytest.param(None, id="default"), *(pytest.param(p, id=name) for name, p in POLICIES.items())]
POLICY_LIST.append(pytest.param(CanonicalPolicy(strip_www=True, merge_schemes=True, keep_fragment=True), id="custom"))


def expected(url: Optional[str], base: Optional[str], policy) -> Tuple[Optional[str], Optional[str]]:
    if url is None:
        return None, None
    try:
        return canonicalize(url, base=base, policy=policy), None
    except InvalidURL as exc:
        return None, str(exc)


def layout(urls: List[Optional[str]], bases: List[Optional[str]]):
    """(urls, bases) as Arrow data: return the raw pieces, encoded."""
    raw = [(u or "").encode("utf-8", "surrogatepass") for u in urls]
    offsets = np.cumsum([0, *map(len, raw)]).astype(np.int64)
    return offsets, b"".join(raw)


def runs_of(bases: List[Optional[str]]) -> List[Tuple[int, Optional[str]]]:
    runs: List[Tuple[int, Optional[str]]] = []
    for row, base in enumerate(bases):
        if runs and runs[-1][1] == base:
            runs[-1] = (row + 1, base)
        else:
            runs.append((row + 1, base))
    return runs


@pytest.mark.parametrize("policy", POLICY_LIST)
def test_buffer_twins_agree_row_by_row_with_canonicalize(policy):
    rows = [(u, b) for u, b in ROWS if u is not None]
    urls, bases = [u for u, _ in rows], [b for _, b in rows]
    offsets, data = layout(urls, bases)
    runs = runs_of(bases)
    got = canonicalize_buffers(offsets, data, runs, policy)
    reference = _canonical_py.canonicalize_buffers(offsets, data, runs, policy)
    assert list(got[0]) == list(reference[0]) and got[1] == reference[1]
    assert {row: str(e) for row, e in got[2].items()} == {row: str(e) for row, e in reference[2].items()}
    for row, (url, base) in enumerate(rows):
        want, error = expected(url, base, policy)
        text = got[1][got[0][row] : got[0][row + 1]].decode("ascii")
        assert (text if row not in got[2] else None, str(got[2][row]) if row in got[2] else None) == (want, error)


def test_buffer_twins_name_bytes_that_are_not_utf8_as_canonicalize_does():
    raw = [b"http://example.com/\xff", b"http://example.com/\xed\xa0\x80", b"http://example.com/ok", b"\xc3"]
    offsets = np.cumsum([0, *map(len, raw)]).astype(np.int32)
    got = canonicalize_buffers(offsets, b"".join(raw))
    reference = _canonical_py.canonicalize_buffers(offsets, b"".join(raw))
    assert sorted(got[2]) == sorted(reference[2]) == [0, 1, 3]
    for row in (0, 1, 3):
        with pytest.raises(InvalidURL) as refused:
            canonicalize(raw[row])
        assert str(got[2][row]) == str(reference[2][row]) == str(refused.value)


@pytest.mark.parametrize("twin", [canonicalize_buffers, _canonical_py.canonicalize_buffers])
@pytest.mark.parametrize(
    "offsets, runs",
    [([0, 3, 2], None), ([1, 0], None), ([0, 99], None), ([], None), ([0, 1], [(2, None)]), ([0, 1, 2], [(1, None)])],
)
def test_buffer_twins_refuse_offsets_and_runs_outside_the_data(twin, offsets, runs):
    with pytest.raises(ValueError, match="offsets must|runs must"):
        twin(np.array(offsets, dtype=np.int64), b"ab", runs)


def test_hash_buffers_twins_give_hash_many_rows():
    keys = [u.encode("utf-8", "surrogatepass") for u, _ in ROWS if u] + [b""]
    offsets = np.cumsum([0, *map(len, keys)]).astype(np.int32)
    data = b"".join(keys)
    assert np.array_equal(hash_buffers(offsets, data), hash_many(keys))
    assert np.array_equal(_fingerprints_py.hash_buffers(offsets, data), hash_many(keys))
    assert hash_buffers(np.zeros(1, np.int64), b"").shape == (0, 2)
    with pytest.raises(ValueError, match="offsets must"):
        hash_buffers(np.array([0, 5], np.int64), b"abc")


def _column(values, kind: str):
    array = pa.array(values, type=pa.large_string() if kind == "large_string" else pa.string())
    if kind == "string_view":
        return array.cast(pa.string_view())
    if kind == "chunked":  # chunks of uneven size, two of them slices of one array
        whole = pa.array(values, type=pa.string())
        return pa.chunked_array([whole.slice(0, 7), whole.slice(7, 500), whole.slice(507)])
    return array


@pytest.mark.parametrize("kind", ["string", "large_string", "string_view", "chunked"])
@pytest.mark.parametrize("policy", POLICY_LIST)
def test_url_columns_match_canonicalize_and_fingerprint_row_by_row(kind, policy):
    urls, bases = [u for u, _ in ROWS], [b for _, b in ROWS]
    made = url_columns(_column(urls, kind), bases=pa.array(bases), policy=policy)
    canonical, errors, fingerprints = (c.to_pylist() for c in made)
    assert made.fingerprint.type == FINGERPRINT_TYPE
    assert made.canonical.type == (pa.large_string() if kind in ("large_string", "string_view") else pa.string())
    h1, h2 = (c.to_pylist() for c in fingerprint_halves(made.canonical))
    for row, (url, base) in enumerate(ROWS):
        want, error = expected(url, base, policy)
        assert (canonical[row], errors[row]) == (want, error), (url, base)
        assert fingerprints[row] == (fingerprint(want) if want is not None else None)
        if want is not None:
            assert (h1[row], h2[row]) == tuple(hash_many([want])[0].tolist())
        else:
            assert h1[row] is None and h2[row] is None


def test_one_base_for_every_row_and_a_refused_one():
    urls = pa.array(["a/b", "../c", "https://other.example/x", None])
    canonical, errors = canonicalize_array(urls, base="https://example.com/dir/page")
    assert canonical.to_pylist() == [
        canonicalize(u, base="https://example.com/dir/page") if u else None for u in urls.to_pylist()
    ]
    assert errors.null_count == 4
    with pytest.raises(InvalidURL):
        canonicalize_array(urls, base="mailto:nobody@example.com")
    with pytest.raises(TypeError, match="not both"):
        canonicalize_array(urls, base="https://example.com/", bases=urls)
    with pytest.raises(ValueError, match="one base per URL"):
        canonicalize_array(urls, bases=pa.array(["https://example.com/"]))


def test_columns_of_other_types_are_refused_naming_the_type():
    with pytest.raises(TypeError, match="int64"):
        canonicalize_array(pa.array([1, 2]))
    with pytest.raises(TypeError, match="list"):
        fingerprint_array(["https://example.com/"])


def test_empty_and_all_null_columns():
    for column in (pa.array([], pa.string()), pa.chunked_array([], pa.string()), pa.nulls(3)):
        made = url_columns(column)
        assert len(made.canonical) == len(made.error) == len(made.fingerprint) == len(column)
        assert made.canonical.null_count == made.fingerprint.null_count == len(column)


def test_with_url_columns_adds_three_columns_to_a_table_and_a_batch():
    table = pa.table({"url": ["/x", "https://e.example/y?utm_source=z"], "base": ["https://b.example/", None]})
    made = with_url_columns(table, base="base")
    assert made.column_names == ["url", "base", "canonical", "error", "fingerprint"]
    assert made.column("canonical").to_pylist() == ["https://b.example/x", "https://e.example/y"]
    batch = with_url_columns(table.to_batches()[0])
    assert isinstance(batch, pa.RecordBatch) and batch.column("error").to_pylist() == [
        expected("/x", None, None)[1],
        None,
    ]
    with pytest.raises(KeyError, match="nope"):
        with_url_columns(table, url="nope")
