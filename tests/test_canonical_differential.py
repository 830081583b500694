"""The compiled fast path against the pure-Python reference: same string, or same InvalidURL, every time.

``crawldedup.canonical._canonical_c`` answers the common URL in C and hands the rest to
``crawldedup.canonical._canonical_py``. These tests generate URL-shaped inputs (and mutate real ones) and
require identical outcomes from both, error messages included; and they check that the fast
path really answers the common forms, so that equality is not won by declining everything.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawldedup import DEFAULT_POLICY, POLICY_V1, POLICY_V2, CanonicalPolicy, HostRule, InvalidURL, canonical
from crawldedup.canonical import _canonical_py as _canonical

pytestmark = [
    pytest.mark.twins,
    pytest.mark.cython,
    pytest.mark.skipif(not canonical.HAS_EXTENSION, reason="the compiled extension is not built or is disabled"),
]

if canonical.HAS_EXTENSION:
    from crawldedup.canonical import _canonical_c

# Bounded so that the file runs in a few seconds.
DIFF = settings(max_examples=400, deadline=None)

# Each under policy 3 (the default), policy 2 and policy 1.
_POLICY_FIELDS = [
    DEFAULT_POLICY,
    CanonicalPolicy(keep_fragment=True),
    CanonicalPolicy(keep_userinfo=True),
    CanonicalPolicy(strip_www=True),
    CanonicalPolicy(semicolon_separator=True),
    CanonicalPolicy(lowercase_path=True),
    CanonicalPolicy(merge_schemes=True),
    CanonicalPolicy(strip_trailing_slash=False),
    CanonicalPolicy(schemes={"https"}),
    CanonicalPolicy(schemes={"http", "https", "ws", "ftp"}),
    CanonicalPolicy(drop_params={"session", "caf\u00e9", "x"}, drop_prefixes={"pk_", "hsa_", "u"}),
    CanonicalPolicy(keep_params={"ref", "utm_id", "UTM_X"}),
    CanonicalPolicy(drop_params={"k" * 70, "\u00e9t\u00e9", "p"}, keep_params={"P"}),
    CanonicalPolicy(drop_params=(), drop_prefixes=()),
    CanonicalPolicy(max_length=30),
    # Per-host rules: the compiled fast path switches to a rule's plan after the host, or
    # declines a rule it cannot follow (lowercase_path; fragments kept where the policy drops them).
    CanonicalPolicy(
        host_rules=[
            HostRule("example.com", drop_params={"ref", "sid"}),
            HostRule("b.example.com", keep_params={"utm_source"}, keep_fragment=True, semicolon_separator=True),
            HostRule("b\u00fccher.example", lowercase_path=True, strip_trailing_slash=False),
            HostRule("h", drop_prefixes={"x"}),
        ]
    ),
]
POLICIES = [dataclasses.replace(policy, version=version) for version in (3, 2, 1) for policy in _POLICY_FIELDS]

SCHEMES = st.sampled_from(["http", "https", "HTTP", "HtTpS"])
ODD_SCHEMES = st.sampled_from(["ws", "ftp", "javascript", "h", "https%3A%2F%2F", "", "wss", "HTTP"])
USERINFO = st.sampled_from(["", "", "", "user@", "u:p@", ":@", "@", "a@b@", "\u00fc@", "a b@", "%41@"])
LABELS = st.lists(st.text(alphabet="abcXYZ09-_", min_size=1, max_size=6), min_size=1, max_size=4).map(".".join)
HOSTS = st.one_of(
    LABELS,
    st.sampled_from(
        [
            "Example.COM",
            "example.com.",
            "example.com..",
            "a..b",
            ".a",
            "www.example.com",
            # Hosts of the rules above and under them (the most specific rule wins).
            "b.example.com",
            "X.B.example.com",
            "ab.example.com",
            "h",
            "x.h",
            "xh",
            "WWW.www.com",
            "www.com",
            "b\u00fccher.example",
            "xn--bcher-kva.example",
            "\u4f8b\u3048.\u30c6\u30b9\u30c8",
            "[::1]",
            "[2001:DB8::1]",
            "[::FFFF:1.2.3.4]",
            "[",
            "[::1",
            "[::1]x",
            "192.0.2.1",
            "a" * 63 + ".com",
            "a" * 64 + ".com",
            "exa%41mple",
            "",
            ".",
            "a b",
            "a\\b",
            "a<b",
            "a~b",
            "\u3002",
            # Policy 2: WHATWG's IPv4 forms and failures, escaped hosts.
            "0x7f.1",
            "3279880203",
            "0300.0250.0.01",
            "1.2.3.4.",
            "1.2.3.4.5",
            "256.256.256.256",
            "foo.09",
            "0x100000000",
            "0x",
            "1.0x",
            "09.1",
            "example.1a",
            "axn--.example",
            "a.xn--",
            "XN--bcher-kva.example",
            "exa%2Emple",
            "b%C3%BCcher.example",
            "%FF.example",
            "%41.1",
        ]
    ),
)
PORTS = st.sampled_from(
    [
        "",
        ":",
        ":80",
        ":443",
        ":080",
        ":0443",
        ":8080",
        ":0",
        ":00",
        ":65535",
        ":65536",
        ":000000080",
        ":+80",
        ":\uff18\uff10",
        ":x",
        ":1:2",
    ]
)
SEGMENTS = st.sampled_from(
    [
        "a",
        "B",
        "item",
        ".",
        "..",
        "%2e",
        "%2E%2e",
        "%41",
        "%7e",
        "%2f",
        "%2F",
        "%zz",
        "%",
        "%4",
        "a b",
        "\u00e9",
        "\u4e2d",
        "\\",
        "[x]",
        "{|}",
        ";p=1",
        "!$&'()*+,=:@",
        "~",
        "",
        "%C3%A9",
        "%e4%b8%ad",
        "\u00a0",
        '^`"',
    ]
)
KEYS = st.sampled_from(
    [
        "id",
        "page",
        "utm_source",
        "UTM_Medium",
        "utm%5Fx",
        "Utm_",
        "Ref",
        "ref",
        "REF",
        "gclid",
        "%67clid",
        "sid",
        "sidx",
        "_ga",
        "q",
        "a+b",
        "a%20b",
        "%",
        "%E9",
        "\u00e9",
        "",
        "=",
        "k;v",
        "caf%C3%A9",
        "CAF%C3%A9",
        "session",
        "pk_kw",
        "HSA_x",
        "utm_id",
        "x",
        "X",
        "%00",
        "a%2Bb",
        "K" * 70,
        "k" * 71,
        "k" * 69,
        "%C3%A9t%C3%A9",
        "p",
        "P",
    ]
)
VALUES = st.sampled_from(
    [
        "",
        "1",
        "a+b",
        "a%20b",
        "a b",
        "%2B",
        "%",
        "%zz",
        "x=y",
        "\u00e9",
        "%E9",
        "~-._",
        "A%41",
        "&",
        "caf\u00e9",
        "%C3%A9",
        "2024",
    ]
)
FRAGMENTS = st.sampled_from(["", "", "#", "#top", "#a#b", "#\u00e9", "#x/../y"])
PADDING = st.sampled_from(["", " ", "\t", "\n ", "\x0b", "\x0c", "\x00", "\x1f ", "\x7f"])


@st.composite
def queries(draw):
    if not draw(st.booleans()):
        return ""
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        key = draw(KEYS)
        parts.append(key if draw(st.integers(0, 4)) == 0 else key + "=" + draw(VALUES))
    separators = st.sampled_from(["&", "&", "&", "&&", ";"])
    return "?" + "".join(part + (draw(separators) if i < len(parts) - 1 else "") for i, part in enumerate(parts))


@st.composite
def absolute_urls(draw):
    def usually(common, odd):
        # Most examples are URLs the fast path takes; the odd parts test what it declines.
        return draw(common) if draw(st.integers(0, 4)) else draw(odd)

    path = "/".join(draw(st.lists(SEGMENTS, max_size=5)))
    path = ("/" + path if path or draw(st.booleans()) else "") + draw(st.sampled_from(["", "", "/", "//"]))
    return (
        usually(st.just(""), PADDING)
        + usually(SCHEMES, ODD_SCHEMES)
        + usually(st.just("://"), st.sampled_from([":", ":/", ":\\\\", ":/\\", ":///", ":\\"]))
        + usually(st.just(""), USERINFO)
        + usually(LABELS, HOSTS)
        + usually(st.just(""), PORTS)
        + path
        + draw(queries())
        + draw(FRAGMENTS)
        + usually(st.just(""), PADDING)
    )


REFERENCES = st.one_of(
    st.sampled_from(
        [
            "g",
            "./g",
            "../g",
            "../../../g",
            ".",
            "..",
            "./",
            "",
            "?y",
            "?",
            "#s",
            "g?y#s",
            "//g",
            "//G.example:80/x",
            "/abs/../p",
            "%2E%2E/x",
            "a:b",
            "1http://x",
            "\\\\evil/x",
            "g;x?y",
            "https%3A%2F%2Fa%2Fb",
            "HTTP://Other.example/x",
            "\u00e9/x",
            "g\tx",
            "?utm_source=1&b=2&a=1",
            "http:g",
            "http:/g",
            "https:g",
            "HTTP:\\\\g\\h",
            "http:",
            "http:?x",
            "\\g",
            "/\\g",
            "///g",
            "g\\h",
            "\x01g\x00",
        ]
    ),
    st.builds(lambda segments, query: "/".join(segments) + query, st.lists(SEGMENTS, max_size=4), queries()),
)
BASES = st.sampled_from(
    [
        "http://a/b/c/d;p?q",
        "https://x.example",
        "http://h/%2e%2e/d/",
        "HTTPS://A.example:443/dir/",
        "http://b\u00fccher.example/x/y",
        "http://[::1]:8080/p?",
        "http://u:p@a/b#frag",
        "https%3A%2F%2Fa%2Fdir%2Fp",
        "ws://chat.example/room",
    ]
)

REAL_URLS = [
    "HTTPS://Example.com:443/Products/?utm_source=x&id=9",
    "https%3A%2F%2Fmain.m.taobao.com%2Fdetail%2Findex.html%3Fid%3D123",
    "http://user:pass@www.B\u00fccher.example.:080/a/./b/../%7ec/%e4%b8%ad?q=a+b&q=a%20b&=&&x#frag",
    "http://[::FFFF:192.0.2.1]:8080/p;x=1?b=2;a=1#a#b",
    "https://www.example.com/search?q=caf%C3%A9&page=2&fbclid=1",
    "https://shop.example.co.uk/item/17?id=17&page=2&sort=price&utm_medium=email#reviews",
]
PIECES = st.sampled_from(
    list(":/?#[]@!$&'()*+,;=%. \\\t\n\"<>^`{|}~-_")
    + [
        "%2e",
        "%2E%2E",
        "%3A%2F%2F",
        "%25",
        "%zz",
        "%e9",
        "%C3%A9",
        "..",
        "./",
        "//",
        "www.",
        "xn--",
        "\u3002",
        "\u00e9",
        "\u4e2d",
        "\u00a0",
        "\u00df",
        "::",
        ":80",
        ":0443",
        "[::1]",
        "@",
        "utm_",
        "&&",
        "=",
        "+",
        "\x00",
        "\x7f",
        "\ud800",
        "\U0001f642",
        "HTTP://",
        "?utm_source=1",
    ]
)


@st.composite
def mutated_urls(draw):
    url = draw(st.sampled_from(REAL_URLS))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(url)))
        url = url[:at] + draw(PIECES) + url[at + draw(st.integers(0, 3)) :]
    return url


# Share links: a whole URL percent-encoded (rule 2), sometimes with lowercase hex.
WRAPPED = st.builds(
    lambda url, lower: quote(url, safe="+").replace("%3A%2F%2F", "%3a%2f%2f" if lower else "%3A%2F%2F"),
    absolute_urls(),
    st.booleans(),
)
URLS = st.one_of(absolute_urls(), mutated_urls(), WRAPPED)


def outcome(function, *args, **kwargs):
    try:
        return "ok", function(*args, **kwargs)
    except InvalidURL as exc:
        return "InvalidURL", str(exc)
    except TypeError as exc:
        return "TypeError", str(exc)


def as_input(url, as_bytes):
    return url.encode("utf-8", "surrogatepass") if as_bytes else url


@DIFF
@given(url=URLS, policy=st.sampled_from(POLICIES), as_bytes=st.booleans())
def test_same_outcome_as_the_reference(url, policy, as_bytes):
    url = as_input(url, as_bytes)
    expected = outcome(_canonical.canonicalize, url, policy=policy)
    assert outcome(_canonical_c.canonicalize, url, policy=policy) == expected
    fast = _canonical_c.fast_canonicalize(url, policy)
    assert fast is None or ("ok", fast) == expected


@DIFF
@given(ref=st.one_of(REFERENCES, URLS), base=BASES, policy=st.sampled_from(POLICIES), as_bytes=st.booleans())
def test_same_outcome_against_a_base(ref, base, policy, as_bytes):
    ref = as_input(ref, as_bytes)
    expected = outcome(_canonical.canonicalize, ref, base=base, policy=policy)
    assert outcome(_canonical_c.canonicalize, ref, base=base, policy=policy) == expected
    if expected[0] == "ok":
        fast = _canonical_c.fast_canonicalize(ref, policy, base)
        assert fast is None or fast == expected[1]


@settings(max_examples=150, deadline=None)
@given(
    urls=st.lists(st.one_of(URLS, REFERENCES, st.just(b"http://a.example/\xff"), st.just(7)), max_size=12),
    base=st.one_of(st.none(), BASES),
    policy=st.sampled_from(POLICIES),
)
def test_batch_same_as_the_reference(urls, base, policy):
    try:
        expected = _canonical.canonicalize_many(urls, base=base, policy=policy)
    except (InvalidURL, TypeError) as exc:  # a base refused, or an item that is no URL (7)
        with pytest.raises(type(exc)) as info:
            _canonical_c.canonicalize_many(urls, base=base, policy=policy)
        assert str(info.value) == str(exc)
        return
    got = _canonical_c.canonicalize_many(iter(urls), base=base, policy=policy)
    assert got.urls == expected.urls
    assert {i: str(e) for i, e in got.errors.items()} == {i: str(e) for i, e in expected.errors.items()}
    assert list(got.errors) == list(expected.errors)


def _corpus(count, seed):
    """Crawl-like URLs, most of them the forms the fast path exists for."""
    rng = random.Random(seed)
    hosts = [
        "example.com",
        "WWW.Example.com",
        "shop.example.co.uk:8080",
        "news.example.org.",
        "b\u00fccher.example",
        "[2001:db8::1]",
        "192.0.2.10:80",
        "cdn.example.net:443",
    ]
    words = ["products", "Item", "a b", "caf\u00e9", "%7Euser", "..", ".", "%2e%2e", "index.html", "%2F", "x%zz"]
    params = [
        "id={}",
        "page={}",
        "utm_source=news",
        "UTM_Campaign=x",
        "gclid=abc",
        "ref=home",
        "q=red+shoes",
        "q=a%20b",
        "filter=color%3Ablue",
        "cat=%E4%B8%AD",
        "flag",
        "x=",
        "=v",
        "tag=a&tag=b",
        "sid=1",
    ]
    urls = []
    for index in range(count):
        path = "/".join(rng.choice(words) for _ in range(rng.randint(0, 4))) + rng.choice(["", "/", "//"])
        query = "&".join(rng.choice(params).format(index) for _ in range(rng.randint(0, 5)))
        urls.append(
            f"{rng.choice(['http', 'https', 'HTTPS'])}://{rng.choice(hosts)}/{path}"
            f"{'?' + query if query or rng.random() < 0.1 else ''}{rng.choice(['', '', '#top'])}"
        )
    return urls


@pytest.mark.parametrize("policy", [DEFAULT_POLICY, POLICY_V2, POLICY_V1], ids=["v3", "v2", "v1"])
def test_crawl_corpus_same_as_the_reference_and_mostly_fast(policy):
    urls = _corpus(5_000, seed=3)
    assert _canonical_c.canonicalize_many(urls, policy=policy) == _canonical.canonicalize_many(urls, policy=policy)
    fast = [_canonical_c.fast_canonicalize(url, policy) for url in urls]
    assert [f for f in fast if f is not None] == [
        _canonical.canonicalize(u, policy=policy) for u, f in zip(urls, fast) if f is not None
    ]
    # Everything but IPv6 and IDNA hosts (answered through the reference's cached authority).
    assert sum(f is not None for f in fast) >= 0.95 * len(urls)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/item/1?id=1&page=2",
        "HTTP://Example.COM:80/a/./b/../c/?utm_source=x&b=2&a=1#top",
        "https://example.com:08443/%7euser/%e4%b8%ad/caf\u00e9/a b/?q=a%20b&Q=a+b&flag&&=&=1",
        b"http://user:pw@example.com./x/..//y//",
        "  http://b\u00fccher.example/x \n",
        "HTTPS%3a%2f%2fExample.com%2Fa%2Fcaf%C3%A9%3Fb%3D1%26a%3D%2541",
        "http://[2001:DB8::1]:8080/",
        "https://example.com/?" + "&".join(f"k{i}=v{i}" for i in range(100, 0, -1)),
        "https://example.com/" + "%41" * 3000,
    ],
)
def test_fast_path_answers_the_common_forms(url):
    assert _canonical_c.fast_canonicalize(url, CanonicalPolicy(max_length=10_000)) == _canonical.canonicalize(
        url, policy=CanonicalPolicy(max_length=10_000)
    )


@pytest.mark.parametrize(
    "url, policy",
    [
        ("https%3A%2F%2Fexample.com%2F%FF", None),
        ("https%3A%2F%2Fexa%2520mple.com", None),
        ("https%3A%2F%2Fexample.com%2Fa%09b", None),
        ("http://exa\tmple.com/", None),
        ("http://example.com/\x00", None),
        ("ws://example.com/", CanonicalPolicy(schemes={"ws"})),
        ("http://example.com/a", CanonicalPolicy(merge_schemes=True)),
        ("http://example.com/a", CanonicalPolicy(lowercase_path=True)),
        ("http://example.com/a#f", CanonicalPolicy(keep_fragment=True)),
        ("http://example.com/?a=1;b=2", CanonicalPolicy(semicolon_separator=True)),
        ("http://example.com:99999/", None),
        ("http://a..b/", None),
        ("page.html", None),
        (b"http://example.com/caf\xc3\xa9", None),
        ("http://example.com/\ud800", None),
    ],
)
def test_fast_path_declines_what_it_leaves_to_the_reference(url, policy):
    assert _canonical_c.fast_canonicalize(url, policy) is None
    assert outcome(_canonical_c.canonicalize, url, policy=policy) == outcome(
        _canonical.canonicalize, url, policy=policy
    )


def test_public_functions_are_the_compiled_ones():
    assert canonical.canonicalize is _canonical_c.canonicalize
    assert canonical.canonicalize_many is _canonical_c.canonicalize_many


@pytest.mark.parametrize(
    "url, base",
    [
        ("http://example.com\\a", None),
        ("http://example.com/a?b=\\", None),
        ("http:/example.com/", None),
        ("https:example.com", None),
        ("http:g", "http://a/b"),
        ("\\\\g\\x", "http://a/b"),
        ("http://0x7f.1/", None),
        ("http://3279880203/", None),
        ("http://1.2.3.4.5/", None),
        ("http://01.2.3.4/", None),
        ("http://example%2Ecom/", None),
        ("http://a.1/", None),
    ],
)
def test_fast_path_declines_what_policy_2_reads_otherwise(url, base):
    assert _canonical_c.fast_canonicalize(url, DEFAULT_POLICY, base) is None
    assert outcome(_canonical_c.canonicalize, url, base=base) == outcome(_canonical.canonicalize, url, base=base)


@pytest.mark.parametrize(
    "url",
    [
        "http://192.0.2.1/x",
        "http://192.0.2.1.:8080/",
        "http://xn--bcher-kva.example/",
        "http://a.XN--bcher-kva.example/",
        "http://1a.example/",
    ],
)
def test_fast_path_answers_plain_ipv4_and_a_labels_under_policy_2(url):
    assert _canonical_c.fast_canonicalize(url, DEFAULT_POLICY) == _canonical.canonicalize(url)


def test_batch_with_every_kind_of_row_same_as_the_reference():
    # Rows the batch canonicalizes without the GIL, and those it hands back to be taken one at
    # a time (hosts for the reference's rules, wrapped links) or to the reference (declined).
    urls = [
        "https://example.com/a?b=1",
        "http://b\u00fccher.example/x",
        "http://[2001:DB8::1]/",
        "HTTPS%3a%2f%2fExample.com%2Fa",
        b"http://example.com/caf\xc3\xa9",
        b"http://example.com/\xff",
        "http://example.com/\ud800",
        "page.html",
        "https://example.com/" + "%41" * 3000,
        "https://example.com/?" + "&".join(f"k{i}=v{i}" for i in range(100, 0, -1)),
        "  http://a.example/ ",
        # Non-ASCII str of each width, encoded in C; a long one, encoded with the GIL.
        "http://example.com/caf\u00e9/\u4e2d?q=\U0001f600",
        "http://example.com/" + "\u00e9" * 600,
        "http://b\u00fccher.example/\ud800",
    ]
    policy = CanonicalPolicy(max_length=10_000)
    for batch in (urls, urls * 50):
        assert _answers(_canonical_c.canonicalize_many(batch, policy=policy)) == _answers(
            _canonical.canonicalize_many(batch, policy=policy)
        )
    for batch in (urls + [7], [7] + urls * 50):  # an item that is no URL: the same TypeError
        with pytest.raises(TypeError) as fast:
            _canonical_c.canonicalize_many(batch, policy=policy)
        with pytest.raises(TypeError) as reference:
            _canonical.canonicalize_many(batch, policy=policy)
        assert str(fast.value) == str(reference.value) == "URL must be str or bytes, got int"
    relative = ["../x", "?q=1", "//cdn.example.net/a", "#f", "sub/dir/", "http://b\u00fccher.example/"]
    base = "http://b\u00fccher.example/a/b?c=d"
    assert _canonical_c.canonicalize_many(relative, base=base) == _canonical.canonicalize_many(relative, base=base)


def _answers(result):
    return result.urls, [(i, str(e)) for i, e in result.errors.items()]


def test_many_drop_and_keep_keys_same_as_the_reference():
    # The compiled plan holds the keys in a hash table: hundreds of them collide in it.
    policy = CanonicalPolicy(
        drop_params={f"k{i}" for i in range(0, 600, 2)} | {"caf\u00e9"},
        keep_params={f"k{i}" for i in range(0, 600, 10)},
    )
    urls = [f"https://example.com/?k{i}=1&K{i + 1}=2&caf%C3%A9=3&CAF\u00c9=4&k{i}x=5" for i in range(600)]
    got = _canonical_c.canonicalize_many(urls, policy=policy)
    assert got == _canonical.canonicalize_many(urls, policy=policy)
    assert got.urls[0] == "https://example.com/?CAF%C3%89=4&K1=2&k0=1&k0x=5"


@pytest.mark.parametrize("corpus", ["crawl", "hosts"])
def test_batches_in_two_threads_at_once_same_as_the_reference(corpus):
    # "hosts": more IDNA and IPv6 hosts than the plan's table of authorities has slots, so that
    # one thread rewrites entries while the other reads them without the GIL.
    urls = (
        _corpus(4_000, seed=5)
        if corpus == "crawl"
        else [
            f"http://b\u00fccher{i % 700}.example/{i}" if i % 3 else f"http://[2001:db8::{i % 500:x}]/{i}"
            for i in range(4_000)
        ]
    )
    expected = _canonical.canonicalize_many(urls)
    answers = {}

    def run(thread):
        answers[thread] = [_canonical_c.canonicalize_many(urls[start : start + 500]) for start in range(0, 4_000, 500)]

    threads = [threading.Thread(target=run, args=(thread,)) for thread in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for thread in range(2):
        assert [url for batch in answers[thread] for url in batch.urls] == expected.urls


@pytest.mark.parametrize("byte", [0x00, 0x09, 0x1F, 0x7F, 0x5C, 0x80, 0xFF])
def test_fast_path_finds_a_declined_byte_anywhere(byte):
    # The fast path looks for them eight bytes a step: every offset of a word, and the tail.
    for position in range(19, 33):  # in the path
        raw = bytearray(b"http://example.com/abcdefghijklmno")
        raw[position] = byte
        for url in (bytes(raw), raw.decode("latin-1")):
            fast = _canonical_c.fast_canonicalize(url, DEFAULT_POLICY)
            declined = byte < 0x20 or byte == 0x7F or byte == 0x5C or (byte >= 0x80 and isinstance(url, bytes))
            assert (fast is None) == declined, (url, fast)
            assert outcome(_canonical_c.canonicalize, url) == outcome(_canonical.canonicalize, url)
