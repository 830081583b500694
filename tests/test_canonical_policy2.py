"""Policy 2 (docs/canonical-policy.md, "Policy 2: links mean what a browser makes of them"), rule by
rule, against every build of the canonicalizer.

``spec-`` rows are the section's examples verbatim; ``issue-`` rows the spellings issue 19 names;
``r1-`` … ``r5-`` the section's five rules; ``safebrowsing-`` rows are adapted from Google Safe
Browsing's canonicalization examples; ``keeps-`` rows the deliberate differences from WHATWG that
policy 2 keeps. Each row gives policy 2's answer and policy 1's (``POLICY_V1``), so that the table
shows what changed; the policy 1 table of tests/test_canonical.py runs under both.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crawldedup import POLICY_V1, InvalidURL
from crawldedup import POLICY_V2 as DEFAULT_POLICY

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

REFUSED = "InvalidURL"
BASE = "http://h.example/dir/page"


def row(raw, v2, v1, id, base=None):
    return pytest.param(raw, base, v2, v1, id=id)


ROWS = [
    # The section's examples, verbatim.
    row("http://h/a\x01b", "http://h/a%01b", REFUSED, "spec-r1-control-in-path-encoded"),
    row("ht\x01tp://h/", REFUSED, REFUSED, "spec-r1-control-in-scheme-refused"),
    row("http://h\x01/", REFUSED, REFUSED, "spec-r1-control-in-host-refused"),
    row("", REFUSED, REFUSED, "spec-r1-empty-stays-invalid"),
    row("http:/h/p", "http://h/p", REFUSED, "spec-r2-one-slash"),
    row("http:\\\\h\\p", "http://h/p", REFUSED, "spec-r2-backslashes"),
    row("https:h/p", "https://h/p", REFUSED, "spec-r2-no-slash"),
    row("http:///h", "http://h/", REFUSED, "spec-r2-three-slashes"),
    row("http:foo.com", "http://h.example/dir/foo.com", REFUSED, "spec-r2-same-scheme-is-relative", BASE),
    row("http:/x", "http://h.example/x", REFUSED, "spec-r2-same-scheme-absolute-path", BASE),
    row("http://a:b@c\\", "http://c/", REFUSED, "spec-r3-backslash-ends-host"),
    row("http://example%2Ecom/", "http://example.com/", REFUSED, "spec-r4-escaped-dot"),
    row("http://b%C3%BCcher.example/", "http://xn--bcher-kva.example/", REFUSED, "spec-r4-escaped-utf8"),
    row("http://0x7f.1/", "http://127.0.0.1/", "http://0x7f.1/", "spec-r5-hex-two-parts"),
    row("http://3279880203/", "http://195.127.0.11/", "http://3279880203/", "spec-r5-one-number"),
    row("http://0300.0250.0.01/", "http://192.168.0.1/", "http://0300.0250.0.01/", "spec-r5-octal"),
    row("http://256.256.256.256/", REFUSED, "http://256.256.256.256/", "spec-r5-part-over-255"),
    row("http://1.2.3.4.5/", REFUSED, "http://1.2.3.4.5/", "spec-r5-five-parts"),
    row("http://foo.09/", REFUSED, "http://foo.09/", "spec-r5-bad-octal-last-label"),
    row("http://0x100000000/", REFUSED, "http://0x100000000/", "spec-r5-over-32-bits"),
    # The spellings issue 19 names.
    row("http:/example.com/", "http://example.com/", REFUSED, "issue-one-slash"),
    row("http:\\\\example.com\\a", "http://example.com/a", REFUSED, "issue-backslashes"),
    row("http://example.com\\foo", "http://example.com/foo", REFUSED, "issue-backslash-after-host"),
    row("https:example.com", "https://example.com/", REFUSED, "issue-no-slash"),
    # Rule 1: input.
    row("\x00\x1f http://h/a \x1f\x00", "http://h/a", REFUSED, "r1-c0-and-space-stripped-at-ends"),
    row("\x7fhttp://h/", REFUSED, REFUSED, "r1-del-not-stripped"),
    row("http://h/a\tb\nc\rd", "http://h/abcd", "http://h/abcd", "r1-tab-cr-lf-removed"),
    row("http://h/a\x7fb", "http://h/a%7Fb", REFUSED, "r1-del-in-path-encoded"),
    row("http://h/?q=\x01x", "http://h/?q=%01x", REFUSED, "r1-control-in-query-encoded"),
    row("http://h/\x1b[0m", "http://h/%1B%5B0m", REFUSED, "r1-escape-in-path-encoded"),
    row("http://h:8\x0b0/", REFUSED, REFUSED, "r1-control-in-port-refused"),
    row("http://u\x01@h/", "http://h/", REFUSED, "r1-control-in-dropped-userinfo"),
    row("http%3A%2F%2Fh%2F%01", "http://h/", REFUSED, "r1-unwrapped-text-stripped-again"),
    row("\x01\x02", REFUSED, REFUSED, "r1-only-controls-is-empty"),
    # Rule 2: slashes after a special scheme.
    row("HTTP:\\/h/p", "http://h/p", REFUSED, "r2-mixed-slashes"),
    row("http:////h", "http://h/", REFUSED, "r2-four-slashes"),
    row("http:h", "http://h/", REFUSED, "r2-no-slash-no-base"),
    row("https:h", "https://h/", REFUSED, "r2-other-scheme-than-base-opens-host", BASE),
    row("http:\\\\g\\x", "http://g/x", REFUSED, "r2-same-scheme-two-backslashes-opens-host", BASE),
    row("http:/\\g", "http://g/", REFUSED, "r2-same-scheme-slash-backslash-opens-host", BASE),
    row("http:", "http://h.example/dir/page", REFUSED, "r2-same-scheme-alone-is-the-base", BASE),
    row("http:?q=1", "http://h.example/dir/page?q=1", REFUSED, "r2-same-scheme-query", BASE),
    row("HTTP:g", "http://h.example/dir/g", REFUSED, "r2-same-scheme-any-case", BASE),
    row("http:", REFUSED, REFUSED, "r2-no-host-no-base"),
    row("http://", REFUSED, REFUSED, "r2-empty-authority"),
    row("\\\\g\\x", "http://g/x", "http://h.example/dir/%5C%5Cg%5Cx", "r2-relative-backslashes-open-host", BASE),
    row("///g", "http://g/", REFUSED, "r2-relative-three-slashes-open-host", BASE),
    row("\\x", "http://h.example/x", "http://h.example/dir/%5Cx", "r2-relative-backslash-absolute-path", BASE),
    # Rule 3: backslash.
    row("http://h/a\\b\\..\\c", "http://h/a/c", "http://h/a%5Cb%5C..%5Cc", "r3-backslash-dot-segments"),
    row("http://h\\a?b\\c", "http://h/a?b%5Cc=", REFUSED, "r3-query-backslash-stays-data"),
    row("http://h/#a\\b", "http://h/", "http://h/", "r3-fragment-dropped"),
    row("http://u@h\\@x/", "http://h/@x", "http://x/", "r3-backslash-ends-authority-before-at"),
    # Rule 4: percent-encoded hosts.
    row("http://EXAMPLE%2eCOM/", "http://example.com/", REFUSED, "r4-escape-any-case"),
    row("http://%65xample.com/", "http://example.com/", REFUSED, "r4-escaped-letter"),
    row("http://ex%20ample.com/", REFUSED, REFUSED, "r4-decoded-space-refused"),
    row("http://ex%2Fample.com/", REFUSED, REFUSED, "r4-decoded-slash-refused"),
    row("http://%FF.example/", REFUSED, REFUSED, "r4-not-utf8-refused"),
    row("http://a%2E%2Eb/", REFUSED, REFUSED, "r4-decoded-empty-label-refused"),
    row("http://%31%32%37.0.0.1/", "http://127.0.0.1/", REFUSED, "r4-decoded-then-ipv4"),
    row("http://xn--/", REFUSED, "http://xn--/", "r4-invalid-a-label-refused"),
    row(
        "http://axn--b.example/",
        "http://axn--b.example/",
        "http://axn--b.example/",
        "r4-xn-inside-a-label-is-no-a-label",
    ),
    row(
        "http://XN--bcher-kva.example/",
        "http://xn--bcher-kva.example/",
        "http://xn--bcher-kva.example/",
        "r4-valid-a-label-kept",
    ),
    # Rule 5: IPv4.
    row("http://192.168.0.1/", "http://192.168.0.1/", "http://192.168.0.1/", "r5-dotted-quad-kept"),
    row("http://1.2.3.4./", "http://1.2.3.4/", "http://1.2.3.4/", "r5-one-trailing-dot"),
    row("http://0x7F.0X1/", "http://127.0.0.1/", "http://0x7f.0x1/", "r5-hex-any-case"),
    row("http://0x/", "http://0.0.0.0/", "http://0x/", "r5-bare-0x-is-zero"),
    row("http://1.0x/", "http://1.0.0.0/", "http://1.0x/", "r5-last-part-bare-0x"),
    row("http://127.1/", "http://127.0.0.1/", "http://127.1/", "r5-two-parts"),
    row("http://127.0.1/", "http://127.0.0.1/", "http://127.0.1/", "r5-three-parts"),
    row("http://4294967295/", "http://255.255.255.255/", "http://4294967295/", "r5-largest"),
    row("http://4294967296/", REFUSED, "http://4294967296/", "r5-one-over-largest"),
    row("http://1.16777216/", REFUSED, "http://1.16777216/", "r5-last-of-two-too-big"),
    row("http://1.16777215/", "http://1.255.255.255/", "http://1.16777215/", "r5-last-of-two-largest"),
    row("http://08/", REFUSED, "http://08/", "r5-eight-is-no-octal-digit"),
    row("http://0x1g/", "http://0x1g/", "http://0x1g/", "r5-not-hex-is-a-name"),
    row("http://1.2.3.09/", REFUSED, "http://1.2.3.09/", "r5-octal-part-refused"),
    row("http://a.1/", REFUSED, "http://a.1/", "r5-name-then-number-refused"),
    row("http://1.a/", "http://1.a/", "http://1.a/", "r5-number-then-name-is-a-name"),
    row("http://1..2/", REFUSED, REFUSED, "r5-empty-part"),
    row("http://\uff10\uff58\uff17\uff46.1/", "http://127.0.0.1/", "http://0x7f.1/", "r5-fullwidth-mapped-first"),
    row("http://[::ffff:0x7f.1]/", REFUSED, REFUSED, "r5-not-inside-ipv6"),
    # Google Safe Browsing's canonicalization examples that policy 2's rules decide.
    row("http://3279880203/blah", "http://195.127.0.11/blah", "http://3279880203/blah", "safebrowsing-decimal-ip"),
    row("http://0x12.0x43.0x44.0x01/", "http://18.67.68.1/", "http://0x12.0x43.0x44.0x01/", "safebrowsing-hex-ip"),
    row(
        "http://www.google.com/q?r?s",
        "http://www.google.com/q?r%3Fs=",
        "http://www.google.com/q?r%3Fs=",
        "safebrowsing-question-in-query",
    ),
    row(
        "http://host.com//twoslashes?more//slashes",
        "http://host.com//twoslashes?more%2F%2Fslashes=",
        "http://host.com//twoslashes?more%2F%2Fslashes=",
        "safebrowsing-empty-segment-kept",
    ),
    # Deliberate differences from WHATWG that policy 2 keeps.
    row("g", REFUSED, REFUSED, "keeps-no-scheme-no-base-refused"),
    row("http://h/a//b/", "http://h/a//b", "http://h/a//b", "keeps-empty-segments-and-strips-trailing-slash"),
    row("http://h/%25%7e", "http://h/%25~", "http://h/%25~", "keeps-rule-7-escapes"),
    row("ftp://h/", REFUSED, REFUSED, "keeps-only-policy-schemes"),
    row("http://a..b/", REFUSED, REFUSED, "keeps-empty-label-refused"),
]


@pytest.mark.parametrize("raw, base, v2, v1", ROWS)
def test_policy_2(canonical_impl, raw, base, v2, v1):
    for policy, expected in ((DEFAULT_POLICY, v2), (POLICY_V1, v1)):
        if expected == REFUSED:
            with pytest.raises(InvalidURL):
                canonical_impl.canonicalize(raw, base=base, policy=policy)
        else:
            out = canonical_impl.canonicalize(raw, base=base, policy=policy)
            assert out == expected, policy.version
            assert canonical_impl.canonicalize(out, policy=policy) == out


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("http://256.256.256.256/", "no IPv4 address"),
        ("http://%FF.example/", "not UTF-8"),
        ("http:", "empty host"),
        ("http://h\x01/", "'\\x01'"),
    ],
)
def test_refusals_name_the_problem(canonical_impl, raw, reason):
    with pytest.raises(InvalidURL) as info:
        canonical_impl.canonicalize(raw)
    assert reason in str(info.value)


def test_a_base_is_read_by_policy_2_too(canonical_impl):
    assert canonical_impl.canonicalize("x", base="http:\\\\h.example\\dir\\page") == "http://h.example/dir/x"
    with pytest.raises(InvalidURL, match="base"):
        canonical_impl.canonicalize("x", base="http:\\\\h.example\\dir\\page", policy=POLICY_V1)


# ----- the section as shipped: its examples, read from docs/canonical-policy.md --------------------
SPEC = (Path(__file__).resolve().parents[1] / "docs" / "canonical-policy.md").read_text(encoding="utf-8")
SECTION = SPEC[SPEC.index("## Policy 2") :]


def _literal(text: str) -> str:
    return text.replace("\\x01", "\x01")


def test_the_shipped_section_is_policy_2s():
    assert "`POLICY_V1` keeps policy 1 bit for bit" in SECTION
    assert f"(`{POLICY_V1.digest}` today)" in SECTION


@pytest.mark.parametrize("before, after", re.findall(r"`([^`\s]+)`\s+->\s+`([^`\s]+)`", SECTION))
def test_every_arrow_example_of_the_section(canonical_impl, before, after):
    if before.startswith("/"):  # a path
        assert canonical_impl.canonicalize("http://h" + _literal(before)) == "http://h" + after
    else:  # a host
        assert canonical_impl.canonicalize(f"http://{before}/") == f"http://{after}/"


def test_every_failure_the_section_lists(canonical_impl):
    listed = re.search(r"Anything that fails \(([^)]*)\)", SECTION.replace("\n   ", " "))
    assert listed is not None
    hosts = re.findall(r"`([^`]+)`", listed.group(1))
    assert hosts == ["256.256.256.256", "1.2.3.4.5", "foo.09", "0x100000000"]
    for host in hosts:
        with pytest.raises(InvalidURL):
            canonical_impl.canonicalize(f"http://{host}/")


def test_every_spelling_of_host_h_the_section_lists(canonical_impl):
    sentence = re.search(r"authority: (.*?) all name host `h`", SECTION.replace("\n   ", " "))
    assert sentence is not None
    spellings = re.findall(r"`([^`]+)`", sentence.group(1))
    assert len(spellings) == 4
    for spelling in spellings:
        assert canonical_impl.canonicalize(spelling).startswith("http")
        assert canonical_impl.canonicalize(spelling).split("://")[1].split("/")[0] == "h"
