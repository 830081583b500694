"""Policy 2 against the WHATWG URL Standard's own tests (tests/data/whatwg-urltestdata.json, wpt's
url/resources/urltestdata.json, BSD-3-Clause: tests/data/whatwg-urltestdata.LICENSE.md).

For every case whose URL is valid with an ``http``, ``https``, ``ws`` or ``wss`` scheme, the
canonical string of the input (against its base) equals the canonical string of the URL WHATWG
parses it into, built from WHATWG's protocol, host, path and query: the host, port, path and
query agree once both go through policy 2's normalization (user info and fragment are dropped
by the policy). The deliberate differences of docs/canonical-policy.md are listed by name below,
each with its reason, and each must stay a refusal. Every failure case with an ``http``/``https``
URL (or a relative one against such a base) is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from crawldedup import CanonicalPolicy, InvalidURL, canonicalize

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

DATA = Path(__file__).parent / "data" / "whatwg-urltestdata.json"
CASES: List[Dict[str, Any]] = [case for case in json.loads(DATA.read_text(encoding="utf-8")) if isinstance(case, dict)]
#: Policy 2 admitting the special schemes the test data exercise (policy 3: tests/test_canonical_policy3.py).
POLICY = CanonicalPolicy(schemes={"http", "https", "ws", "wss"}, version=2)
SCHEMES = ("http:", "https:", "ws:", "wss:")
C0_AND_SPACE = "".join(chr(code) for code in range(0x21))

#: (input, base) -> why policy 2 refuses what WHATWG parses: the deliberate differences of
#: docs/canonical-policy.md ("Everything else of policy 1 stands").
DELIBERATE: Dict[Tuple[str, Optional[str]], str] = {
    ("", "http://example.org/foo/bar"): "empty input is InvalidURL (rule 1), not the base",
    ("  \t", "http://example.org/foo/bar"): "input that strips to nothing is empty (rule 1)",
    ("", "http://user:pass@example.org:21/smth"): "empty input is InvalidURL (rule 1), not the base",
    ("http://./", None): "a host of one dot is empty once its trailing dot goes (rule 5)",
    ("http://../", None): "empty labels are refused (rule 5)",
    ("http://foo.09..", None): "empty labels are refused (rule 5)",
    ("http://!\"$&'()*+,-.;=_`{}~/", None): "a host holds letters, digits, '-', '_' and '.' only (rule 5)",
    ("wss://!\"$&'()*+,-.;=_`{}~/", None): "a host holds letters, digits, '-', '_' and '.' only (rule 5)",
    ("https://%e2%98%83", None): "the idna package's UTS #46 refuses symbols such as U+2603 (rule 5)",
    (
        "http://example.com/\ud800\U000107fe\udfff\ufdd0\ufdcf\ufdef\ufdf0\ufffe\uffff?"
        "\ud800\U000107fe\udfff\ufdd0\ufdcf\ufdef\ufdf0\ufffe\uffff",
        None,
    ): "a str with unpaired surrogates is InvalidURL (fine print), where WHATWG writes U+FFFD",
}


def _accepted_base(base: Optional[str]) -> Optional[str]:
    """The case's base when policy 2 accepts it, else None (an absolute input needs none)."""
    if base is None:
        return None
    try:
        canonicalize(base, policy=POLICY)
    except InvalidURL:
        return None
    return base


def _name(index: int, case: Dict[str, Any]) -> str:
    text = case["input"].encode("unicode_escape").decode("ascii")
    return f"{index}:{text[:50]}"


def _scheme(text: str) -> str:
    head, colon, _ = text.strip(C0_AND_SPACE).partition(":")
    return head.lower() if colon else ""


VALID = [
    pytest.param(case, id=_name(i, case))
    for i, case in enumerate(CASES)
    if not case.get("failure") and case["protocol"] in SCHEMES
]
FAILURES = [
    pytest.param(case, id=_name(i, case))
    for i, case in enumerate(CASES)
    if case.get("failure")
    and (
        _scheme(case["input"]) in ("http", "https")
        or (_scheme(case["input"]) == "" and (case.get("base") or "").lower().startswith(("http:", "https:")))
    )
]


def whatwg_url(case: Dict[str, Any]) -> str:
    """The URL WHATWG parsed, without user info and fragment: protocol, host (with port), path, query."""
    return f"{case['protocol']}//{case['host']}{case['pathname']}{case['search']}"


@pytest.mark.parametrize("case", VALID)
def test_valid_case_agrees_after_normalization(canonical_impl, case):
    base = _accepted_base(case.get("base"))
    reason = DELIBERATE.get((case["input"], case.get("base")))
    if reason is not None:
        with pytest.raises(InvalidURL):
            canonical_impl.canonicalize(case["input"], base=base, policy=POLICY)
        return
    expected = canonical_impl.canonicalize(whatwg_url(case), policy=POLICY)
    assert canonical_impl.canonicalize(case["input"], base=base, policy=POLICY) == expected


@pytest.mark.parametrize("case", FAILURES)
def test_failure_case_is_refused(canonical_impl, case):
    with pytest.raises(InvalidURL):
        canonical_impl.canonicalize(case["input"], base=_accepted_base(case.get("base")), policy=POLICY)


def test_the_selection_is_the_whole_http_and_ws_part_of_the_data():
    """The counts of this copy of the data: a changed file or selection shows here."""
    assert (len(VALID), len(FAILURES)) == (242, 203)
    listed = {(case.values[0]["input"], case.values[0].get("base")) for case in VALID}
    assert set(DELIBERATE) <= listed, "a deliberate difference names no valid case"
