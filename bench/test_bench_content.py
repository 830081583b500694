"""Content fingerprints side by side: SimHash docs/s, page_text pages/s, index queries/s.

Run: ``pytest bench/test_bench_content.py --benchmark-only --benchmark-group-by=group
--benchmark-columns=min,median,ops --benchmark-min-rounds=3`` (add ``-m slow`` for the 10M
index; ``--benchmark-timer=time.process_time`` counts CPU time only, the fair clock on a
machine shared with other work). Each round of the ``simhash`` group fingerprints all of
``TEXTS`` (1,000 texts of about 3.5 KB), so docs/s is ``len(TEXTS) / median``; each round of
``page_text`` extracts all of ``PAGES`` (20 pages of 50-150 KB). Precision and recall against
the peers are in ``bench/content_quality.py``.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crawldedup import content
from crawldedup.content import NearDuplicateIndex, _simhash_py, page_text

simhash_package = pytest.importorskip("simhash")
deduplication = pytest.importorskip("trafilatura.deduplication")


def _load_pages_module() -> Any:
    path = Path(__file__).parent.parent / "tests" / "content_pages.py"
    spec = importlib.util.spec_from_file_location("content_pages", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


content_pages = _load_pages_module()
_site = content_pages.Site(11)
TEXTS = []
while len(TEXTS) < 1000:
    text = " ".join(_site.article(500, 700))
    TEXTS.append(text[:3500])
PAGES = [
    _site.fetch(_site.phrase(4, 9), _site.article(600, 1200), padding_bytes=_site.rng.randint(45_000, 115_000))
    for _ in range(20)
]
_TWINS = [pytest.param(_simhash_py, id="py")]
if content.HAS_EXTENSION:
    from crawldedup.content import _simhash_c

    _TWINS.append(pytest.param(_simhash_c, id="cy", marks=pytest.mark.cython))


@pytest.mark.benchmark(group="simhash")
@pytest.mark.parametrize("twin", _TWINS)
def test_crawldedup_simhash(benchmark, twin):
    benchmark(twin.simhash_many, TEXTS)


# The same texts with one character outside ASCII each (a typographic apostrophe, as in most
# real pages): the compiled twin folds the run holding it alone, and the rest as ASCII.
TEXTS_OUTSIDE_ASCII = [text[:-5] + " it\u2019s" for text in TEXTS]


@pytest.mark.benchmark(group="simhash")
@pytest.mark.parametrize("twin", _TWINS)
def test_crawldedup_simhash_outside_ascii(benchmark, twin):
    benchmark(twin.simhash_many, TEXTS_OUTSIDE_ASCII)


@pytest.mark.benchmark(group="simhash")
def test_simhash_package(benchmark):
    benchmark(lambda: [simhash_package.Simhash(text).value for text in TEXTS])


@pytest.mark.benchmark(group="simhash")
def test_simhash_package_from_tokens(benchmark):
    tokens = [text.lower().split() for text in TEXTS]  # split outside the timed step
    benchmark(lambda: [simhash_package.Simhash(words).value for words in tokens])


@pytest.mark.benchmark(group="simhash")
def test_trafilatura_content_fingerprint(benchmark):
    benchmark(lambda: [deduplication.content_fingerprint(text) for text in TEXTS])


def test_pages_are_real_sized():
    sizes = [len(page.encode("utf-8")) for page in PAGES]
    assert 50_000 <= min(sizes) and max(sizes) <= 150_000, sizes


@pytest.mark.benchmark(group="page_text")
def test_page_text_str(benchmark):
    benchmark(lambda: [page_text(page) for page in PAGES])


@pytest.mark.benchmark(group="page_text")
def test_page_text_bytes(benchmark):
    encoded = [page.encode("utf-8") for page in PAGES]
    benchmark(lambda: [page_text(page) for page in encoded])


@pytest.mark.benchmark(group="page_text")
def test_lxml_text(benchmark):
    """The parser page_text did not choose, dropping the same elements (not the link rule)."""
    lxml_html = pytest.importorskip("lxml.html")
    from lxml import etree

    from crawldedup.content import DROPPED_ELEMENTS

    def text(page: str) -> str:
        root = lxml_html.fromstring(page)
        etree.strip_elements(root, *DROPPED_ELEMENTS, etree.Comment, with_tail=False)
        return " ".join(" ".join(root.find("body").itertext()).split())

    benchmark(lambda: [text(page) for page in PAGES])


def _fill(index: NearDuplicateIndex, count: int, seed: int) -> NearDuplicateIndex:
    rng = np.random.default_rng(seed)
    for done in range(0, count, 1_000_000):
        index.add_many(rng.integers(0, 2**64, size=min(count - done, 1_000_000), dtype=np.uint64))
    return index


QUERIES = np.random.default_rng(5).integers(0, 2**64, size=10_000, dtype=np.uint64)


@pytest.mark.benchmark(group="index-1M")
def test_index_query_1m(benchmark):
    """10,000 queries against 1M fingerprints in memory, k = 3."""
    index = _fill(NearDuplicateIndex(3), 1_000_000, 3)
    benchmark.extra_info["bytes_per_fingerprint"] = index.bytes_per_fingerprint
    benchmark(index.query_many, QUERIES)


@pytest.mark.slow
@pytest.mark.benchmark(group="index-10M")
def test_index_query_10m(benchmark, tmp_path):
    """10,000 queries against 10M fingerprints in a mapped file, k = 3; the file's bytes per fingerprint."""
    path = tmp_path / "10m.simidx"
    started = time.perf_counter()
    with NearDuplicateIndex(3, path) as index:
        _fill(index, 10_000_000, 4)
    benchmark.extra_info["build_and_write_seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    with NearDuplicateIndex.open(path) as index:
        benchmark.extra_info["open_seconds"] = round(time.perf_counter() - started, 2)
        benchmark.extra_info["file_bytes_per_fingerprint"] = path.stat().st_size / len(index)
        benchmark(index.query_many, QUERIES)
