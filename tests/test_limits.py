"""Input limits of canonicalize: a 1 MB URL, a million-parameter query, URLs made of escapes.

Each is either refused by ``max_length`` (default 8192 characters) at a cost that does not
grow with the input, or, with ``max_length`` raised, processed in time and memory linear in
its length. No clock is read. What is asserted:

- work, on the pure-Python reference: the number of Python-level function calls (``call``
  and ``c_call`` profile events, C functions such as ``str.split`` or ``re.sub`` included)
  made by one canonicalize call, counted at n and 16 n repeats of a pattern, per input
  character. Linear work keeps the cost per character (the ratio is about 1); a quadratic
  step would multiply it by about 16. The bound is 1.125. Work inside one C call is not
  counted, so this says nothing about the loops of the compiled fast path
  (``_canonical_c``): for that build only memory, refusals and agreement with the reference
  are asserted.
- memory, on both builds: the peak traced by ``tracemalloc`` during one call per input
  character, at n and 16 n (same bound), and for the full-size inputs, a peak below
  ``MEMORY_PER_CHARACTER`` bytes per input character.
- a refused input costs the same number of calls at 8 KiB over the limit and at 1 MB over it.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from typing import Callable, Dict
from urllib.parse import quote

import pytest

from crawldedup import CanonicalPolicy, InvalidURL
from crawldedup.canonical import _canonical_py as _canonical

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

#: Cost per input character at 16 n over the same at n: about 1 when linear, about 16 when
#: quadratic; the slack covers constant overheads only.
GROWTH_BOUND = 1.125
#: Peak memory of one call on the full-size inputs, in bytes per input character. Measured:
#: about 12 for a million query pairs and 15 for a 1.1 MB path (a str object per pair or
#: segment), 75 for a URL of only escapes (splitting on "%" makes a ~50-byte str object for
#: every 3-character escape). Linear, with that constant.
MEMORY_PER_CHARACTER = 100
SMALL = 400


def _pairs(n: int) -> str:
    # Keys out of order (a multiplicative step), a tracking key now and then, repeated keys.
    pairs = [f"k{(i * 7919) % n}=v{i}" if i % 50 else f"utm_source=s{i}" for i in range(n)]
    return "http://example.com/list?" + "&".join(pairs)


FAMILIES: Dict[str, Callable[[int], str]] = {
    "query pairs": _pairs,
    "query of escapes": lambda n: "http://example.com/?" + "%e9=%zz&%41%2b=+%20&" * n,
    "path of escapes": lambda n: "http://example.com/" + "%41%zz%e9%2F%2e%2E/" * n,
    # Rule 2: the whole URL percent-encoded once more, so that after the scheme it is only escapes.
    "wrapped URL of escapes": lambda n: "http%3A%2F%2F" + quote("example.com/" + "é/a b?" * n + "q=1", safe=""),
    "dot segments": lambda n: "http://example.com/" + "a/./b/../" * n + "end",
    "empty segments": lambda n: "http://example.com/a" + "/" * n + "b/" + "?&" * n,
    "host labels": lambda n: "http://" + "Ab-1." * n + "example.com/",
}


def count_calls(function: Callable[[], object]) -> int:
    """The number of Python and C function calls made while ``function`` runs."""
    calls = 0

    def profiler(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    # Garbage of earlier tests (a connection's __del__) must not be collected, and counted, in here.
    gc.collect()
    gc.disable()
    sys.setprofile(profiler)
    try:
        function()
    finally:
        sys.setprofile(None)
        gc.enable()
    return calls


def peak_bytes(function: Callable[[], object]) -> int:
    """The peak of memory allocated while ``function`` runs, above what was allocated before."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        function()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before


def per_character(cost: int, url: str) -> float:
    return cost / len(url)


def clear_caches(impl) -> None:
    """Forget the hosts (and bases) a build has cached, so that every call pays for its input."""
    for module in {impl, _canonical}:
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def accept(url: str, impl=_canonical) -> Callable[[], str]:
    """A call that canonicalizes ``url`` with a max_length that admits it, caches cleared first."""
    policy = CanonicalPolicy(max_length=len(url))

    def call() -> str:
        clear_caches(impl)
        return impl.canonicalize(url, policy=policy)

    return call


@pytest.mark.parametrize("family", list(FAMILIES))
def test_work_grows_linearly(family):
    make = FAMILIES[family]
    small, large = make(SMALL), make(16 * SMALL)
    assert accept(large)()  # accepted, not refused early
    ratio = per_character(count_calls(accept(large)), large) / per_character(count_calls(accept(small)), small)
    assert ratio <= GROWTH_BOUND, f"{family}: {ratio:.2f}x the calls per character at 16x the input"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_memory_grows_linearly(canonical_impl, family):
    make = FAMILIES[family]
    small, large = make(4 * SMALL), make(64 * SMALL)  # large enough that fixed costs do not dominate
    assert accept(large, canonical_impl)() == accept(large)()  # both builds: the same answer
    ratio = per_character(peak_bytes(accept(large, canonical_impl)), large) / per_character(
        peak_bytes(accept(small, canonical_impl)), small
    )
    assert ratio <= GROWTH_BOUND, f"{family}: {ratio:.2f}x the peak memory per character at 16x the input"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_refusal_by_max_length_costs_the_same_at_any_length(canonical_impl, family):
    make = FAMILIES[family]
    just_over = next(make(n) for n in range(1, 10**6) if len(make(n)) > 8192)
    huge = next(make(n) for n in range(len(just_over) // 8192 * 100, 10**7, 1000) if len(make(n)) > 1_000_000)
    refuse = canonical_impl.canonicalize
    for url in (just_over, huge):
        with pytest.raises(InvalidURL, match=f"{len(url)} characters, max_length is 8192"):
            refuse(url)
    assert count_calls(lambda: pytest.raises(InvalidURL, refuse, huge)) == count_calls(
        lambda: pytest.raises(InvalidURL, refuse, just_over)
    )
    assert peak_bytes(lambda: pytest.raises(InvalidURL, refuse, huge)) < 64 * 1024  # no copy of the input
    # In a batch too: the refusal is decided before any room is set aside for the row.
    batch = [huge]
    assert canonical_impl.canonicalize_many(batch).errors[0] is not None
    assert peak_bytes(lambda: canonical_impl.canonicalize_many(batch)) < 64 * 1024


def test_a_megabyte_url_when_max_length_allows_it(canonical_impl):
    url = "http://example.com/" + "segment-é/" * 100_000  # 1.1 MB
    out = None

    def run() -> None:
        nonlocal out
        out = accept(url, canonical_impl)()

    peak = peak_bytes(run)
    assert out == "http://example.com" + "/segment-%C3%A9" * 100_000
    assert peak <= MEMORY_PER_CHARACTER * len(url), f"{peak / len(url):.1f} bytes per character"


def test_a_million_parameters_when_max_length_allows_them(canonical_impl):
    url = _pairs(1_000_000)  # 15.6 MB
    out = None

    def run() -> None:
        nonlocal out
        out = accept(url, canonical_impl)()

    peak = peak_bytes(run)
    query = out.split("?", 1)[1].split("&")
    assert len(query) == 1_000_000 - 1_000_000 // 50  # the tracking pairs are gone
    assert query == sorted(query, key=lambda pair: tuple(pair.split("=", 1)))  # by (key, value)
    for pair in query[::997]:  # each kept pair is one of the input's, unchanged
        key, value = pair[1:].split("=v")
        assert int(key) == int(value) * 7919 % 1_000_000 and int(value) % 50
    assert peak <= MEMORY_PER_CHARACTER * len(url), f"{peak / len(url):.1f} bytes per character"


def test_a_url_of_only_escapes(canonical_impl):
    url = "http%3A%2F%2F" + "".join(f"%{b:02X}" for b in ("example.com/" + "ü" * 170_000).encode())
    out = None

    def run() -> None:
        nonlocal out
        out = accept(url, canonical_impl)()

    peak = peak_bytes(run)
    assert len(url) > 1_000_000
    assert out == "http://example.com/" + "%C3%BC" * 170_000
    assert peak <= MEMORY_PER_CHARACTER * len(url), f"{peak / len(url):.1f} bytes per character"
