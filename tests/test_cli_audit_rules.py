"""``crawldedup audit --content``: per host, which parameters changed the pages' content and which
never did, learned from (URL, SimHash) records of fetched pages, and the policy file it writes."""

from __future__ import annotations

import subprocess
import sys

from crawldedup import DEFAULT_POLICY, canonicalize, load_policy_file
from crawldedup.cli.audit_rules import DROP, KEEP, UNKNOWN, RuleLearner
from crawldedup.content import simhash

COMMAND = [sys.executable, "-m", "crawldedup"]
WORDS = "apple river stone cloud music paper light garden window silver forest ocean".split()


def _story(n: int) -> str:
    """A page of its own per n: its SimHash is far from every other story's."""
    return " ".join(f"{WORDS[(n * 7 + i) % len(WORDS)]}{n}x{i}" for i in range(60))


def _records():
    rows = []
    for n in range(8):
        # news.example: sid selects the story; utm_source and the session id never change it.
        text = _story(n)
        rows.append((f"https://news.example/story?sid={n}", simhash(text)))
        rows.append((f"https://news.example/story?sid={n}&utm_source=mail{n}", simhash(text)))
        # shop.example: sid is a session id: the same page whatever its value.
        page = _story(100)
        rows.append((f"https://shop.example/item?id=7&sid=s{n}", simhash(page)))
    rows.append(("https://shop.example/item?id=7", simhash(_story(100))))
    rows.append(("https://shop.example/item?id=8&color=red", simhash(_story(200))))
    rows.append(("https://shop.example/item?id=8&color=blue", simhash(_story(201))))
    return rows


def test_verdicts_per_host():
    learner = RuleLearner(DEFAULT_POLICY, distance=3, min_pages=5)
    for url, fingerprint in _records():
        learner.add(url, fingerprint)
    found = {(v.host, v.parameter): v for v in learner.verdicts()}
    assert found[("news.example", "sid")].verdict == KEEP
    assert found[("news.example", "utm_source")].verdict == DROP
    assert found[("shop.example", "sid")].verdict == DROP and found[("shop.example", "sid")].changed == 0
    assert found[("shop.example", "color")].verdict == KEEP
    # id: one group only (id=7 against id=8 differ in color too): not enough evidence either way
    assert ("shop.example", "id") not in found or found[("shop.example", "id")].verdict in (KEEP, UNKNOWN)


def test_too_little_evidence_is_unknown():
    learner = RuleLearner(DEFAULT_POLICY, min_pages=50)
    for url, fingerprint in _records():
        learner.add(url, fingerprint)
    found = {(v.host, v.parameter): v.verdict for v in learner.verdicts()}
    assert found[("shop.example", "sid")] == UNKNOWN and found[("news.example", "sid")] == KEEP


def test_cli_writes_a_policy_file_that_merges_the_session_id_only(tmp_path):
    log = tmp_path / "pages.tsv"
    log.write_text("".join(f"{url}\t{fp:016x}\n" for url, fp in _records()) + "not a record\n", encoding="utf-8")
    written = tmp_path / "learned.toml"
    result = subprocess.run(
        [*COMMAND, "audit", "--content", str(log), "--write-policy", str(written)],
        capture_output=True,
        timeout=60,
    )
    err = result.stderr.decode()
    assert result.returncode == 1 and "pages.tsv:28: expected URL<TAB>SIMHASH" in err, err
    rows = {tuple(line.split("\t")[:3]) for line in result.stdout.decode().splitlines()}
    assert ("news.example", "sid", "keep") in rows and ("shop.example", "sid", "drop") in rows
    policy = load_policy_file(written)
    assert [rule.match for rule in policy.host_rules] == ["shop.example"]
    assert policy.host_rules[0].drop_params == {"sid"}
    assert canonicalize("https://shop.example/item?id=7&sid=abc", policy=policy) == "https://shop.example/item?id=7"
    assert canonicalize("https://news.example/story?sid=3", policy=policy) == "https://news.example/story?sid=3"
    assert "content changed in 0 of" in written.read_text(encoding="utf-8")
