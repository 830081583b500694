"""URLs per second on a realistic crawl mix: crawldedup's two builds against w3lib, url-normalize and ada-url.

Run: ``pytest bench/test_bench_canonical.py --benchmark-only --benchmark-group-by=group
--benchmark-columns=min,median,ops --benchmark-min-rounds=3``. All canonicalizers sit in one
group, so their medians print side by side: ``test_crawldedup[py-policy3]`` (the pure-Python
reference, the default policy), ``test_crawldedup[cy-policy3]`` (the compiled fast path, what
``canonicalize`` is when the extension is built), the same two under ``POLICY_V2`` (``-policy2``)
and ``POLICY_V1`` (``-policy1``), and the peers. Each round canonicalizes all of ``URLS`` once,
so URLs per second is ``len(URLS) / median``.
"""

from __future__ import annotations

import random
from typing import Callable, List, Optional, Tuple
from urllib.parse import urljoin

import pytest

from crawldedup import DEFAULT_POLICY, POLICY_V1, POLICY_V2, CanonicalPolicy

ada_url = pytest.importorskip("ada_url")
w3lib_url = pytest.importorskip("w3lib.url")
url_normalize = pytest.importorskip("url_normalize")

URL_COUNT = 12_000
_rng = random.Random(20240603)

_HOSTS = [
    "example.com",
    "www.Example.com",
    "shop.example.co.uk",
    "news.example.org",
    "CDN.example.net",
    "blog.example.io",
    "m.example.com",
    "api.example.dev",
    "Bücher.example",
    "例え.テスト",
    "xn--bcher-kva.example",
    "www.münchen.de",
    "192.0.2.10",
    "[2001:DB8::1]",
]
_WORDS = [
    "products",
    "Item",
    "category",
    "search",
    "news",
    "2024",
    "article",
    "a b",
    "café",
    "%7Euser",
    "index.html",
    "view.php",
    "detail",
    "..",
    ".",
    "%2e%2e",
    "Produits",
    "中文",
]
_TRACKING = [
    "utm_source=newsletter",
    "utm_medium=email",
    "UTM_Campaign=spring",
    "gclid=Cj0KCQ",
    "fbclid=IwAR2x",
    "ref=homepage",
    "spm=a2e0b.1",
    "sessionid=abc123",
    "_ga=2.1.2.3",
]
_CONTENT = [
    "id={}",
    "page={}",
    "sort=price",
    "q=red+shoes",
    "q=a%20b",
    "filter=color%3Ablue",
    "lang=en",
    "size={}",
    "cat=%E4%B8%AD",
    "name=Caf%C3%A9",
    "x=",
    "flag",
    "tag=a&tag=b",
]
_BASES = ["https://example.com/dir/page.html", "http://shop.example.co.uk/a/b/c?x=1"]
_RELATIVE = [
    "page2.html",
    "../up/one.html",
    "./same?x=1",
    "/root/path",
    "?only=query",
    "#frag",
    "//cdn.example.net/lib.js",
    "sub/dir/",
    "../../a/b/../c",
]


def _absolute(index: int) -> str:
    scheme = _rng.choice(["http", "https", "HTTPS", "Http"])
    host = _rng.choice(_HOSTS)
    port = _rng.choice(["", "", "", ":80", ":443", ":8080", ":08080"])
    depth = _rng.randint(0, 4)
    path = "/" + "/".join(_rng.choice(_WORDS) for _ in range(depth)) + _rng.choice(["", "/", "//"])
    params = [_rng.choice(_CONTENT).format(index) for _ in range(_rng.randint(0, 4))]
    params += _rng.sample(_TRACKING, _rng.randint(0, 2))
    _rng.shuffle(params)
    query = ("?" + "&".join(params)) if params else _rng.choice(["", "", "?"])
    fragment = _rng.choice(["", "", "", "#top", "#section-2"])
    return f"{scheme}://{host}{port}{path}{query}{fragment}"


def _build() -> List[Tuple[str, Optional[str]]]:
    urls: List[Tuple[str, Optional[str]]] = []
    for index in range(URL_COUNT):
        roll = _rng.random()
        if roll < 0.10:
            urls.append((_rng.choice(_RELATIVE), _rng.choice(_BASES)))
        elif roll < 0.40:
            # Already canonical: the most common input in a crawl that feeds on its own output.
            urls.append((f"https://example.com/item/{index}?id={index}&page=2", None))
        else:
            urls.append((_absolute(index), None))
    return urls


URLS = _build()
#: The part of the mix written in ASCII (the URL and its base): no host or path for IDNA or UTF-8.
ASCII_URLS = [(url, base) for url, base in URLS if url.isascii() and (base is None or base.isascii())]
# Peers take no base: give them the resolved absolute form of each relative link.
ABSOLUTE_URLS = [urljoin(base, url) if base else url for url, base in URLS]


def _run_crawldedup(
    canonicalize: Callable[..., str], policy: CanonicalPolicy, urls: List[Tuple[str, Optional[str]]] = URLS
) -> int:
    done = 0
    for url, base in urls:
        try:
            canonicalize(url, base, policy)
            done += 1
        except ValueError:
            pass
    return done


def _run_peer(function: Callable[[str], str]) -> int:
    done = 0
    for url in ABSOLUTE_URLS:
        try:
            function(url)
            done += 1
        except ValueError:
            pass
    return done


@pytest.mark.benchmark(group="canonicalize-12k-urls")
@pytest.mark.parametrize("policy", [DEFAULT_POLICY, POLICY_V2, POLICY_V1], ids=["policy3", "policy2", "policy1"])
def test_crawldedup(benchmark, canonical_impl, policy):
    done = benchmark(_run_crawldedup, canonical_impl.canonicalize, policy)
    assert done == len(URLS)


@pytest.mark.benchmark(group="canonicalize-12k-urls")
@pytest.mark.parametrize(
    "function",
    [
        pytest.param(w3lib_url.canonicalize_url, id="w3lib"),
        pytest.param(url_normalize.url_normalize, id="url_normalize"),
        pytest.param(ada_url.normalize_url, id="ada_url"),
    ],
)
def test_peer(benchmark, function):
    done = benchmark(_run_peer, function)
    assert done >= len(URLS) * 0.9
