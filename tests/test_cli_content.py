"""``crawldedup content``, run as a subprocess as a user runs it, on generated news pages."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

import pytest

pytest.importorskip("selectolax")

COMMAND = [sys.executable, "-m", "crawldedup", "content"]


def run(args: Sequence[object], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, capture_output=True, timeout=120)


def lines(result: subprocess.CompletedProcess) -> List[List[str]]:
    return [line.split("\t") for line in result.stdout.decode("utf-8").splitlines()]


def errors(result: subprocess.CompletedProcess) -> List[str]:
    text = result.stderr.decode("utf-8")
    assert "Traceback" not in text
    return text.splitlines()


def articles(count: int, seed: int = 4) -> List[str]:
    """Distinct articles of 300 random words each, in a page with navigation and a script."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("etaoinshrdlu") for _ in range(rng.randint(2, 9))) for _ in range(2_000)]
    return [
        f"<html><head><script>track({rng.random()})</script></head><body><nav><a href='/'>Home</a></nav>"
        f"<article><p>{' '.join(rng.choices(words, k=300))}</p></article></body></html>"
        for _ in range(count)
    ]


def jsonl(path: Path, records: Sequence[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_reinspection_round_says_what_each_fetch_found(tmp_path):
    one, two, three = articles(3)
    first = jsonl(
        tmp_path / "round1.jsonl",
        [{"url": "https://news.example/a", "html": one}, {"url": "https://news.example/b", "html": two}],
    )
    second = jsonl(
        tmp_path / "round2.jsonl",
        [
            {"url": "HTTPS://News.Example/a?utm_source=feed", "html": one},  # same page, same text
            {"url": "https://news.example/b", "html": three},  # same page, another text
            {"url": "https://mirror.example/a", "html": one},  # another page, a's text
        ],
    )
    result = run([first], tmp_path)
    assert result.returncode == 0, errors(result)
    assert lines(result) == [["new", "https://news.example/a"], ["new", "https://news.example/b"]]
    result = run([second], tmp_path)
    assert result.returncode == 0, errors(result)
    got = lines(result)
    assert got[0] == ["unchanged", "https://news.example/a", "0"]
    assert got[1][0] == "changed" and int(got[1][2]) > 3
    assert got[2] == ["duplicate", "https://mirror.example/a", "0", "https://news.example/a"]
    assert errors(result)[-1] == "crawldedup content: 3 pages: 0 new, 1 unchanged, 1 changed, 1 duplicate, 0 invalid"
    assert (tmp_path / "crawldedup.bloom.pages").exists()


def test_html_files_are_pages_under_the_base(tmp_path):
    one, two = articles(2, seed=8)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "a.html").write_text(one, encoding="utf-8")
    (tmp_path / "site" / "copy of a.html").write_bytes(one.encode("utf-8"))
    (tmp_path / "site" / "b.html").write_text(two, encoding="utf-8")
    result = run(
        [
            "--base",
            "https://shop.example/",
            "site/a.html",
            "site/copy of a.html",
            "site/b.html",
            "--state",
            tmp_path / "s.bloom",
        ],
        tmp_path,
    )
    assert result.returncode == 0, errors(result)
    assert lines(result) == [
        ["new", "https://shop.example/site/a.html"],
        ["duplicate", "https://shop.example/site/copy%20of%20a.html", "0", "https://shop.example/site/a.html"],
        ["new", "https://shop.example/site/b.html"],
    ]


def test_pages_that_cannot_be_checked_are_named_and_the_rest_checked(tmp_path):
    (one,) = articles(1, seed=9)
    bad = jsonl(
        tmp_path / "bad.jsonl",
        [
            "{not json",
            {"url": "https://ok.example/", "html": one},
            {"url": "mailto:x@y.example", "html": one},
            {"html": one},
            "",
        ],
    )
    result = run([bad.name], tmp_path)
    assert result.returncode == 1
    assert lines(result) == [
        ["invalid", "bad.jsonl:1"],
        ["new", "https://ok.example/"],
        ["invalid", "mailto:x@y.example"],
        ["invalid", "bad.jsonl:4"],
    ]
    messages = errors(result)
    assert messages[0].startswith("crawldedup content: bad.jsonl:1: not JSON")
    assert messages[1] == "crawldedup content: bad.jsonl:3: not an accepted URL: 'mailto:x@y.example'"
    assert messages[2] == 'crawldedup content: bad.jsonl:4: not a JSON object with "url" and "html" strings'


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["missing.html"], 4, "cannot read input missing.html: No such file or directory"),
        (["--max-distance", "9", "x.html"], 2, "argument --max-distance: must be an integer in [1, 7], got '9'"),
        (["--strategy", "nope", "x.html"], 2, "strategy (CRAWLDEDUP_STRATEGY) must be one of"),
        (["--batch-size", "0", "x.html"], 2, "argument --batch-size: must be a positive integer, got '0'"),
    ],
)
def test_usage_and_input_errors_are_one_line(tmp_path, args, code, words):
    (tmp_path / "x.html").write_text("<p>x</p>", encoding="utf-8")
    result = run(args, tmp_path)
    assert result.returncode == code
    (message,) = errors(result)
    assert message.startswith("crawldedup: error: ") and words in message


def test_sqlite_pages_last_across_runs_and_refuse_another_k(tmp_path):
    (one,) = articles(1, seed=10)
    page = jsonl(tmp_path / "p.jsonl", [{"url": "https://a.example/", "html": one}])
    store = ["--strategy", "sqlite", "--sqlite", tmp_path / "c.sqlite"]
    assert lines(run([*store, page], tmp_path)) == [["new", "https://a.example/"]]
    assert lines(run([*store, page], tmp_path)) == [["unchanged", "https://a.example/", "0"]]
    result = run([*store, "--max-distance", "5", page], tmp_path)
    assert result.returncode == 3
    (message,) = errors(result)
    assert "max_distance=3" in message and "max_distance=5" in message
