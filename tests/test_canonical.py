"""Canonicalization to docs/canonical-policy.md, table-driven, against every build of the canonicalizer.

Case ids name the rule (``r1-`` … ``r10-``), the spec's own examples (``spec-``), and cases
adapted from peers' suites (``w3lib-``: scrapy/w3lib tests/test_url.py; ``urlnorm-``:
niksite/url-normalize tests; ``rfc3986-``: RFC 3986 §5.4; ``whatwg-``: WHATWG URL test data).
Expected values are what our spec says, which is not always what the peer says.

Every table here holds policy 1's cases and runs under the three policies (``v1``: ``POLICY_V1``,
``v2``: ``POLICY_V2``, ``v3``: ``DEFAULT_POLICY``). Policy 2 gives the same answer except for
the cases listed by id in ``POLICY_2_ANSWERS``, policy 3 as policy 2 but for those of
``POLICY_3_ANSWERS``; their own rules are tested in tests/test_canonical_policy2.py and
tests/test_canonical_policy3.py.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

import crawldedup
from crawldedup import (
    DEFAULT_POLICY,
    POLICY_V1,
    POLICY_V2,
    Canonicalized,
    CanonicalPolicy,
    HostRule,
    InvalidURL,
    canonical,
)
from crawldedup.canonical import _canonical_py as _canonical

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins


@pytest.fixture
def impl(canonical_impl):
    """A build of the canonicalizer: the pure-Python reference ("py") or its compiled fast path ("cy")."""
    return canonical_impl


@pytest.fixture(params=[DEFAULT_POLICY, POLICY_V2, POLICY_V1], ids=["v3", "v2", "v1"])
def policy(request):
    """Policy 3 (the default), policy 2 and policy 1 in turn."""
    return request.param


def case(raw, expected, id):
    return pytest.param(raw, expected, id=id)


#: Case id -> what policy 2 answers where it differs from policy 1 (docs/canonical-policy.md,
#: "Policy 2": rule 1 controls, 2 slashes, 3 backslash, 4 escaped hosts, 5 IPv4). An answer
#: ("InvalidURL", reason) is a refusal whose message holds reason.
POLICY_2_ANSWERS = {
    "r5-ipv4-kept-as-written": "http://192.168.0.1/",  # rule 5: leading zeros are octal
    "r5-ipv4-hex-kept-as-written": "http://127.0.0.1/",  # rule 5: 0x7f.1
    "r7-unsafe-encoded-trailing-space-stripped": "http://example.com/%22%3C%3E/%5E%60%7B%7C%7D%5B%5D",  # rule 3
    "r7-unsafe-encoded": "http://example.com/%22%3C%3E/%5E%60%7B%7C%7D%5B%5D%20x",  # rule 3
    "r7-backslash-not-slash": "http://example.com/a/b",  # rule 3
    "w3lib-unwise-chars": "http://localhost:8001/unwise%7B,%7D,%7C,/,%5E,%5B,%5D,%60?%5B%5D=%7C&%7C=%5B%5D",  # rule 3
    "rfc3986-strict-http-g-is-absolute": "http://a/b/c/g",  # rule 2: same scheme as the base
    "r3-backslashes-are-path": "http://evil.example/x",  # rules 2 and 3
    "r1-nul": "http://example.com/",  # rule 1: C0 stripped at the end
    "r1-del": "http://example.com/%7F",  # rule 1: encoded inside the path
    "r1-escape-char": "http://example.com/%1B%5B31m",  # rule 1
    "r1-formfeed-inside": ("InvalidURL", "host may hold"),  # rule 1: a control in the host
    "r2-wrapped-nul": "http://example.com/",  # rule 1 on the unwrapped text
    "r4-no-authority": "http://example.com/",  # rule 2
    "r4-one-slash": "http://example.com/",  # rule 2
    "r4-backslashes-not-slashes": "http://example.com/",  # rules 2 and 3
    "r5-empty-host": "http://path/",  # rule 2: http:///path is host path
    "r5-percent-in-host": "http://exaample.com/",  # rule 4
    "r5-backslash-in-host": "http://exa/mple.com",  # rule 3: "\\" ends the host
}


#: Case id -> what policy 3 answers where it differs from policy 2 (docs/canonical-policy.md,
#: "Policy 3": rule 1 hosts, rule 2 the drop list).
POLICY_3_ANSWERS = {
    "urlnorm-filter-ref": "https://google.com:8080/search?q=test&ref=test",  # rule 2: ref is kept
    # Rule 1: empty and long labels stay (VerifyDnsLength=false), as do hyphens and underscores.
    "r5-empty-label": "http://a..b/",
    "r5-leading-dot": "http://.example.com/",
    "r5-two-trailing-dots": "http://example.com../",
    "r5-label-too-long": "http://" + "a" * 64 + ".com/",
    "r5-idna-empty-label": "http://xn--bcher-kva..example/",
    "r5-idna-rejects-underscore-label": "http://ex_ample.xn--bcher-kva.example/",
    "r5-idna-trailing-hyphen": "http://xn----nbcm6a3cbm3c1a.example/",
    "r5-star-in-host": "http://exa*mple.com/",  # not a forbidden domain code point
    "r1-formfeed-inside": ("InvalidURL", "forbidden domain code point"),
    "w3lib-idna-symbol-host-refused": "http://xn--hgi.ws:81/admin",  # rule 1: symbols are accepted
    "r5-idna-zero-width-joiner": ("InvalidURL", "domain to ASCII"),  # CheckJoiners
    "whatwg-fullwidth-percent-host": ("InvalidURL", "forbidden domain code point"),
    "r5-nbsp-in-host": ("InvalidURL", "forbidden domain code point"),
}


def expect(request, policy, expected):
    """The answer a table row expects under ``policy``."""
    name = request.node.callspec.id.split("-", 2)[-1]
    if policy.version >= 3 and name in POLICY_3_ANSWERS:
        return POLICY_3_ANSWERS[name]
    if policy.version >= 2:
        return POLICY_2_ANSWERS.get(name, expected)
    return expected


def check(answer, function, *args, **kwargs):
    """``function(*args, **kwargs)`` gives ``answer``: a string, "InvalidURL", or ("InvalidURL", reason)."""
    if answer == "InvalidURL" or isinstance(answer, tuple):
        with pytest.raises(InvalidURL) as info:
            function(*args, **kwargs)
        if isinstance(answer, tuple):
            assert answer[1] in str(info.value)
        return
    assert function(*args, **kwargs) == answer


# ----- default policy: input -> canonical ------------------------------------------------------
CASES = [
    # The examples of docs/canonical-policy.md, verbatim.
    case("HTTPS://Example.com:443/Products/?utm_source=x&id=9", "https://example.com/Products?id=9", "spec-example-1"),
    case("https://example.com/products?id=9&utm_source=y", "https://example.com/products?id=9", "spec-example-2"),
    case(
        "https%3A%2F%2Fmain.m.taobao.com%2Fdetail%2Findex.html%3Fid%3D123",
        "https://main.m.taobao.com/detail/index.html?id=123",
        "spec-example-3-wrapped",
    ),
    case(
        "https://detail.example.com/item?spm=123&id=1001",
        "https://detail.example.com/item?id=1001",
        "spec-example-4-spm",
    ),
    case("http://example.com:80/a/./b/../c#top", "http://example.com/a/c", "spec-example-5"),
    case("http://example.com/%7euser/%e4%b8%ad", "http://example.com/~user/%E4%B8%AD", "spec-example-6"),
    case("http://example.com/search?q=a%20b", "http://example.com/search?q=a+b", "spec-example-8-pct20"),
    case("http://example.com/search?q=a+b", "http://example.com/search?q=a+b", "spec-example-8-plus"),
    # Rule 1: input.
    case("  http://example.com/a \t\n", "http://example.com/a", "r1-strip-ends"),
    case("\f\vhttp://example.com/\v", "http://example.com/", "r1-strip-formfeed-vtab"),
    case("http://exa\tmple.com/p\na\rth", "http://example.com/path", "r1-tab-cr-lf-removed-inside"),
    case("http://example.com/a\u00a0b", "http://example.com/a%C2%A0b", "r1-nbsp-not-stripped-encoded"),
    case("http://example.com/a\u00a0", "http://example.com/a%C2%A0", "r1-trailing-nbsp-not-stripped"),
    case(b"http://example.com/caf\xc3\xa9", "http://example.com/caf%C3%A9", "r1-bytes-utf8"),
    case("http://example.com/a b", "http://example.com/a%20b", "r1-inner-space-kept-encoded"),
    # Rule 2: wrapped URLs.
    case("HTTPS%3a%2f%2fExample.com%2Fa%2Fb", "https://example.com/a/b", "r2-wrapped-lower-hex-upper-scheme"),
    case("http%3A%2F%2Fexample.com%2Fa+b%3Fq%3Dx+y", "http://example.com/a+b?q=x+y", "r2-wrapped-plus-stays-plus"),
    case("http%3A%2F%2Fexample.com%2Fa%2520b", "http://example.com/a%20b", "r2-wrapped-decoded-once-only"),
    case("http%3A%2F%2Fexample.com%2F%09x%20", "http://example.com/x", "r2-wrapped-rule1-reapplied"),
    case("http%3A%2F%2Fexample.com%2F%C3%A9", "http://example.com/%C3%A9", "r2-wrapped-utf8"),
    case("http://example.com/a%2Fb%3A%2F%2Fc", "http://example.com/a%2Fb%3A%2F%2Fc", "r2-not-leading-untouched"),
    case(
        "http://example.com/r?u=https%3A%2F%2Fx.example%2F",
        "http://example.com/r?u=https%3A%2F%2Fx.example%2F",
        "r2-wrapped-inside-query-untouched",
    ),
    # Rule 4: scheme.
    case("HtTp://example.com/", "http://example.com/", "r4-scheme-lowercased"),
    case("https://example.com/", "https://example.com/", "r4-https-kept-distinct"),
    # Rule 5: host.
    case("http://WWW.Example.COM/", "http://www.example.com/", "r5-host-lowercased-www-kept"),
    case("http://my_host.example.com/", "http://my_host.example.com/", "r5-underscore-allowed"),
    case("http://Bücher.example/", "http://xn--bcher-kva.example/", "r5-idna-spec"),
    case("http://faß.de/", "http://xn--fa-hia.de/", "r5-idna-nontransitional-sharp-s"),
    case("http://bücher\u3002example/", "http://xn--bcher-kva.example/", "r5-ideographic-full-stop"),
    case("http://bücher\uff0eexample/", "http://xn--bcher-kva.example/", "r5-fullwidth-full-stop"),
    case("http://bücher\uff61example/", "http://xn--bcher-kva.example/", "r5-halfwidth-ideographic-full-stop"),
    case("http://ＥＸＡＭＰＬＥ.com/", "http://example.com/", "r5-fullwidth-letters-mapped"),
    case("http://example.com./", "http://example.com/", "r5-one-trailing-dot-removed"),
    case("http://bücher.example./", "http://xn--bcher-kva.example/", "r5-trailing-dot-after-idna"),
    case("http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/", "r5-punycode-kept"),
    case("http://192.168.000.001/", "http://192.168.000.001/", "r5-ipv4-kept-as-written"),
    case("http://0x7f.1/", "http://0x7f.1/", "r5-ipv4-hex-kept-as-written"),
    case("http://[2001:DB8:0:0:0:0:0:1]/", "http://[2001:db8::1]/", "r5-ipv6-rfc5952"),
    case("http://[2001:db8:0:0:1:0:0:1]/", "http://[2001:db8::1:0:0:1]/", "r5-ipv6-first-longest-run"),
    case("http://[2001:db8:0:1:1:1:1:1]/", "http://[2001:db8:0:1:1:1:1:1]/", "r5-ipv6-single-zero-not-compressed"),
    case("http://[0:0:0:0:0:0:0:0]/", "http://[::]/", "r5-ipv6-all-zero"),
    case("http://[::FFFF:192.0.2.1]/", "http://[::ffff:192.0.2.1]/", "r5-ipv6-mapped-dotted-quad"),
    case("http://[::ffff:c000:0201]/", "http://[::ffff:192.0.2.1]/", "r5-ipv6-mapped-from-hex"),
    case("http://[::1]:8080/", "http://[::1]:8080/", "r5-ipv6-with-port"),
    case("http://[::1]:80/", "http://[::1]/", "r5-ipv6-default-port"),
    case("http://www.com/", "http://www.com/", "r5-www-kept-by-default"),
    case("http://user:pass@example.com/", "http://example.com/", "r5-userinfo-dropped"),
    case("http://a@b@example.com/", "http://example.com/", "r5-userinfo-split-at-last-at"),
    case("http://@example.com/", "http://example.com/", "r5-empty-userinfo"),
    # Rule 6: port.
    case("http://example.com:080/", "http://example.com/", "r6-default-port-leading-zero"),
    case("https://example.com:443/", "https://example.com/", "r6-https-default"),
    case("https://example.com:80/", "https://example.com:80/", "r6-other-scheme-default-kept"),
    case("http://example.com:/", "http://example.com/", "r6-empty-port"),
    case("http://example.com:08080/", "http://example.com:8080/", "r6-leading-zeros"),
    case("http://example.com:0/", "http://example.com:0/", "r6-port-zero"),
    case("http://example.com:65535/", "http://example.com:65535/", "r6-port-max"),
    case("http://example.com:0000000000000000000000081/", "http://example.com:81/", "r6-many-leading-zeros"),
    # Rule 7: path.
    case("http://example.com", "http://example.com/", "r7-empty-path"),
    case("http://example.com?a=1", "http://example.com/?a=1", "r7-empty-path-with-query"),
    case("http://example.com/Products", "http://example.com/Products", "r7-case-kept"),
    case("http://example.com/a/b/../../..", "http://example.com/", "r7-dots-above-root"),
    case("http://example.com/a/%2E%2E/b", "http://example.com/b", "r7-escaped-dot-dot"),
    case("http://example.com/a/%2e/b", "http://example.com/a/b", "r7-escaped-dot-lowercase"),
    case("http://example.com/a/.%2E/b", "http://example.com/b", "r7-half-escaped-dot-dot"),
    case("http://example.com/a..b/.c/c.", "http://example.com/a..b/.c/c.", "r7-dots-in-names-kept"),
    case("http://example.com/a%2fb", "http://example.com/a%2Fb", "r7-escape-uppercased"),
    case("http://example.com/a%2Fb", "http://example.com/a%2Fb", "r7-reserved-not-decoded"),
    case("http://example.com/a%41%7A%2D%2E%5F%7E", "http://example.com/aAz-._~", "r7-unreserved-decoded"),
    case(
        "http://example.com/%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A%40",
        "http://example.com/%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A%40",
        "r7-sub-delims-escapes-kept",
    ),
    case("http://example.com/!$&'()*+,;=:@", "http://example.com/!$&'()*+,;=:@", "r7-sub-delims-raw-kept"),
    case(
        'http://example.com/"<>\\^`{|}[] ',
        "http://example.com/%22%3C%3E%5C%5E%60%7B%7C%7D%5B%5D",
        "r7-unsafe-encoded-trailing-space-stripped",
    ),
    case(
        'http://example.com/"<>\\^`{|}[] x',
        "http://example.com/%22%3C%3E%5C%5E%60%7B%7C%7D%5B%5D%20x",
        "r7-unsafe-encoded",
    ),
    case("http://example.com/a\\b", "http://example.com/a%5Cb", "r7-backslash-not-slash"),
    case("http://example.com/100%", "http://example.com/100%25", "r7-stray-percent-end"),
    case("http://example.com/%zz%4", "http://example.com/%25zz%254", "r7-stray-percent-bad-hex"),
    case("http://example.com/%25", "http://example.com/%25", "r7-escaped-percent-kept"),
    case("http://example.com/%E9t%C3%A9", "http://example.com/%E9t%C3%A9", "r7-non-utf8-escape-kept"),
    case("http://example.com/中文", "http://example.com/%E4%B8%AD%E6%96%87", "r7-non-ascii-utf8"),
    case("http://example.com/dir/", "http://example.com/dir", "r7-trailing-slash"),
    case("http://example.com/dir//", "http://example.com/dir", "r7-trailing-slashes"),
    case("http://example.com//", "http://example.com/", "r7-only-slashes"),
    case("http://example.com/a//b", "http://example.com/a//b", "r7-inner-empty-segment-kept"),
    case("http://example.com/a/b/.", "http://example.com/a/b", "r7-dot-last-then-trailing-slash"),
    # Rule 8: query.
    case("http://example.com/?", "http://example.com/", "r8-empty-query"),
    case("http://example.com/?&a=1", "http://example.com/?a=1", "r8-leading-empty-segment"),
    case("http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2", "r8-empty-segments"),
    case("http://example.com/?=", "http://example.com/", "r8-bare-equals"),
    case("http://example.com/?a=1&=", "http://example.com/?a=1", "r8-bare-equals-among"),
    case("http://example.com/?a=", "http://example.com/?a=", "r8-blank-value-kept"),
    case("http://example.com/?flag", "http://example.com/?flag=", "r8-key-without-equals"),
    case("http://example.com/?=1", "http://example.com/?=1", "r8-empty-key-kept"),
    case("http://example.com/?a=b=c", "http://example.com/?a=b%3Dc", "r8-equals-in-value-encoded"),
    case("http://example.com/?b=2&a=1&c=0", "http://example.com/?a=1&b=2&c=0", "r8-sorted"),
    case("http://example.com/?a=2&a=1&a=10", "http://example.com/?a=1&a=10&a=2", "r8-sorted-by-value-ascii"),
    case("http://example.com/?B=1&a=1", "http://example.com/?B=1&a=1", "r8-sort-ascii-uppercase-first"),
    case("http://example.com/?a=1;b=2", "http://example.com/?a=1%3Bb%3D2", "r8-semicolon-not-separator"),
    case(
        "http://example.com/?utm_source=a&UTM_MEDIUM=b&Utm_Foo=c&id=1",
        "http://example.com/?id=1",
        "r8-utm-prefix-any-case",
    ),
    case("http://example.com/?utm%5Fsource=a&id=1", "http://example.com/?id=1", "r8-tracking-decoded-key"),
    case("http://example.com/?utm%5F+x=1&id=1", "http://example.com/?id=1", "r8-prefix-on-decoded-key-plus"),
    case(
        "http://example.com/?"
        + "&".join(f"{k}=1" for k in sorted(DEFAULT_POLICY.drop_params & POLICY_V2.drop_params))
        + "&id=1",
        "http://example.com/?id=1",
        "r8-every-default-drop-param",
    ),
    case("http://example.com/?GCLID=1&FbClId=2&id=1", "http://example.com/?id=1", "r8-drop-params-case-insensitive"),
    case(
        "http://example.com/?id=1&page=2&sort=a&filter=b",
        "http://example.com/?filter=b&id=1&page=2&sort=a",
        "r8-content-params-kept",
    ),
    case(
        "http://example.com/?refresh=1&from_date=2&sidx=3",
        "http://example.com/?from_date=2&refresh=1&sidx=3",
        "r8-exact-names-not-prefixes",
    ),
    case("http://example.com/?q=a%2Bb", "http://example.com/?q=a%2Bb", "r8-real-plus-kept"),
    case("http://example.com/?q=%7e%41", "http://example.com/?q=~A", "r8-unreserved-decoded"),
    case("http://example.com/?q=%e9", "http://example.com/?q=%E9", "r8-non-utf8-byte-kept"),
    case("http://example.com/?q=é", "http://example.com/?q=%C3%A9", "r8-non-ascii-utf8"),
    case("http://example.com/?q=100%", "http://example.com/?q=100%25", "r8-stray-percent"),
    case("http://example.com/?q=a?b/c:d@e", "http://example.com/?q=a%3Fb%2Fc%3Ad%40e", "r8-reserved-encoded"),
    case("http://example.com/?q=(x)*!", "http://example.com/?q=%28x%29%2A%21", "r8-sub-delims-encoded"),
    case("http://example.com/?utm_source=x", "http://example.com/", "r8-query-emptied-drops-mark"),
    case("http://example.com/?a+b=c+d", "http://example.com/?a+b=c+d", "r8-plus-in-key"),
    # Rule 9: fragment.
    case("http://example.com/a#frag", "http://example.com/a", "r9-fragment-dropped"),
    case("http://example.com/a?b=1#", "http://example.com/a?b=1", "r9-empty-fragment-dropped"),
    # Rule 10 / 8: '?' in the query, '#' after the query.
    case("http://example.com/a?q=1#f?g", "http://example.com/a?q=1", "r10-fragment-after-query"),
    # Adapted from scrapy/w3lib tests/test_url.py (CanonicalizeUrlTest).
    case("http://www.example.com/", "http://www.example.com/", "w3lib-simplest"),
    case(b"http://www.example.com", "http://www.example.com/", "w3lib-return-str-bytes"),
    case("http://www.example.com/do?a=1&b=2&c=3", "http://www.example.com/do?a=1&b=2&c=3", "w3lib-typical-1"),
    case("http://www.example.com/do?c=1&b=2&a=3", "http://www.example.com/do?a=3&b=2&c=1", "w3lib-typical-2"),
    case("http://www.example.com/do?&a=1", "http://www.example.com/do?a=1", "w3lib-typical-3"),
    case("http://www.example.com:8888/do?a=1&b=2&c=3", "http://www.example.com:8888/do?a=1&b=2&c=3", "w3lib-port"),
    case("http://www.example.com:/do?a=1&b=2&c=3", "http://www.example.com/do?a=1&b=2&c=3", "w3lib-empty-port"),
    case("http://www.example.com/do?c=3&b=5&b=2&a=50", "http://www.example.com/do?a=50&b=2&b=5&c=3", "w3lib-sorting"),
    case("http://www.example.com/do?b=&a=2", "http://www.example.com/do?a=2&b=", "w3lib-keep-blank-values"),
    case("http://www.example.com/do?b=&c&a=2", "http://www.example.com/do?a=2&b=&c=", "w3lib-blank-and-bare-key"),
    case("http://www.example.com/do?1750,4", "http://www.example.com/do?1750%2C4=", "w3lib-comma-key"),
    case("http://www.example.com/do?q=a space&a=1", "http://www.example.com/do?a=1&q=a+space", "w3lib-spaces-raw"),
    case("http://www.example.com/do?q=a+space&a=1", "http://www.example.com/do?a=1&q=a+space", "w3lib-spaces-plus"),
    case("http://www.example.com/do?q=a%20space&a=1", "http://www.example.com/do?a=1&q=a+space", "w3lib-spaces-pct20"),
    case("http://www.example.com/résumé", "http://www.example.com/r%C3%A9sum%C3%A9", "w3lib-unicode-path"),
    case(
        "http://www.example.com/résumé?q=résumé",
        "http://www.example.com/r%C3%A9sum%C3%A9?q=r%C3%A9sum%C3%A9",
        "w3lib-unicode-query",
    ),
    case("http://www.example.com/r%c3%a9sum%c3%a9", "http://www.example.com/r%C3%A9sum%C3%A9", "w3lib-pct-paths-upper"),
    case("http://www.example.com/a%a3do", "http://www.example.com/a%A3do", "w3lib-pct-latin1-path"),
    case(
        "http://www.example.com/a%a3do?q=r%c3%a9sum%c3%a9",
        "http://www.example.com/a%A3do?q=r%C3%A9sum%C3%A9",
        "w3lib-pct-latin1-path-utf8-query",
    ),
    case(
        "http://www.example.com/a%a3do?q=r%e9sum%e9",
        "http://www.example.com/a%A3do?q=r%E9sum%E9",
        "w3lib-pct-latin1-both",
    ),
    case("http://www.example.com/do?k=b%a3", "http://www.example.com/do?k=b%A3", "w3lib-pct-query-latin1"),
    case(
        "http://www.example.com/do?k=r%c3%a9sum%c3%a9",
        "http://www.example.com/do?k=r%C3%A9sum%C3%A9",
        "w3lib-pct-query-utf8",
    ),
    case("http://www.example.com/a do?a=1", "http://www.example.com/a%20do?a=1", "w3lib-space-in-path"),
    case("http://www.example.com/a %20do?a=1", "http://www.example.com/a%20%20do?a=1", "w3lib-space-and-pct20-path"),
    case("http://www.example.com/a do£.html?a=1", "http://www.example.com/a%20do%C2%A3.html?a=1", "w3lib-pound-path"),
    case(
        b"http://www.example.com/a do\xc2\xa3.html?a=1",
        "http://www.example.com/a%20do%C2%A3.html?a=1",
        "w3lib-pound-path-bytes",
    ),
    case(
        "http://www.example.com/do?price=£500&a=5&z=3",
        "http://www.example.com/do?a=5&price=%C2%A3500&z=3",
        "w3lib-pound-query",
    ),
    case(
        b"http://www.example.com/do?price(\xc2\xa3)=500&a=1",
        "http://www.example.com/do?a=1&price%28%C2%A3%29=500",
        "w3lib-parens-key",
    ),
    # w3lib keeps user info; credentials never reach a fingerprint store here.
    case("http://user:pass@www.example.com:81/do?now=1", "http://www.example.com:81/do?now=1", "w3lib-auth-and-port"),
    case("http://user:pass@www.example.com/do?a=1#frag", "http://www.example.com/do?a=1", "w3lib-remove-fragment"),
    case(
        "http://www.simplybedrooms.com/White-Bedroom-Furniture/Bedroom-Mirror:-Josephine-Cheval-Mirror.html",
        "http://www.simplybedrooms.com/White-Bedroom-Furniture/Bedroom-Mirror:-Josephine-Cheval-Mirror.html",
        "w3lib-safe-characters",
    ),
    case(
        "http://www.example.com/caf%E9-con-leche.htm",
        "http://www.example.com/caf%E9-con-leche.htm",
        "w3lib-latin1-escape",
    ),
    case("http://www.EXAMPLE.com/", "http://www.example.com/", "w3lib-domain-case"),
    case("http://www.bücher.de?q=bücher", "http://www.xn--bcher-kva.de/?q=b%C3%BCcher", "w3lib-idn"),
    case(
        "http://はじめよう.みんな/?query=サ&maxResults=5",
        "http://xn--p8j9a0d9c9a.xn--q9jyb4c/?maxResults=5&query=%E3%82%B5",
        "w3lib-idn-japanese",
    ),
    case(
        "http://foo.com/AC%2FDC+rocks%3f/?yeah=1",
        "http://foo.com/AC%2FDC+rocks%3F?yeah=1",
        "w3lib-quoted-slash-question",
    ),
    case("http://foo.com/AC%2FDC/", "http://foo.com/AC%2FDC", "w3lib-quoted-slash"),
    case(
        "http://www.example.com/path/to/%23/foo/bar",
        "http://www.example.com/path/to/%23/foo/bar",
        "w3lib-hash-escape-kept",
    ),
    case(
        "http://www.example.com/path/to/%23/foo/bar#frag",
        "http://www.example.com/path/to/%23/foo/bar",
        "w3lib-hash-escape-fragment-dropped",
    ),
    case(
        "http://www.example.com/path/to/%23/foo/bar?url=http%3A%2F%2Fwww.example.com%2Fpath%2Fto%2F%23%2Fbar%2Ffoo",
        "http://www.example.com/path/to/%23/foo/bar?url=http%3A%2F%2Fwww.example.com%2Fpath%2Fto%2F%23%2Fbar%2Ffoo",
        "w3lib-hash-escape-in-query",
    ),
    case(
        "http://www.färgbolaget.nu/färgbolaget",
        "http://www.xn--frgbolaget-q5a.nu/f%C3%A4rgbolaget",
        "w3lib-idna-swedish",
    ),
    case(
        "http://www.räksmörgås.se/?räksmörgås=yes",
        "http://www.xn--rksmrgs-5wao1o.se/?r%C3%A4ksm%C3%B6rg%C3%A5s=yes",
        "w3lib-idna-swedish-query",
    ),
    case("http://www.예비교사.com", "http://www.xn--9d0bm53a3xbzui.com/", "w3lib-idna-korean"),
    case("http://理容ナカムラ.com", "http://xn--lck1c3crb1723bpq4a.com/", "w3lib-idna-japanese"),
    case(
        "http://кто.рф/index.php?domain=Что",
        "http://xn--j1ail.xn--p1ai/index.php?domain=%D0%A7%D1%82%D0%BE",
        "w3lib-idna-russian",
    ),
    case("http://nic.شبكة", "http://nic.xn--ngbc5azd/", "w3lib-idna-arabic"),
    case("https://www.贷款.在线", "https://www.xn--0kwr83e.xn--3ds443g/", "w3lib-idna-chinese"),
    case("https://www3.贷款.xn--3ds443g", "https://www3.xn--0kwr83e.xn--3ds443g/", "w3lib-idna-mixed-punycode"),
    case("http://新华网.中国:80", "http://xn--xkrr14bows.xn--fiqs8s/", "w3lib-idna-with-default-port"),
    case("http://www.example.com/£?unit=µ", "http://www.example.com/%C2%A3?unit=%C2%B5", "w3lib-safe-url-query"),
    case(
        "http://www.example.com/test?p(29)url(http://www.another.net/page)",
        "http://www.example.com/test?p%2829%29url%28http%3A%2F%2Fwww.another.net%2Fpage%29=",
        "w3lib-parens-query-key",
    ),
    case(
        "http://www.example.com/Brochures_&_Paint_Cards&PageSize=200",
        "http://www.example.com/Brochures_&_Paint_Cards&PageSize=200",
        "w3lib-ampersand-in-path",
    ),
    case(
        r"http://localhost:8001/unwise{,},|,\,^,[,],`?|=[]&[]=|",
        "http://localhost:8001/unwise%7B,%7D,%7C,%5C,%5E,%5B,%5D,%60?%5B%5D=%7C&%7C=%5B%5D",
        "w3lib-unwise-chars",
    ),
    case('http://google.com/"hello"', "http://google.com/%22hello%22", "w3lib-quote-path"),
    case("http://www.example.org/../../images/../image", "http://www.example.org/image", "w3lib-download-dots"),
    case("http://www.example.com/test\n.html", "http://www.example.com/test.html", "w3lib-newline-removed"),
    # Adapted from niksite/url-normalize tests.
    case("http://127.0.0.1/", "http://127.0.0.1/", "urlnorm-ipv4"),
    case("http://example.com:8080/", "http://example.com:8080/", "urlnorm-port-kept"),
    case("http://example.com/?a&b", "http://example.com/?a=&b=", "urlnorm-bare-keys"),
    case("http://example.com/?b&a", "http://example.com/?a=&b=", "urlnorm-bare-keys-sorted"),
    case("http://example.com/?q=%5C", "http://example.com/?q=%5C", "urlnorm-backslash-escape"),
    case("http://example.com/?q=%5c", "http://example.com/?q=%5C", "urlnorm-backslash-escape-lower"),
    case("http://example.com/?q=%C3%87", "http://example.com/?q=%C3%87", "urlnorm-utf8-query"),
    case("http://example.com/?q=%C7", "http://example.com/?q=%C7", "urlnorm-non-utf8-byte-preserved"),
    case("http://example.com/?q=C%CC%A7", "http://example.com/?q=C%CC%A7", "urlnorm-no-unicode-normalization"),
    case("http://example.com/?q=%E2%85%A0", "http://example.com/?q=%E2%85%A0", "urlnorm-roman-numeral"),
    case("http://example.com/~jane", "http://example.com/~jane", "urlnorm-tilde"),
    case("http://example.com/%7Ejane", "http://example.com/~jane", "urlnorm-tilde-escaped"),
    case("http://example.com/FOO", "http://example.com/FOO", "urlnorm-path-case"),
    case("http://:@example.com/", "http://example.com/", "urlnorm-empty-userinfo-colon"),
    case("http://127.0.0.1:80/", "http://127.0.0.1/", "urlnorm-ipv4-default-port"),
    case("http://example.com:081/", "http://example.com:81/", "urlnorm-port-leading-zero"),
    case("http://EXAMPLE.COM/", "http://example.com/", "urlnorm-host-case"),
    case("http://example.com/a/../a/b", "http://example.com/a/b", "urlnorm-dot-dot"),
    case("http://example.com/a/./b", "http://example.com/a/b", "urlnorm-dot"),
    # url-normalize rewrites "#!" into _escaped_fragment_; our spec drops every fragment.
    case("http://example.com/#!5753509/hello-world", "http://example.com/", "urlnorm-hashbang-dropped"),
    case("http://USER:pass@www.Example.COM/foo/bar", "http://www.example.com/foo/bar", "urlnorm-userinfo-dropped"),
    case("http://www.example.com./", "http://www.example.com/", "urlnorm-trailing-dot"),
    case("http://www.foo.com.:81/foo", "http://www.foo.com:81/foo", "urlnorm-trailing-dot-port"),
    case("http://www.foo.com/%7ebar", "http://www.foo.com/~bar", "urlnorm-tilde-lower-escape"),
    case(
        "https://пример.испытание/Служебная:Search/Test",
        "https://xn--e1afmkfd.xn--80akhbyknj4f/%D0%A1%D0%BB%D1%83%D0%B6%D0%B5%D0%B1%D0%BD%D0%B0%D1%8F:Search/Test",
        "urlnorm-idna-cyrillic",
    ),
    case("http://example.com/foo/bar/../../../../baz", "http://example.com/baz", "urlnorm-many-dot-dots"),
    case("http://example.com/foo///bar//", "http://example.com/foo///bar", "urlnorm-inner-slashes-kept"),
    case("http://example.com/..foo/.foo/foo../foo.", "http://example.com/..foo/.foo/foo../foo.", "urlnorm-dot-names"),
    case(
        "http://example.com/More+Tea+Vicar%3F/discussion",
        "http://example.com/More+Tea+Vicar%3F/discussion",
        "urlnorm-escaped-question-in-path",
    ),
    case(
        "https://www.google.com/search?q=test&utm_source=test",
        "https://www.google.com/search?q=test",
        "urlnorm-filter-utm",
    ),
    case(
        "https://google.com:8080/search?q=test&ref=test", "https://google.com:8080/search?q=test", "urlnorm-filter-ref"
    ),
    case(
        "https://www.google.com/search?q=test&utm_source=test&ie=utf8",
        "https://www.google.com/search?ie=utf8&q=test",
        "urlnorm-filter-sorted",
    ),
    case("https://example.com/page?", "https://example.com/page", "urlnorm-empty-query"),
    case(
        "https://www\u3002google.com/?q=test&utm_source=x", "https://www.google.com/?q=test", "urlnorm-ideographic-dot"
    ),
    case("https://[2001:DB8::1]:8080/?q=test&utm_source=x", "https://[2001:db8::1]:8080/?q=test", "urlnorm-ipv6-port"),
    case("https://example.com/a ", "https://example.com/a", "urlnorm-trailing-space-is-stripped-input"),
    case("https://example.com/?q=why?", "https://example.com/?q=why%3F", "urlnorm-question-in-query"),
    # Adapted from the WHATWG URL test data (urltestdata.json): hosts, IPv6, IDNA.
    case("http://[0:0:0:0:0:0:13.1.68.3]/", "http://[::d01:4403]/", "whatwg-ipv6-embedded-ipv4"),
    case("http://[::127.0.0.1]/", "http://[::7f00:1]/", "whatwg-ipv6-compat-ipv4"),
    case("http://[1:0::]/", "http://[1::]/", "whatwg-ipv6-trailing-compression"),
    case("http://GOO\u200b\u2060\ufeffgoo.com/", "http://googoo.com/", "whatwg-idna-ignored-code-points"),
    case("http://www.foo\u3002bar.com/", "http://www.foo.bar.com/", "whatwg-ideographic-full-stop"),
    case("http://\uff27\uff4f.com/", "http://go.com/", "whatwg-fullwidth-go"),
    case("http://你好你好/", "http://xn--6qqa088eba/", "whatwg-idna-chinese"),
    case("https://faß.ExAmPlE/", "https://xn--fa-hia.example/", "whatwg-sharp-s-nontransitional"),
    case("http://example.com/foo/%2e%2", "http://example.com/foo/.%252", "whatwg-partial-escape"),
    case("http://example.com/foo/%2e./%2e%2e/.%2e/%2e.bar", "http://example.com/..bar", "whatwg-mixed-escaped-dots"),
    case("http://example.com////../..", "http://example.com/", "whatwg-slashes-and-dots-then-trailing-slash"),
]


@pytest.mark.parametrize("raw, expected", CASES)
def test_policy_cases(request, impl, policy, raw, expected):
    check(expect(request, policy, expected), impl.canonicalize, raw, policy=policy)


@pytest.mark.parametrize("raw, expected", CASES)
def test_output_is_a_fixed_point(request, impl, policy, raw, expected):
    expected = expect(request, policy, expected)
    assert impl.canonicalize(expected, policy=policy) == expected


# ----- rule 3: relative references (RFC 3986 §5.4 examples, as canonical strings) ------------
RFC_BASE = "http://a/b/c/d;p?q"
RELATIVE = [
    # §5.4.1 normal examples. Trailing slashes go (rule 7) and fragments go (rule 9).
    ("g:h", "InvalidURL", "rfc3986-other-scheme"),
    ("g", "http://a/b/c/g", "rfc3986-g"),
    ("./g", "http://a/b/c/g", "rfc3986-dot-g"),
    ("g/", "http://a/b/c/g", "rfc3986-g-slash"),
    ("/g", "http://a/g", "rfc3986-abs-path"),
    ("//g", "http://g/", "rfc3986-network-path"),
    ("?y", "http://a/b/c/d;p?y=", "rfc3986-query-only"),
    ("g?y", "http://a/b/c/g?y=", "rfc3986-g-query"),
    ("#s", "http://a/b/c/d;p?q=", "rfc3986-fragment-only"),
    ("g#s", "http://a/b/c/g", "rfc3986-g-fragment"),
    ("g?y#s", "http://a/b/c/g?y=", "rfc3986-g-query-fragment"),
    (";x", "http://a/b/c/;x", "rfc3986-semicolon"),
    ("g;x", "http://a/b/c/g;x", "rfc3986-g-semicolon"),
    ("g;x?y#s", "http://a/b/c/g;x?y=", "rfc3986-g-semicolon-query-fragment"),
    # Rule 1 decides: empty input is invalid, with or without a base.
    ("", "InvalidURL", "rfc3986-empty-is-invalid-by-rule-1"),
    (".", "http://a/b/c", "rfc3986-dot"),
    ("./", "http://a/b/c", "rfc3986-dot-slash"),
    ("..", "http://a/b", "rfc3986-dot-dot"),
    ("../", "http://a/b", "rfc3986-dot-dot-slash"),
    ("../g", "http://a/b/g", "rfc3986-dot-dot-g"),
    ("../..", "http://a/", "rfc3986-dot-dot-twice"),
    ("../../", "http://a/", "rfc3986-dot-dot-twice-slash"),
    ("../../g", "http://a/g", "rfc3986-dot-dot-twice-g"),
    # §5.4.2 abnormal examples.
    ("../../../g", "http://a/g", "rfc3986-above-root-3"),
    ("../../../../g", "http://a/g", "rfc3986-above-root-4"),
    ("/./g", "http://a/g", "rfc3986-abs-dot"),
    ("/../g", "http://a/g", "rfc3986-abs-dot-dot"),
    ("g.", "http://a/b/c/g.", "rfc3986-g-dot"),
    (".g", "http://a/b/c/.g", "rfc3986-dot-g-name"),
    ("g..", "http://a/b/c/g..", "rfc3986-g-dot-dot"),
    ("..g", "http://a/b/c/..g", "rfc3986-dot-dot-g-name"),
    ("./../g", "http://a/b/g", "rfc3986-dot-dot-dot-g"),
    ("./g/.", "http://a/b/c/g", "rfc3986-g-dot-last"),
    ("g/./h", "http://a/b/c/g/h", "rfc3986-g-dot-h"),
    ("g/../h", "http://a/b/c/h", "rfc3986-g-dot-dot-h"),
    ("g;x=1/./y", "http://a/b/c/g;x=1/y", "rfc3986-params-dot"),
    ("g;x=1/../y", "http://a/b/c/y", "rfc3986-params-dot-dot"),
    ("g?y/./x", "http://a/b/c/g?y%2F.%2Fx=", "rfc3986-dots-in-query-untouched"),
    ("g?y/../x", "http://a/b/c/g?y%2F..%2Fx=", "rfc3986-dot-dots-in-query-untouched"),
    ("g#s/./x", "http://a/b/c/g", "rfc3986-dots-in-fragment"),
    ("http:g", "InvalidURL", "rfc3986-strict-http-g-is-absolute"),
    # Beyond the RFC table.
    ("page2.html", "https://h.example/dir/page2.html", "spec-example-7"),
    ("%2E%2E/x", "http://a/b/x", "r3-escaped-dot-dot-relative"),
    ("HTTPS://Other.example/x", "https://other.example/x", "r3-absolute-ignores-base"),
    ("//other.example:80/x", "http://other.example/x", "r3-network-path-default-port"),
    ("  ../g \n", "http://a/b/g", "r3-reference-stripped"),
    ("1http://x/", "http://a/b/c/1http://x", "r3-first-segment-not-a-scheme"),
    ("mailto:a@b.example", "InvalidURL", "r3-other-absolute-scheme"),
    ("\\\\evil.example/x", "http://a/b/c/%5C%5Cevil.example/x", "r3-backslashes-are-path"),
]


@pytest.mark.parametrize("ref, expected", [pytest.param(r, e, id=i) for r, e, i in RELATIVE])
def test_relative_reference(request, impl, policy, ref, expected):
    base = "https://h.example/dir/page1.html" if ref == "page2.html" else RFC_BASE
    check(expect(request, policy, expected), impl.canonicalize, ref, base=base, policy=policy)


@pytest.mark.parametrize(
    "ref, base, expected",
    [
        pytest.param("g", "http://a", "http://a/g", id="r3-base-without-path"),
        pytest.param("?x=1", "http://a", "http://a/?x=1", id="r3-query-on-base-without-path"),
        pytest.param("g", "http://a/dir/", "http://a/dir/g", id="r3-base-trailing-slash-before-canonical"),
        pytest.param("g", "https%3A%2F%2Fa%2Fdir%2Fp", "https://a/dir/g", id="r3-wrapped-base"),
        pytest.param(b"g", b"http://a/b/c", "http://a/b/g", id="r3-bytes-both"),
        pytest.param("g", "http://user:pw@a/b/c#frag", "http://a/b/g", id="r3-base-userinfo-fragment"),
        pytest.param("x", "http://a/b/%2E%2E/c", "http://a/x", id="r3-base-with-escaped-dots"),
    ],
)
def test_relative_reference_bases(impl, policy, ref, base, expected):
    assert impl.canonicalize(ref, base=base, policy=policy) == expected


@pytest.mark.parametrize(
    "base, reason",
    [
        pytest.param("/relative/only", "no scheme", id="relative-base"),
        pytest.param("mailto:a@b.example", "scheme 'mailto'", id="foreign-scheme-base"),
        pytest.param("http://exa mple.com/", "host", id="bad-host-base"),
        pytest.param("", "empty", id="empty-base"),
        pytest.param(b"http://a/\xff", "UTF-8", id="non-utf8-base"),
    ],
)
def test_base_must_be_an_accepted_absolute_url(impl, policy, base, reason):
    with pytest.raises(InvalidURL, match="base") as info:
        impl.canonicalize("g", base=base, policy=policy)
    assert reason in str(info.value)
    # Validated even when the reference is absolute: a bad base is the caller's bug.
    with pytest.raises(InvalidURL, match="base"):
        impl.canonicalize("http://ok.example/", base=base, policy=policy)


# ----- invalid input -----------------------------------------------------------------------------
INVALID = [
    ("", "empty", "r1-empty"),
    (" \t\n ", "empty", "r1-only-whitespace"),
    (b"", "empty", "r1-empty-bytes"),
    ("http://example.com/\x00", "control character (U+0000)", "r1-nul"),
    ("http://example.com/\x7f", "control character (U+007F)", "r1-del"),
    ("http://example.com/\x1b[31m", "control character (U+001B)", "r1-escape-char"),
    ("http://exa\x0cmple.com/", "control character (U+000C)", "r1-formfeed-inside"),
    ("http://example.com/\ud800", "unpaired surrogate (U+D800)", "r1-lone-high-surrogate"),
    ("http://example.com/\udfff", "unpaired surrogate (U+DFFF)", "r1-lone-low-surrogate"),
    (b"http://example.com/\xff", "not valid UTF-8", "r1-invalid-utf8"),
    (b"http://example.com/\xed\xa0\x80", "not valid UTF-8", "r1-encoded-surrogate-bytes"),
    ("http://example.com/" + "a" * 8174, "too long", "r1-over-max-length"),
    ("http%3A%2F%2Fexample.com%2F%00", "control character (U+0000)", "r2-wrapped-nul"),
    ("http%3A%2F%2Fexample.com%2F%FF", "not UTF-8", "r2-wrapped-non-utf8"),
    ("http%3A%2F%2F%20%20", "empty host", "r2-wrapped-only-spaces-after-scheme"),
    ("example.com/path", "no scheme", "r4-no-scheme-no-base"),
    ("//example.com/path", "no scheme", "r4-network-path-no-base"),
    ("javascript:alert(1)", "scheme 'javascript'", "r4-javascript"),
    ("mailto:a@example.com", "scheme 'mailto'", "r4-mailto"),
    ("data:text/plain,hi", "scheme 'data'", "r4-data"),
    ("tel:+1-816-555-1212", "scheme 'tel'", "r4-tel"),
    ("ftp://example.com/", "scheme 'ftp'", "r4-ftp-not-by-default"),
    ("http:example.com", "no host", "r4-no-authority"),
    ("http:/example.com", "no host", "r4-one-slash"),
    ("http:\\\\example.com\\", "no host", "r4-backslashes-not-slashes"),
    ("example.com:8080/path", "scheme 'example.com'", "r4-host-port-looks-like-scheme"),
    ("http://", "empty host", "r5-empty-authority"),
    ("http:///path", "empty host", "r5-empty-host"),
    ("http://user@/path", "empty host", "r5-empty-host-with-userinfo"),
    ("http://:80/", "empty host", "r5-only-port"),
    ("http://./", "empty host", "r5-only-dot"),
    ("http://a..b/", "empty label", "r5-empty-label"),
    ("http://.example.com/", "empty label", "r5-leading-dot"),
    ("http://example.com../", "empty label", "r5-two-trailing-dots"),
    ("http://" + "a" * 64 + ".com/", "longer than 63", "r5-label-too-long"),
    ("http://exa mple.com/", "' '", "r5-space-in-host"),
    ("http://exa%41mple.com/", "'%'", "r5-percent-in-host"),
    ("http://exa*mple.com/", "'*'", "r5-star-in-host"),
    ("http://exa\\mple.com/", "'\\\\'", "r5-backslash-in-host"),
    ("http://example.com:80:80/", "':'", "r5-two-ports"),
    ("http://a]b/", "']'", "r5-stray-closing-bracket"),
    ("http://[::1/", "unbalanced '['", "r5-unbalanced-bracket"),
    ("http://[::1", "unbalanced '['", "r5-unbalanced-bracket-end"),
    ("http://a[::1]/", "'['", "r5-bracket-not-first"),
    ("http://[::1]x/", "only ':port'", "r5-junk-after-ipv6"),
    ("http://[]/", "not a valid IPv6", "r5-empty-ipv6"),
    ("http://[1:2:3:4:5:6:7:8:9]/", "not a valid IPv6", "r5-ipv6-too-many-groups"),
    ("http://[::1::2]/", "not a valid IPv6", "r5-ipv6-two-compressions"),
    ("http://[12345::]/", "not a valid IPv6", "r5-ipv6-group-too-long"),
    ("http://[fe80::1%25eth0]/", "zone identifiers", "r5-ipv6-zone-escaped"),
    ("http://[fe80::1%eth0]/", "zone identifiers", "r5-ipv6-zone"),
    ("http://[192.0.2.1]/", "not a valid IPv6", "r5-ipv4-in-brackets"),
    ("http://[v1.fe80::a+en1]/", "not a valid IPv6", "r5-ipvfuture"),
    ("http://[::１]/", "not a valid IPv6", "r5-ipv6-fullwidth-digit"),
    ("http://bücher..example/", "IDNA", "r5-idna-empty-label"),
    ("http://ex_ample.bücher.example/", "IDNA", "r5-idna-rejects-underscore-label"),
    ("http://\u0561\u0578\u057a\u0565\u0580\u0583\u0578\u056d-.example/", "IDNA", "r5-idna-trailing-hyphen"),
    ("http://a\u200db.example/", "IDNA", "r5-idna-zero-width-joiner"),
    ("http://\uff05\uff14\uff11.com/", "IDNA", "whatwg-fullwidth-percent-host"),
    ("http://ab\u00a0cd.example/", "IDNA", "r5-nbsp-in-host"),
    # w3lib (and browsers) accept symbols such as U+27A1; the idna package, which decides here, does not.
    ("http://Åsa:abc123@➡.ws:81/admin", "IDNA", "w3lib-idna-symbol-host-refused"),
    ("http://example.com:65536/", "0-65535", "r6-port-too-big"),
    ("http://example.com:99999999999999999999/", "0-65535", "r6-port-huge"),
    ("http://example.com:+80/", "ASCII digits", "r6-plus-port"),
    ("http://example.com:-1/", "ASCII digits", "r6-negative-port"),
    ("http://example.com:８０/", "ASCII digits", "r6-fullwidth-digits"),
    ("http://example.com:8 0/", "ASCII digits", "r6-space-in-port"),
    ("http://example.com:0x50/", "ASCII digits", "r6-hex-port"),
    ("http://example.com:²/", "ASCII digits", "r6-superscript-digit"),
]


@pytest.mark.parametrize("raw, reason", [pytest.param(r, m, id=i) for r, m, i in INVALID])
def test_invalid_input_names_the_problem(request, impl, policy, raw, reason):
    check(expect(request, policy, ("InvalidURL", reason)), impl.canonicalize, raw, policy=policy)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(bytearray(b"http://example.com/"), id="bytearray"),
        pytest.param(memoryview(b"http://example.com/"), id="memoryview"),
        pytest.param(None, id="none"),
        pytest.param(42, id="int"),
        pytest.param(["http://example.com/"], id="list"),
    ],
)
def test_wrong_types_are_type_errors(impl, value):
    with pytest.raises(TypeError, match=type(value).__name__):
        impl.canonicalize(value)
    with pytest.raises(TypeError, match="base must be str or bytes"):
        impl.canonicalize("g", base=value if value is not None else 3.5)


def test_str_subclass_is_accepted(impl):
    class URLText(str):
        pass

    assert impl.canonicalize(URLText("HTTP://A.example/")) == "http://a.example/"


def test_policy_type_is_checked(impl):
    with pytest.raises(TypeError, match="policy must be a CanonicalPolicy"):
        impl.canonicalize("http://a.example/", policy={"strip_www": True})


def test_max_length_counts_after_stripping(impl):
    body = "http://example.com/" + "a" * (8192 - 19)
    assert len(body) == 8192
    assert impl.canonicalize("  \t" + body + "\n ") == body
    with pytest.raises(InvalidURL, match="8193 characters, max_length is 8192"):
        impl.canonicalize(body + "a")


def test_max_length_counts_characters_of_decoded_bytes(impl):
    body = "http://example.com/" + "é" * (8192 - 19)
    assert len(body.encode("utf-8")) > 8192
    assert impl.canonicalize(body.encode("utf-8")).startswith("http://example.com/%C3%A9")


def test_a_megabyte_url_is_rejected_by_length(impl):
    with pytest.raises(InvalidURL, match="max_length"):
        impl.canonicalize("http://example.com/" + "a" * 1_000_000)
    with pytest.raises(InvalidURL, match="max_length"):
        impl.canonicalize(b"http://example.com/" + b"%41" * 400_000)


def test_output_may_exceed_max_length(impl):
    body = "http://example.com/" + " x" * 2000
    out = impl.canonicalize(body, policy=CanonicalPolicy(max_length=len(body)))
    assert len(out) > len(body)


def test_error_message_shows_a_bounded_excerpt(impl):
    with pytest.raises(InvalidURL) as info:
        impl.canonicalize("http://exa mple.com/" + "x" * 5000)
    assert len(str(info.value)) < 400


# ----- policy fields, each switched ----------------------------------------------------------------
POLICY_CASES = [
    # schemes
    (
        {"schemes": {"http", "https", "ftp"}},
        "FTP://Example.com:21/pub/",
        "ftp://example.com/pub",
        "schemes-ftp-default-port-21",
    ),
    ({"schemes": {"ws", "wss"}}, "ws://example.com:80/chat", "ws://example.com/chat", "schemes-ws-default-port-80"),
    (
        {"schemes": {"ws", "wss"}},
        "wss://example.com:443/chat",
        "wss://example.com/chat",
        "schemes-wss-default-port-443",
    ),
    ({"schemes": {"wss"}}, "wss://example.com:80/chat", "wss://example.com:80/chat", "schemes-wss-port-80-kept"),
    (
        {"schemes": {"gopher"}},
        "gopher://example.com:70/1",
        "gopher://example.com:70/1",
        "schemes-no-known-default-port",
    ),
    ({"schemes": {"HTTPS"}}, "https://example.com/", "https://example.com/", "schemes-folded-to-lowercase"),
    ({"schemes": {"https"}}, "http://example.com/", "InvalidURL", "schemes-http-refused"),
    # merge_schemes
    ({"merge_schemes": True}, "http://example.com/a", "https://example.com/a", "merge-http-to-https"),
    ({"merge_schemes": True}, "http://example.com:80/a", "https://example.com/a", "merge-drops-http-default"),
    ({"merge_schemes": True}, "http://example.com:443/a", "https://example.com/a", "merge-drops-https-default"),
    ({"merge_schemes": True}, "https://example.com:80/a", "https://example.com:80/a", "merge-https-port-80-kept"),
    ({"merge_schemes": True}, "http://example.com:8080/a", "https://example.com:8080/a", "merge-other-port-kept"),
    ({"merge_schemes": True, "schemes": {"ws", "wss"}}, "ws://example.com/", "ws://example.com/", "merge-only-http"),
    ({"merge_schemes": False}, "http://example.com/a", "http://example.com/a", "merge-off"),
    # strip_www
    ({"strip_www": True}, "http://www.example.com/", "http://example.com/", "strip-www"),
    ({"strip_www": True}, "http://WWW.Example.com/", "http://example.com/", "strip-www-any-case"),
    ({"strip_www": True}, "http://www.www.example.com/", "http://example.com/", "strip-www-repeatedly"),
    ({"strip_www": True}, "http://www.com/", "http://www.com/", "strip-www-keeps-two-labels"),
    ({"strip_www": True}, "http://www.www.com/", "http://www.com/", "strip-www-stops-at-two-labels"),
    ({"strip_www": True}, "http://www2.example.com/", "http://www2.example.com/", "strip-www-only-www"),
    ({"strip_www": True}, "http://a.www.example.com/", "http://a.www.example.com/", "strip-www-only-leading"),
    ({"strip_www": True}, "http://www.bücher.de/", "http://xn--bcher-kva.de/", "strip-www-after-idna"),
    ({"strip_www": True}, "http://www.example.com./", "http://example.com/", "strip-www-trailing-dot"),
    # keep_userinfo
    ({"keep_userinfo": True}, "http://User:Pass@Example.com/", "http://User:Pass@example.com/", "userinfo-kept-case"),
    (
        {"keep_userinfo": True},
        "http://us%65r:p%7cw@example.com/",
        "http://user:p%7Cw@example.com/",
        "userinfo-normalized",
    ),
    ({"keep_userinfo": True}, "http://a b:|%@example.com/", "http://a%20b:%7C%25@example.com/", "userinfo-encoded"),
    (
        {"keep_userinfo": True},
        "http://Åsa:abc123@bücher.example:81/admin",
        "http://%C3%85sa:abc123@xn--bcher-kva.example:81/admin",
        "userinfo-w3lib-idna",
    ),
    ({"keep_userinfo": True}, "http://:@example.com/", "http://example.com/", "userinfo-colon-alone-is-empty"),
    ({"keep_userinfo": True}, "http://@example.com/", "http://example.com/", "userinfo-empty-dropped"),
    ({"keep_userinfo": True}, "http://user:@example.com/", "http://user:@example.com/", "userinfo-empty-password-kept"),
    ({"keep_userinfo": True}, "http://a@b@example.com/", "http://a@b@example.com/", "userinfo-last-at"),
    ({"keep_userinfo": True}, "http://u@[::1]:81/", "http://u@[::1]:81/", "userinfo-with-ipv6"),
    # lowercase_path
    (
        {"lowercase_path": True},
        "http://example.com/Products/ÄB%2fC",
        "http://example.com/products/%C3%84b%2Fc",
        "lowercase-path-escapes-stay-upper",
    ),
    ({"lowercase_path": True}, "http://example.com/A?Q=B#F", "http://example.com/a?Q=B", "lowercase-path-not-query"),
    ({"lowercase_path": True}, "http://example.com/%4A", "http://example.com/j", "lowercase-path-after-decoding"),
    # strip_trailing_slash
    ({"strip_trailing_slash": False}, "http://example.com/dir/", "http://example.com/dir/", "trailing-slash-kept"),
    ({"strip_trailing_slash": False}, "http://example.com/dir//", "http://example.com/dir//", "trailing-slashes-kept"),
    ({"strip_trailing_slash": False}, "http://example.com/a/b/..", "http://example.com/a/", "trailing-slash-from-dots"),
    ({"strip_trailing_slash": False}, "http://example.com", "http://example.com/", "trailing-slash-off-empty-path"),
    # semicolon_separator
    ({"semicolon_separator": True}, "http://example.com/?b=2;a=1", "http://example.com/?a=1&b=2", "semicolon-splits"),
    (
        {"semicolon_separator": True},
        "http://example.com/?b=2;;a=1&",
        "http://example.com/?a=1&b=2",
        "semicolon-empties",
    ),
    (
        {"semicolon_separator": True},
        "http://example.com/?id=1;utm_source=x",
        "http://example.com/?id=1",
        "semicolon-tracking",
    ),
    ({"semicolon_separator": True}, "http://example.com/?a=%3B", "http://example.com/?a=%3B", "semicolon-escaped-kept"),
    # drop_params: replaced, extended, emptied
    (
        {"drop_params": {"session"}},
        "http://example.com/?session=1&ref=2",
        "http://example.com/?ref=2",
        "drop-params-replaced",
    ),
    (
        {"drop_params": DEFAULT_POLICY.drop_params | {"Campaign", "REF"}},
        "http://example.com/?CAMPAIGN=1&ref=2&id=3",
        "http://example.com/?id=3",
        "drop-params-extended",
    ),
    ({"drop_params": set()}, "http://example.com/?ref=2&utm_x=1", "http://example.com/?ref=2", "drop-params-empty"),
    # host_rules: a rule's keys are dropped or kept on its host and every host under it only
    (
        {"host_rules": [HostRule("Example.com", drop_params={"sid"})]},
        "http://shop.example.com/?sid=1&id=3",
        "http://shop.example.com/?id=3",
        "host-rules-drop-under-the-pattern",
    ),
    (
        {"host_rules": [HostRule("example.com", drop_params={"sid"})]},
        "http://example.org/?sid=1&id=3",
        "http://example.org/?id=3&sid=1",
        "host-rules-other-hosts-untouched",
    ),
    (
        {"drop_params": {"caf\u00e9"}},
        "http://example.com/?caf%C3%A9=1&id=1",
        "http://example.com/?id=1",
        "drop-params-non-ascii",
    ),
    (
        {"drop_params": {"CAF\u00c9"}},
        "http://example.com/?caf%C3%A9=1&id=1",
        "http://example.com/?caf%C3%A9=1&id=1",
        "drop-params-ascii-only-case-folding",
    ),
    # drop_prefixes
    (
        {"drop_prefixes": {"pk_", "hsa_"}},
        "http://example.com/?pk_kw=1&HSA_cam=2&utm_source=3",
        "http://example.com/?utm_source=3",
        "drop-prefixes-replaced",
    ),
    (
        {"drop_prefixes": set()},
        "http://example.com/?utm_source=3",
        "http://example.com/?utm_source=3",
        "drop-prefixes-empty",
    ),
    (
        {"drop_prefixes": set(), "drop_params": set()},
        "http://example.com/?ref=1&b=2",
        "http://example.com/?b=2&ref=1",
        "no-tracking-filter-at-all",
    ),
    # keep_params wins
    ({"keep_params": {"REF"}}, "http://example.com/?ref=1&spm=2", "http://example.com/?ref=1", "keep-params-over-drop"),
    (
        {"keep_params": {"utm_id"}},
        "http://example.com/?utm_id=7&utm_source=2",
        "http://example.com/?utm_id=7",
        "keep-params-over-prefix",
    ),
    (
        {"keep_params": {"utm_id"}},
        "http://example.com/?UTM%5FID=7",
        "http://example.com/?UTM_ID=7",
        "keep-params-decoded-key",
    ),
    # keep_fragment
    ({"keep_fragment": True}, "http://example.com/a#Top", "http://example.com/a#Top", "fragment-kept"),
    ({"keep_fragment": True}, "http://example.com/a#", "http://example.com/a", "fragment-empty-dropped"),
    (
        {"keep_fragment": True},
        "http://example.com/a#x/../y/",
        "http://example.com/a#x/../y/",
        "fragment-no-dots-no-slash-strip",
    ),
    ({"keep_fragment": True}, "http://example.com/a#q?x=1", "http://example.com/a#q?x=1", "fragment-question-raw"),
    ({"keep_fragment": True}, "http://example.com/a#a#b", "http://example.com/a#a%23b", "fragment-hash-escaped"),
    (
        {"keep_fragment": True},
        "http://example.com/a#%7e%2f é",
        "http://example.com/a#~%2F%20%C3%A9",
        "fragment-path-encoding",
    ),
    ({"keep_fragment": True}, "http://example.com/a#%", "http://example.com/a#%25", "fragment-stray-percent"),
    ({"keep_fragment": True}, "http://example.com#f", "http://example.com/#f", "fragment-on-empty-path"),
    (
        {"keep_fragment": True},
        "https://docs.google.com/spreadsheets/d/abcd/edit#gid=1234",
        "https://docs.google.com/spreadsheets/d/abcd/edit#gid=1234",
        "urlnorm-fragment-equals",
    ),
    (
        {"keep_fragment": True},
        "http://example.com/#\u043f\u0440\u0438\u043c\u0435\u0440",
        "http://example.com/#%D0%BF%D1%80%D0%B8%D0%BC%D0%B5%D1%80",
        "urlnorm-fragment-cyrillic",
    ),
    (
        {"keep_fragment": True},
        "http://example.com/#!fragment",
        "http://example.com/#!fragment",
        "urlnorm-fragment-bang-raw",
    ),
    (
        {"keep_fragment": True},
        "http://www.example.com/path/to/%23/foo/bar#frag",
        "http://www.example.com/path/to/%23/foo/bar#frag",
        "w3lib-keep-fragments",
    ),
    ({"keep_fragment": True}, "g#s", "http://a/b/c/g#s", "fragment-relative"),
    ({"keep_fragment": True}, "#s", "http://a/b/c/d;p?q=#s", "fragment-only-reference"),
    # max_length
    ({"max_length": 20}, "http://example.com/ab", "InvalidURL", "max-length-small-refuses"),
    ({"max_length": 21}, "http://example.com/ab", "http://example.com/ab", "max-length-exact-accepts"),
    # version: 1 reads by RFC 3986 (POLICY_V1), 2 as browsers do
    ({"version": 1}, "http:/example.com/a", "InvalidURL", "version-1-one-slash-no-host"),
    ({"version": 1}, "http://0x7f.1/", "http://0x7f.1/", "version-1-ipv4-as-written"),
    ({"version": 2}, "http:/example.com/a", "http://example.com/a", "version-2-one-slash-opens-the-host"),
]


@pytest.mark.parametrize("fields, raw, expected", [pytest.param(f, r, e, id=i) for f, r, e, i in POLICY_CASES])
def test_policy_field(impl, policy, fields, raw, expected):
    policy = CanonicalPolicy(**{"version": policy.version, **fields})
    base = RFC_BASE if not raw.startswith(("http", "ws", "ftp", "FTP", "gopher")) else None
    if expected == "InvalidURL":
        with pytest.raises(InvalidURL):
            impl.canonicalize(raw, base=base, policy=policy)
        return
    assert impl.canonicalize(raw, base=base, policy=policy) == expected
    assert impl.canonicalize(expected, policy=policy) == expected


def test_every_policy_field_changes_some_output():
    """Each field has a case whose result the default policy does not give."""
    changed = set()
    for fields, raw, expected, _ in POLICY_CASES:
        base = RFC_BASE if not raw.startswith(("http", "ws", "ftp", "FTP", "gopher")) else None
        try:
            default = _canonical.canonicalize(raw, base=base)
        except InvalidURL:
            default = "InvalidURL"
        if default != expected:
            changed.update(fields)
    assert changed == {f.name for f in dataclasses.fields(CanonicalPolicy)}


def test_default_policy_matches_the_spec():
    assert DEFAULT_POLICY == CanonicalPolicy()
    assert DEFAULT_POLICY.schemes == {"http", "https"}
    assert DEFAULT_POLICY.drop_prefixes == {"utm_"}
    assert DEFAULT_POLICY.drop_params == canonical.DEFAULT_DROP_PARAMS
    assert DEFAULT_POLICY.host_rules == ()
    # Policy 3's list holds no name that selects content on some site (docs/canonical.md).
    assert not DEFAULT_POLICY.drop_params & {"sid", "ref", "from", "source", "session", "sessionid", "share_token"}
    assert {"gclid", "fbclid", "msclkid", "twclid", "li_fat_id", "srsltid", "mc_eid", "_ga", "jsessionid"} <= (
        DEFAULT_POLICY.drop_params
    )
    assert (
        POLICY_V2.drop_params
        == POLICY_V1.drop_params
        == {
            "gclid",
            "fbclid",
            "msclkid",
            "dclid",
            "yclid",
            "gbraid",
            "wbraid",
            "igshid",
            "mc_cid",
            "mc_eid",
            "_ga",
            "_gl",
            "spm",
            "from",
            "ref",
            "share_token",
            "sessionid",
            "phpsessid",
            "jsessionid",
            "sid",
        }
    )
    assert DEFAULT_POLICY.keep_params == frozenset()
    assert DEFAULT_POLICY.max_length == 8192
    assert (
        DEFAULT_POLICY.merge_schemes,
        DEFAULT_POLICY.strip_www,
        DEFAULT_POLICY.keep_userinfo,
        DEFAULT_POLICY.lowercase_path,
        DEFAULT_POLICY.semicolon_separator,
        DEFAULT_POLICY.keep_fragment,
    ) == (False, False, False, False, False, False)
    assert DEFAULT_POLICY.strip_trailing_slash is True


@pytest.mark.parametrize(
    "fields, error, match",
    [
        pytest.param({"max_length": 0}, ValueError, "max_length must be >= 1, got 0", id="max-length-zero"),
        pytest.param({"max_length": 1.5}, TypeError, "max_length must be an int", id="max-length-float"),
        pytest.param({"max_length": True}, TypeError, "max_length must be an int", id="max-length-bool"),
        pytest.param({"strip_www": 1}, TypeError, "strip_www must be a bool", id="flag-int"),
        pytest.param({"schemes": "http"}, TypeError, "not a single str", id="schemes-str"),
        pytest.param({"schemes": set()}, ValueError, "at least one scheme", id="schemes-empty"),
        pytest.param({"schemes": {"ht tp"}}, ValueError, "is not a scheme", id="schemes-bad-syntax"),
        pytest.param({"drop_params": "ref"}, TypeError, "not a single str", id="drop-params-str"),
        pytest.param({"drop_params": {1}}, TypeError, "must hold str", id="drop-params-int-item"),
        pytest.param({"drop_prefixes": {""}}, ValueError, "empty string", id="drop-prefixes-empty-item"),
        pytest.param({"keep_params": 5}, TypeError, "collection of str", id="keep-params-int"),
        pytest.param({"keep_params": {"\ud800"}}, ValueError, "surrogate", id="keep-params-surrogate"),
    ],
)
def test_policy_validation(fields, error, match):
    with pytest.raises(error, match=match):
        CanonicalPolicy(**fields)


def test_policy_is_frozen_and_hashable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_POLICY.strip_www = True  # type: ignore[misc]
    assert hash(CanonicalPolicy()) == hash(DEFAULT_POLICY)
    assert CanonicalPolicy(drop_params=["REF"]) == CanonicalPolicy(drop_params={"ref"})


# ----- policy digest: a file format --------------------------------------------------------------
#: Pinned: changing one orphans every filter and Redis namespace stamped with the old value.
#: Policy 1's is the digest DEFAULT_POLICY had before policy 2, so that its crawls continue.
POLICY_V1_DIGEST = "716e8d2d2c1c1eae"
POLICY_V2_DIGEST = "c9072d952e9a5c87"
DEFAULT_POLICY_DIGEST = "17fdef6b4d400331"

FIELD_CHANGES = {
    "schemes": {"http", "https", "ftp"},
    "merge_schemes": True,
    "strip_www": True,
    "keep_userinfo": True,
    "lowercase_path": True,
    "strip_trailing_slash": False,
    "semicolon_separator": True,
    "drop_params": DEFAULT_POLICY.drop_params | {"campaign"},
    "drop_prefixes": {"utm_", "pk_"},
    "keep_params": {"ref"},
    "keep_fragment": True,
    "max_length": 4096,
    "version": 1,
    "host_rules": [HostRule("example.com", keep_params={"gclid"})],
}


def test_default_digest_is_pinned():
    assert DEFAULT_POLICY.digest == DEFAULT_POLICY_DIGEST
    assert crawldedup.DEFAULT_POLICY.digest == DEFAULT_POLICY_DIGEST
    assert crawldedup.DEFAULT_POLICY is crawldedup.POLICY_V3


def test_policy_v1_keeps_the_digest_of_policy_1():
    assert POLICY_V1.digest == POLICY_V1_DIGEST
    assert POLICY_V1 == CanonicalPolicy(version=1, drop_params=canonical.POLICY2_DROP_PARAMS)
    # Policy 2 differs from it by the version only, policy 3 by the version and the drop list.
    assert dataclasses.replace(POLICY_V1, version=2) == POLICY_V2
    assert dataclasses.replace(POLICY_V2, version=3, drop_params=canonical.DEFAULT_DROP_PARAMS) == DEFAULT_POLICY


def test_policy_v2_keeps_the_digest_of_policy_2():
    assert POLICY_V2.digest == POLICY_V2_DIGEST
    assert crawldedup.POLICY_V2.digest == POLICY_V2_DIGEST


@pytest.mark.parametrize(
    "version, error",
    [(0, ValueError), (4, ValueError), ("1", TypeError), (1.0, TypeError), (True, TypeError)],
    ids=["zero", "four", "str", "float", "bool"],
)
def test_version_is_1_2_or_3(version, error):
    with pytest.raises(error, match="version"):
        CanonicalPolicy(version=version)


@pytest.mark.parametrize(
    "name, expected", [("v1", POLICY_V1), ("V2", POLICY_V2), (" v1 ", POLICY_V1), ("v3", DEFAULT_POLICY)]
)
def test_policy_named(name, expected):
    assert canonical.policy_named(name) is expected


@pytest.mark.parametrize("name", ["v4", "1", "", "policy1", None])
def test_policy_named_refuses_other_names(name):
    with pytest.raises(ValueError, match="v1, v2"):
        canonical.policy_named(name)


def test_policy_conflict_names_both_policies_and_the_way_on():
    message = canonical.policy_conflict(POLICY_V1.digest, DEFAULT_POLICY.digest)
    assert f"canonical policy 1 ({POLICY_V1_DIGEST})" in message
    assert f"canonical policy 3 ({DEFAULT_POLICY_DIGEST})" in message
    assert "--policy v1" in message and "CRAWLDEDUP_POLICY=v1" in message and "POLICY_V1" in message
    back = canonical.policy_conflict(DEFAULT_POLICY.digest, POLICY_V1.digest)
    assert "--policy v3" in back and "CRAWLDEDUP_POLICY=v3" in back
    upgrade = canonical.policy_conflict(POLICY_V2.digest, DEFAULT_POLICY.digest)
    assert f"canonical policy 2 ({POLICY_V2_DIGEST})" in upgrade and "--policy v2" in upgrade
    custom = canonical.policy_conflict(CanonicalPolicy(strip_www=True).digest, POLICY_V1.digest)
    assert "a custom canonical policy" in custom and "CanonicalPolicy it was made with" in custom
    assert "--policy-file" in custom


def test_digest_is_stable_across_processes():
    import subprocess
    import sys

    code = "from crawldedup import CanonicalPolicy as P; print(P(strip_www=True, keep_params=['b', 'a']).digest)"
    # PYTHONPATH: the child imports the crawldedup under test, not another one its Python may know.
    package_parent = os.path.dirname(os.path.dirname(crawldedup.__file__))
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": "", "PYTHONPATH": package_parent},
    ).stdout.strip()
    assert out == CanonicalPolicy(strip_www=True, keep_params=["a", "b"]).digest


def test_every_field_changes_the_digest():
    assert set(FIELD_CHANGES) == {f.name for f in dataclasses.fields(CanonicalPolicy)}
    digests = {DEFAULT_POLICY.digest}
    for name, value in FIELD_CHANGES.items():
        changed = dataclasses.replace(DEFAULT_POLICY, **{name: value})
        assert len(changed.digest) == 16 and int(changed.digest, 16) >= 0
        assert changed.digest == changed.digest.lower()
        digests.add(changed.digest)
    assert len(digests) == len(FIELD_CHANGES) + 1


def test_equal_policies_share_a_digest():
    assert CanonicalPolicy(schemes=["HTTPS", "http"]).digest == DEFAULT_POLICY.digest
    assert CanonicalPolicy(drop_params=list(DEFAULT_POLICY.drop_params)).digest == DEFAULT_POLICY.digest


# ----- canonicalize_many -----------------------------------------------------------------------
def test_many_never_stops_at_a_bad_url(impl):
    urls = ["HTTP://A.example/x/", "javascript:void(0)", b"http://b.example/\xff", bytearray(b"x"), "g", ""]
    result = impl.canonicalize_many(urls, base="http://c.example/d/e")
    assert isinstance(result, Canonicalized)
    assert result.urls == ["http://a.example/x", None, None, None, "http://c.example/d/g", None]
    assert sorted(result.errors) == [1, 2, 3, 5]
    assert all(isinstance(error, InvalidURL) for error in result.errors.values())
    assert "javascript" in str(result.errors[1])
    assert "UTF-8" in str(result.errors[2])
    assert "bytearray" in str(result.errors[3]) and isinstance(result.errors[3].__cause__, TypeError)
    assert "empty" in str(result.errors[5])


def test_many_matches_one_by_one(impl):
    raws = [raw for raw, _ in [(p.values[0], p.values[1]) for p in CASES]]
    result = impl.canonicalize_many(raws)
    assert result.errors == {}
    assert result.urls == [impl.canonicalize(raw) for raw in raws]


def test_many_accepts_any_iterable_and_policy(impl):
    policy = CanonicalPolicy(strip_www=True)
    result = impl.canonicalize_many((u for u in ["http://www.a.example/"]), policy=policy)
    assert result == Canonicalized(["http://a.example/"], {})
    assert impl.canonicalize_many([]) == Canonicalized([], {})


@pytest.mark.parametrize("urls", ["http://a.example/", b"http://a.example/", 5])
def test_many_refuses_a_single_string_or_non_iterable(impl, urls):
    with pytest.raises(TypeError):
        impl.canonicalize_many(urls)


def test_many_answers_a_refusal_seen_before_as_the_first_time(impl):
    """A refused link that comes back (mailto:, "#top", "") is refused with the same message, a
    new exception for each row, under the base and policy of each call, str and bytes apart."""
    refused = ["mailto:a@shop.example", "#top", "", b"tel:+1-555", "ftp://files.example/a", "http://a.example:99999/"]
    first = impl.canonicalize_many(refused * 3)
    assert first.urls == [None] * 18 and sorted(first.errors) == list(range(18))
    messages = [str(first.errors[i]) for i in range(6)]
    assert [str(first.errors[i]) for i in range(18)] == messages * 3
    assert len({id(error) for error in first.errors.values()}) == 18
    assert [str(error) for error in impl.canonicalize_many(refused).errors.values()] == messages
    assert "bytes" not in messages[0] and impl.canonicalize_many([b"mailto:a@shop.example"]).urls == [None]
    # The same text under another base or policy is another question.
    based = impl.canonicalize_many(refused, base="https://shop.example/list")
    assert based.urls[1] == "https://shop.example/list" and sorted(based.errors) == [0, 2, 3, 4, 5]
    assert str(based.errors[5]) == messages[5]
    ftp = CanonicalPolicy(schemes={"http", "https", "ftp"})
    assert impl.canonicalize_many(refused, policy=ftp).urls[4] == "ftp://files.example/a"
    assert impl.canonicalize_many(refused).urls[4] is None
    # Many more refusals than are kept: every answer is still the reference's.
    many = [f"mailto:user{n}@shop.example" for n in range(5_000)] + refused
    again = impl.canonicalize_many(many + many)
    assert again.urls == [None] * len(many) * 2
    assert [str(again.errors[i]) for i in range(len(many))] == [
        str(again.errors[len(many) + i]) for i in range(len(many))
    ]


def test_many_refuses_a_bad_base_up_front(impl):
    with pytest.raises(InvalidURL, match="base"):
        impl.canonicalize_many(["http://a.example/"], base="not a url")


# ----- linear time on long inputs ----------------------------------------------------------------
def test_escape_heavy_url_within_max_length(impl):
    url = "http://example.com/" + "%41%2f%e9" * 900 + "?" + "%41%2f%e9=" * 10
    out = impl.canonicalize(url, policy=CanonicalPolicy(max_length=len(url)))
    assert out.startswith("http://example.com/" + "A%2F%E9" * 900)
    assert impl.canonicalize(out, policy=CanonicalPolicy(max_length=len(out))) == out


def test_thousands_of_parameters(impl):
    pairs = [f"k{i % 977}=v{i}" for i in range(4000)] + ["utm_source=x"] * 50
    url = "http://example.com/?" + "&".join(reversed(pairs))
    out = impl.canonicalize(url, policy=CanonicalPolicy(max_length=len(url)))
    query = out.split("?", 1)[1].split("&")
    assert len(query) == 4000 and query == sorted(query, key=lambda p: tuple(p.split("=", 1)))


# ----- package surface ---------------------------------------------------------------------------
def test_public_names():
    for name in (
        "canonicalize",
        "canonicalize_many",
        "Canonicalized",
        "CanonicalPolicy",
        "DEFAULT_POLICY",
        "InvalidURL",
    ):
        assert name in crawldedup.__all__
        assert getattr(crawldedup, name) is getattr(canonical, name)
    assert issubclass(InvalidURL, ValueError)


def test_extension_loaded():
    """Wheels must carry the compiled fast path: a silent fall back to pure Python fails here."""
    if os.environ.get("CRAWLDEDUP_REQUIRE_EXTENSIONS") != "1":
        pytest.skip("set CRAWLDEDUP_REQUIRE_EXTENSIONS=1 to require the compiled extension")
    assert canonical.HAS_EXTENSION


# --- one base per URL ----------------------------------------------------------------------


def test_canonicalize_each_resolves_every_url_against_its_own_base():
    urls = ["../b?y=2&x=1", "c#f", "https://other.example/d", "e", "f"]
    bases = ["https://h.example/dir/a", "https://g.example/", None, "not a base", "https://h.example/dir/a"]
    result = canonical.canonicalize_each(urls, bases)
    assert result.urls == [
        "https://h.example/b?x=1&y=2",
        "https://g.example/c",
        "https://other.example/d",
        None,
        "https://h.example/dir/f",
    ]
    assert list(result.errors) == [3] and isinstance(result.errors[3], InvalidURL)
    with pytest.raises(ValueError, match="bases must hold one base per URL"):
        canonical.canonicalize_each(urls, bases[:2])
    with pytest.raises(TypeError, match="not a single str"):
        canonical.canonicalize_each("https://h.example/", [None])
