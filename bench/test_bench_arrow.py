"""The Arrow kernel against canonicalize_many on the same URLs, side by side.

Run: ``pytest bench/test_bench_arrow.py --benchmark-only --benchmark-group-by=group
--benchmark-columns=min,median,max,ops``. Two lists: ``mix`` is the canonicalization
benchmark's 12,000-URL crawl mix (bench/test_bench_canonical.py: IDNA and IPv6 hosts, dot
segments, tracking parameters, wrapped links, relative links resolved) repeated to 120,000
rows; ``frontier`` is 120,000 absolute links of examples/frontier.py. In each group:
``canonicalize_many`` (a list of str in, a list of str out) against ``canonicalize_array`` (an
Arrow ``string`` column in, a ``string`` column and an error column out), and the same two
followed by the fingerprints (``hash_many`` of the list; ``fingerprint_array`` of the column).
URLs a second is ``rows / median``. The target: the kernel within 1.2x of canonicalize_many.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List

import pytest

from crawldedup.canonical import canonicalize_many
from crawldedup.fingerprints import hash_many

pa = pytest.importorskip("pyarrow")
from crawldedup.arrow import canonicalize_array, url_columns  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import frontier  # noqa: E402
from test_bench_canonical import ABSOLUTE_URLS  # noqa: E402

ROWS = 120_000


def _frontier() -> List[str]:
    lines: List[str] = []
    frontier.generate(ROWS * 2, 5_000, seed=11, write=lines.append)
    return [line for line in "".join(lines).split("\n") if line and "\t" not in line][:ROWS]


LISTS: Dict[str, List[str]] = {
    "mix": (ABSOLUTE_URLS * (ROWS // len(ABSOLUTE_URLS) + 1))[:ROWS],
    "frontier": _frontier(),
}
COLUMNS = {name: pa.array(urls, type=pa.string()) for name, urls in LISTS.items()}


@pytest.mark.parametrize("name", list(LISTS))
def test_canonicalize_many(benchmark, name):
    benchmark.group = f"arrow-kernel-{name}"
    found = benchmark(canonicalize_many, LISTS[name])
    assert len(found.urls) == ROWS


@pytest.mark.parametrize("name", list(LISTS))
def test_canonicalize_array(benchmark, name):
    benchmark.group = f"arrow-kernel-{name}"
    canonical, _ = benchmark(canonicalize_array, COLUMNS[name])
    assert canonical.to_pylist()[:1000] == canonicalize_many(LISTS[name][:1000]).urls


@pytest.mark.parametrize("name", list(LISTS))
def test_canonicalize_many_then_hash_many(benchmark, name):
    benchmark.group = f"arrow-kernel-{name}-fingerprints"

    def run() -> None:
        hash_many([url for url in canonicalize_many(LISTS[name]).urls if url is not None])

    benchmark(run)


@pytest.mark.parametrize("name", list(LISTS))
def test_url_columns(benchmark, name):
    benchmark.group = f"arrow-kernel-{name}-fingerprints"
    made = benchmark(url_columns, COLUMNS[name])
    assert len(made.fingerprint) == ROWS
