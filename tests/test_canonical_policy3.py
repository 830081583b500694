"""Policy 3 (docs/canonical-policy.md, "Policy 3"): hosts as the URL Standard's domain to ASCII
reads them, the drop list of parameters that never select content, per-host rules and policy files.

The host vectors are WHATWG's own (tests/data/wpt-url/: toascii.json and IdnaTestV2.json, each
host tried as ``https://HOST/x``, wpt's way), and the URL vectors urltestdata.json of the same
edition; their source and licence: tests/data/wpt-url/LICENSE.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from crawldedup import (
    DEFAULT_POLICY,
    POLICY_V1,
    POLICY_V2,
    CanonicalPolicy,
    HostRule,
    InvalidURL,
    PolicyFileError,
    load_policy_file,
)
from crawldedup.canonical import _canonical_py as reference
from crawldedup.canonical import _domain
from crawldedup.canonical.policy_file import policy_file_text, read_policy

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

DATA = Path(__file__).parent / "data" / "wpt-url"


def _cases(name: str) -> List[Dict[str, Any]]:
    return [case for case in json.loads((DATA / name).read_text(encoding="utf-8")) if isinstance(case, dict)]


HOSTS = _cases("toascii.json") + _cases("IdnaTestV2.json")
URLS = _cases("urltestdata.json")
POLICIES = {"v3": DEFAULT_POLICY, "v2": POLICY_V2, "v1": POLICY_V1}

#: Host vectors where policy 3 answers otherwise than WHATWG, each with its reason (docs/canonical-policy.md).
HOST_DIFFERENCES = {
    ".": "a host of dots only is empty once its trailing dot goes (rule 5 of policy 1 stands)",
    "\u3002": "U+3002 maps to a dot: a host of dots only is empty once its trailing dot goes",
}


def _answer(impl: Any, url: str, policy: CanonicalPolicy = DEFAULT_POLICY) -> Optional[str]:
    try:
        return impl.canonicalize(url, policy=policy)
    except InvalidURL:
        return None


def test_host_vectors_agree_with_whatwg(canonical_impl):
    """Accept/refuse and the ASCII host agree on every vector but the listed ones (>= 99%)."""
    differences = {}
    for case in HOSTS:
        got = _answer(canonical_impl, f"https://{case['input']}/x")
        expected = None if case["output"] is None else _answer(canonical_impl, f"https://{case['output']}/x")
        if case["output"] is not None and expected is None:
            differences[case["input"]] = "WHATWG's own host refused"
        elif got != expected:
            differences[case["input"]] = f"{got!r} != {expected!r}"
    assert set(differences) == set(HOST_DIFFERENCES), differences
    assert len(HOSTS) == 2758 and 1 - len(differences) / len(HOSTS) >= 0.99


def test_domain_to_ascii_agrees_with_ada():
    """The host conversion against ada (the parser Node.js uses) on every vector: same host or both refuse."""
    ada_url = pytest.importorskip("ada_url")
    for case in HOSTS:
        try:
            theirs = ada_url.URL(f"https://{case['input']}/x").hostname
        except ValueError:
            theirs = None
        host = case["input"]
        try:
            ours: Optional[str] = _domain.domain_to_ascii(reference._whatwg.special_host(host))
        except (_domain.DomainError, UnicodeDecodeError):
            ours = None
        if host:  # "https:///x" is host "x" to a URL parser: no domain of its own
            assert ours == theirs, case


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_vector_is_an_answer_never_a_crash(name):
    """0 crashes over every vector suite: a canonical string or InvalidURL, the twins alike."""
    from crawldedup.canonical import canonicalize

    policy = POLICIES[name]
    inputs = [f"https://{case['input']}/x" for case in HOSTS] + [case["input"] for case in URLS]
    bases = [None] * len(HOSTS) + [case.get("base") for case in URLS]
    for url, base in zip(inputs, bases):
        answers = []
        for impl in (reference.canonicalize, canonicalize):
            try:
                answers.append(impl(url, base=base, policy=policy))
            except InvalidURL as exc:
                answers.append(("InvalidURL", str(exc)))
        assert answers[0] == answers[1], (url, base)


def test_urltestdata_failures_are_refused():
    """Every failure case of an http(s) URL (or a reference against an http(s) base) is refused."""
    for case in URLS:
        if not case.get("failure"):
            continue
        url, base = case["input"], case.get("base")
        head = url.strip("".join(chr(c) for c in range(0x21))).split(":", 1)[0].lower()
        if head not in ("http", "https") and not (base or "").startswith(("http:", "https:")):
            continue
        try:
            if base is not None:
                reference.canonicalize(base)
        except InvalidURL:
            continue
        with pytest.raises(InvalidURL):
            reference.canonicalize(url, base=base)


#: docs/canonical-policy.md, "Policy 3": every example of its table.
SPEC_EXAMPLES = [
    ("https://\u2603.net/x", "https://xn--n3h.net/x"),
    ("https://B\u00fccher.example./", "https://xn--bcher-kva.example/"),
    ("https://ab--c.example/", "https://ab--c.example/"),
    ("https://XN--A.example/", "https://xn--a.example/"),
    ("https://a..b.example/", "https://a..b.example/"),
    ("https://\u200d.example/", "InvalidURL"),
    ("https://\u064aa.example/", "InvalidURL"),
    ("https://a%C2%ADb.example/", "https://ab.example/"),
    ("https://news.example/story?sid=3&utm_source=x", "https://news.example/story?sid=3"),
    ("https://shop.example/search?q=shoes&from=20&gclid=x&fbclid=y", "https://shop.example/search?from=20&q=shoes"),
    ("https://git.example/tree?ref=main&jsessionid=9", "https://git.example/tree?ref=main"),
    ("https://detail.example.com/item?spm=123&id=1001", "https://detail.example.com/item?id=1001"),
]


@pytest.mark.parametrize("raw, expected", SPEC_EXAMPLES)
def test_spec_examples(canonical_impl, raw, expected):
    if expected == "InvalidURL":
        with pytest.raises(InvalidURL):
            canonical_impl.canonicalize(raw)
    else:
        assert canonical_impl.canonicalize(raw) == expected
        assert canonical_impl.canonicalize(expected) == expected


def test_spec_examples_are_the_documented_ones():
    text = (Path(__file__).parent.parent / "docs" / "canonical-policy.md").read_text(encoding="utf-8")
    section = text[text.index("## Policy 3") :]
    for raw, expected in SPEC_EXAMPLES:
        shown = raw.encode("ascii", "backslashreplace").decode() if not raw.isascii() else raw
        assert f"`{shown}`" in section or f"`{raw}`" in section, raw
        assert expected == "InvalidURL" or f"`{expected}`" in section, expected


def test_policy_3_drop_list_is_the_documented_one():
    text = (Path(__file__).parent.parent / "docs" / "canonical.md").read_text(encoding="utf-8")
    for name in DEFAULT_POLICY.drop_params:
        assert f"`{name}`" in text, f"{name} has no evidence in docs/canonical.md"


# ----- policy files ------------------------------------------------------------------------------
POLICY_TOML = """# rules for two sites
format = 1
base = "v3"

[options]
strip_www = true

[[host]]
match = "News.Example.COM"   # and every host under it
drop_params = ["sid"]
keep_params = ["ref"]

[[host]]
match = "b\u00fccher.example"
lowercase_path = true
"""


def test_policy_file_toml_and_json_read_alike(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text(POLICY_TOML, encoding="utf-8")
    document = {
        "format": 1,
        "base": "v3",
        "options": {"strip_www": True},
        "host": [
            {"match": "xn--bcher-kva.example", "lowercase_path": True},
            {"match": "news.example.com", "keep_params": ["REF"], "drop_params": ["sid"]},
        ],
    }
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps(document), encoding="utf-8")
    policy = load_policy_file(toml)
    assert policy == load_policy_file(as_json) and policy.digest == load_policy_file(as_json).digest
    assert policy.digest not in (DEFAULT_POLICY.digest, POLICY_V2.digest)
    assert [rule.match for rule in policy.host_rules] == ["news.example.com", "xn--bcher-kva.example"]
    assert reference.canonicalize("https://www.a.news.example.com/?sid=1&ref=2&x=3", policy=policy) == (
        "https://a.news.example.com/?ref=2&x=3"
    )
    assert reference.canonicalize("https://B\u00fccher.example/A?sid=1", policy=policy) == (
        "https://xn--bcher-kva.example/a?sid=1"
    )
    # What it holds makes the digest, not how it is written.
    toml.write_text(POLICY_TOML.replace("# rules for two sites", "# other words"), encoding="utf-8")
    assert load_policy_file(toml).digest == policy.digest


def test_policy_file_text_reads_back():
    rules = [HostRule("a.example", drop_params={"sid", "x"}), HostRule("b.example", keep_params={"gclid"})]
    text = policy_file_text("v3", {"strip_www": True}, rules, {"a.example": "never changed content"})
    assert "# never changed content" in text
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    assert read_policy(tomllib.loads(text)) == CanonicalPolicy(strip_www=True, host_rules=rules)


@pytest.mark.parametrize(
    "text, match",
    [
        ('base = "v3"\n', "format must be 1"),
        ("format = 2\n", "format must be 1"),
        ('format = 1\nbase = "v9"\n', "base must be one of v1, v2, v3"),
        ("format = 1\n[options]\nversion = 1\n", "options: unknown field"),
        ('format = 1\n[[host]]\nmatch = "*.a.example"\n', "write 'a.example'"),
        ('format = 1\n[[host]]\nmatch = "a.example/x"\n', "no host name"),
        ('format = 1\n[[host]]\ndrop_params = ["x"]\n', "has no match"),
        ('format = 1\n[[host]]\nmatch = "a.example"\ndrop_params = "x"\n', "not a single str"),
        ('format = 1\n[[host]]\nmatch = "a.example"\ndrop_params = ["x"]\nkeep_params = ["X"]\n', "both drops"),
        ('format = 1\n[[host]]\nmatch = "a.example"\n[[host]]\nmatch = "A.example."\n', "two rules"),
        ('format = 1\n[[host]]\nmatch = "a.example"\nkeep_fragment = "yes"\n', "must be a bool"),
        ("format = 1\nnot toml at all =\n", "p.toml"),
    ],
)
def test_bad_policy_files_name_the_problem(tmp_path, text, match):
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyFileError, match=match) as refused:
        load_policy_file(path)
    assert str(path) in str(refused.value)


def test_a_missing_policy_file_is_a_policy_file_error(tmp_path):
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy_file(tmp_path / "absent.toml")


def test_the_compiled_twin_answers_ruled_hosts_by_their_rule_or_declines_them():
    fast = pytest.importorskip("crawldedup.canonical._canonical_c")
    policy = CanonicalPolicy(
        host_rules=[
            HostRule("ruled.example", drop_params={"sid"}),
            HostRule("b.ruled.example", keep_params={"utm_source"}, strip_trailing_slash=False),
            HostRule("lower.example", lowercase_path=True),
            HostRule("fragments.example", keep_fragment=True),
        ]
    )
    answered = {
        "https://x.ruled.example/?sid=1&a=2": "https://x.ruled.example/?a=2",
        # The most specific rule, alone: b.ruled.example's keeps sid (ruled.example's drops it).
        "https://c.b.ruled.example:8080/P/?utm_source=y&sid=2": "https://c.b.ruled.example:8080/P/?sid=2&utm_source=y",
        "https://other.example/?sid=1&utm_source=y": "https://other.example/?sid=1",
        "https://fragments.example/a": "https://fragments.example/a",
    }
    for url, canonical in answered.items():
        assert fast.fast_canonicalize(url, policy) == canonical == reference.canonicalize(url, policy=policy)
    # Options the fast path does not follow: its policy's plan declines them, so its rule's does.
    for url in ("https://lower.example/P", "https://fragments.example/a#f"):
        assert fast.fast_canonicalize(url, policy) is None
        assert fast.canonicalize(url, policy=policy) == reference.canonicalize(url, policy=policy)
