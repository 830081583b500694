"""Hypothesis properties of the canonicalizer: ASCII output, idempotence, and only InvalidURL/TypeError,
under policy 3 (the default), policy 2 (``POLICY_V2``) and policy 1 (``POLICY_V1``)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawldedup import POLICY_V1, POLICY_V2, CanonicalPolicy, HostRule, InvalidURL

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

# Bounded so that the whole file stays within a few seconds per build.
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

EVERYTHING_ON = CanonicalPolicy(
    schemes={"http", "https", "ftp", "ws", "wss"},
    merge_schemes=True,
    strip_www=True,
    keep_userinfo=True,
    lowercase_path=True,
    strip_trailing_slash=False,
    semicolon_separator=True,
    keep_fragment=True,
    keep_params={"ref"},
)
POLICIES = st.sampled_from(
    [
        None,
        EVERYTHING_ON,
        CanonicalPolicy(drop_params=(), drop_prefixes=()),
        POLICY_V1,
        POLICY_V2,
        dataclasses.replace(EVERYTHING_ON, version=1),
        dataclasses.replace(EVERYTHING_ON, version=2),
        CanonicalPolicy(host_rules=[HostRule("example.com", drop_params={"id"}, keep_fragment=True)]),
    ]
)

REAL_URLS = [
    "HTTPS://Example.com:443/Products/?utm_source=x&id=9",
    "https%3A%2F%2Fmain.m.taobao.com%2Fdetail%2Findex.html%3Fid%3D123",
    "http://user:pass@www.Bücher.example.:080/a/./b/../%7ec/%e4%b8%ad?q=a+b&q=a%20b&=&&x#frag",
    "http://[::FFFF:192.0.2.1]:8080/p;x=1?b=2;a=1#a#b",
    "https://www.example.com/search?q=caf%C3%A9&page=2&fbclid=1",
    "ws://chat.example.com:80/room?id=7",
]
# Pieces that URL parsers trip over, spliced into real URLs.
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
        "\uff0e",
        "é",
        "中",
        "\u00a0",
        "\u200d",
        "ß",
        "::",
        ":80",
        ":0443",
        "[::1]",
        "[",
        "]",
        "@",
        "utm_",
        "&&",
        "=",
        "+",
        "\x00",
        "\x7f",
        "\ud800",
        "🙂",
        # Policy 2's readings: backslashes, escaped hosts, WHATWG IPv4, C0 controls.
        "\\\\",
        "/\\",
        "%2E",
        "%41",
        "0x7f.1",
        "3279880203",
        "0300.",
        "1.2.3.4.5",
        ".256",
        "0x",
        "\x01",
        "\x1f",
        "http:",
    ]
)


@st.composite
def mutated_urls(draw):
    url = draw(st.sampled_from(REAL_URLS))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(url)))
        cut = draw(st.integers(0, 3))
        url = url[:at] + draw(PIECES) + url[at + cut :]
    return url


URL_LIKE = st.one_of(
    mutated_urls(),
    st.text(max_size=60),
    st.builds(
        lambda s, h, rest: f"{s}://{h}{rest}",
        st.sampled_from(["http", "HTTPS", "ws", "ftp"]),
        st.text(max_size=20),
        st.text(max_size=40),
    ),
)


@pytest.fixture
def impl(canonical_impl):
    """A build of the canonicalizer: the pure-Python reference ("py") or its compiled fast path ("cy")."""
    return canonical_impl


def _try(impl, url, base=None, policy=None):
    try:
        return impl.canonicalize(url, base=base, policy=policy)
    except InvalidURL as exc:
        assert str(exc)
        return None


@FAST
@given(url=URL_LIKE, policy=POLICIES)
def test_output_is_ascii_and_idempotent(impl, url, policy):
    out = _try(impl, url, policy=policy)
    if out is not None:
        assert out.isascii()
        assert impl.canonicalize(out, policy=policy) == out
        assert impl.canonicalize(out.encode("ascii"), policy=policy) == out


@FAST
@given(
    url=URL_LIKE,
    base=st.sampled_from(["http://a/b/c/d;p?q", "https://x.example", "http://h/%2e%2e/d/"]),
    policy=POLICIES,
)
def test_resolved_output_is_idempotent(impl, url, base, policy):
    out = _try(impl, url, base=base, policy=policy)
    if out is not None:
        assert out.isascii()
        assert impl.canonicalize(out, policy=policy) == out


@FAST
@given(data=st.binary(max_size=80), policy=POLICIES)
def test_arbitrary_bytes_only_raise_invalid_url(impl, data, policy):
    out = _try(impl, data, policy=policy)
    if out is not None:
        assert out.isascii()


@FAST
@given(url=st.text(max_size=80), base=st.one_of(st.none(), st.text(max_size=30)), policy=POLICIES)
def test_arbitrary_text_only_raises_invalid_url(impl, url, base, policy):
    _try(impl, url, base=base, policy=policy)


@FAST
@given(url=mutated_urls())
def test_batch_agrees_with_single_calls(impl, url):
    result = impl.canonicalize_many([url, url.encode("utf-8", "surrogatepass")])
    single = _try(impl, url)
    assert result.urls[0] == single
    assert (0 in result.errors) == (single is None)


@FAST
@given(
    value=st.one_of(
        st.integers(),
        st.floats(),
        st.lists(st.text(max_size=3), max_size=2),
        st.binary().map(bytearray),
        st.binary().map(memoryview),
    )
)
def test_other_types_are_type_errors(impl, value):
    with pytest.raises(TypeError):
        impl.canonicalize(value)


@FAST
@given(
    key=st.sampled_from(["utm_source", "UTM_Medium", "gclid", "FbClid", "JSESSIONID"]),
    value=st.text(max_size=10),
    escape=st.booleans(),
)
def test_tracking_keys_vanish_however_spelled(impl, key, value, escape):
    spelled = "".join(f"%{ord(c):02x}" for c in key) if escape else key
    url = "http://example.com/p?id=1&" + spelled + "=" + value.replace("#", "").replace("&", "")
    out = _try(impl, url)
    if out is not None:
        assert out == "http://example.com/p?id=1"
