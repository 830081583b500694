"""``crawldedup audit``, run as a subprocess on a generated fetch log whose collisions are known."""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

COMMAND = [sys.executable, "-m", "crawldedup", "audit"]
PAGES = 60

#: Spellings of page P, each with the rules audit must name for it. The policy's canonical form
#: of every one is ``canonical(P)``.
VARIANTS: List[Tuple[str, List[str]]] = [
    ("https://shop.example/item/{p}?a=1&b=2", []),
    ("HTTPS://Shop.Example/item/{p}?a=1&b=2", ["scheme/host case"]),
    ("https://shop.example:443/item/{p}?a=1&b=2", ["default port"]),
    ("https://shop.example/item/{p}?b=2&a=1", ["parameter order"]),
    ("https://shop.example/item/{p}?a=1&b=2&utm_source=mail", ["tracking parameter dropped"]),
    ("https://shop.example/item/{p}/?a=1&b=2", ["trailing slash"]),
    ("https://shop.example/item/{p}?a=1&b=2#reviews", ["fragment"]),
    ("https%3A%2F%2Fshop.example%2Fitem%2F{p}%3Fa%3D1%26b%3D2", ["wrapped URL"]),
    ("https://shop.example/%69tem/{p}?a=1&b=2", ["percent-encoding"]),
    ("https://Shop.Example./item/{p}?&a=1&b=2", ["scheme/host case", "host trailing dot", "empty parameter"]),
    (
        "HTTPS://shop.example:443/item/{p}?b=2&gclid=x{p}&a=1#top",
        ["scheme/host case", "default port", "tracking parameter dropped", "parameter order", "fragment"],
    ),
]
INVALID = ["mailto:sales@shop.example", "", "https://shop.example:99999/", "javascript:void(0)"]


def canonical(page: int) -> str:
    return f"https://shop.example/item/{page}?a=1&b=2"


Expected = Dict[str, Dict[str, Tuple[int, List[str]]]]


def fetch_log(seed: int = 7) -> Tuple[List[str], Expected, int]:
    """Shuffled log lines, the repeated pages ({canonical: {spelling: (fetches, rules)}}) and the
    number of distinct pages. Half the pages are fetched once, through any one spelling."""
    rng = random.Random(seed)
    lines: List[str] = []
    repeated: Expected = {}
    for page in range(PAGES):
        if page % 2:
            template, _ = rng.choice(VARIANTS)
            lines.append(template.format(p=page))
            continue
        chosen = rng.sample(VARIANTS, rng.randint(1, 4))
        spellings = {template.format(p=page): (rng.randint(1, 3), rules) for template, rules in chosen}
        if sum(fetches for fetches, _ in spellings.values()) == 1:
            spellings = {spelling: (2, rules) for spelling, (_, rules) in spellings.items()}
        repeated[canonical(page)] = spellings
        lines += [spelling for spelling, (fetches, _) in spellings.items() for _ in range(fetches)]
    lines += INVALID
    rng.shuffle(lines)
    return lines, repeated, PAGES


def run(args: Sequence[object], cwd: Path, stdin: Optional[bytes] = None) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, input=stdin, capture_output=True, timeout=60)


def write_log(path: Path, lines: List[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def as_expected(report: dict) -> Expected:
    return {
        page["canonical"]: {row["spelling"]: (row["fetches"], row["rules"]) for row in page["spellings"]}
        for page in report["repeated"]
    }


def parse_human(text: str) -> Tuple[Dict[str, int], List[Tuple[str, int]], Expected]:
    """The totals, the pages in their order with their fetches, and their spellings."""
    totals = {
        label: int(number.replace(",", ""))
        for label, number in re.findall(r"^  ([a-z ]+?)\s{2,}([\d,]+)$", text, re.MULTILINE)
    }
    order: List[Tuple[str, int]] = []
    pages: Expected = {}
    for line in text.splitlines():
        page = re.fullmatch(r" *([\d,]+)  (\S+)", line)
        spelling = re.fullmatch(r" {8,}([\d,]+)  (\S*)  \((.*)\)", line)
        if spelling:
            rules = [] if spelling[3] == "canonical form" else spelling[3].split(", ")
            pages[order[-1][0]][spelling[2]] = (int(spelling[1].replace(",", "")), rules)
        elif page:
            order.append((page[2], int(page[1].replace(",", ""))))
            pages[page[2]] = {}
    return totals, order, pages


def test_finds_exactly_the_known_collisions_with_their_spellings_and_rules(tmp_path):
    lines, repeated, pages = fetch_log()
    result = run(["--json", write_log(tmp_path / "fetched.txt", lines)], tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert as_expected(report) == repeated
    fetches = {url: sum(n for n, _ in spellings.values()) for url, spellings in repeated.items()}
    assert [(page["canonical"], page["fetches"]) for page in report["repeated"]] == sorted(
        fetches.items(), key=lambda item: (-item[1], item[0])
    )
    for page in report["repeated"]:
        assert page["distinct_spellings"] == len(repeated[page["canonical"]])
        assert set(page["rules"]) == {rule for _, rules in repeated[page["canonical"]].values() for rule in rules}
    assert report["lines"] == len(lines)
    assert report["invalid"] == len(INVALID)  # counted, not fatal
    assert report["distinct_pages"] == pages
    assert report["pages_fetched_more_than_once"] == len(repeated)
    assert report["extra_fetches"] == len(lines) - len(INVALID) - pages


def test_the_human_output_agrees_with_the_json(tmp_path):
    lines, repeated, _ = fetch_log(seed=11)
    log = write_log(tmp_path / "fetched.txt", lines)
    shown = run([log, "--top", 1000, "--spellings", 1000], tmp_path)
    report = json.loads(run([log, "--json"], tmp_path).stdout)
    assert shown.returncode == 0, shown.stderr
    totals, order, pages = parse_human(shown.stdout.decode("utf-8"))
    assert totals == {
        "lines read": report["lines"],
        "invalid": report["invalid"],
        "distinct pages": report["distinct_pages"],
        "fetched more than once": report["pages_fetched_more_than_once"],
        "extra fetches": report["extra_fetches"],
    }
    assert order == [(page["canonical"], page["fetches"]) for page in report["repeated"]]
    assert pages == as_expected(report) == repeated


def test_top_and_spellings_cut_the_list_and_say_how_much_is_left(tmp_path):
    lines, repeated, _ = fetch_log(seed=3)
    log = write_log(tmp_path / "fetched.txt", lines)
    full = json.loads(run([log, "--json"], tmp_path).stdout)
    cut = run([log, "--top", 2, "--spellings", 1], tmp_path).stdout.decode("utf-8")
    _, order, pages = parse_human(cut)
    assert order == [(page["canonical"], page["fetches"]) for page in full["repeated"][:2]]
    assert all(len(spellings) == 1 for spellings in pages.values())
    assert f"... {len(repeated) - 2:,} more pages fetched more than once (--top)" in cut
    first = full["repeated"][0]
    if first["distinct_spellings"] > 1:
        assert f"... {first['distinct_spellings'] - 1:,} more spelling" in cut
    assert json.loads(run([log, "--json", "--top", 2], tmp_path).stdout)["repeated"] == full["repeated"][:2]


def test_gzip_files_and_stdin_are_one_log(tmp_path):
    lines, repeated, _ = fetch_log(seed=5)
    half = len(lines) // 2
    first = tmp_path / "first.log.gz"
    first.write_bytes(gzip.compress("".join(line + "\n" for line in lines[:half]).encode()))
    rest = "".join(line + "\n" for line in lines[half:]).encode()
    result = run(["--json", first, "-"], tmp_path, stdin=rest)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert as_expected(report) == repeated
    assert report["lines"] == len(lines) and report["invalid"] == len(INVALID)


def test_invalid_and_undecodable_lines_are_counted_not_fatal(tmp_path):
    log = b"https://a.example/\xff\nnot a url\nhttps://a.example/x\nhttps://A.example/x\n"
    result = run(["--json"], tmp_path, stdin=log)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["lines"], report["invalid"], report["distinct_pages"], report["extra_fetches"]) == (4, 2, 1, 1)
    assert as_expected(report) == {
        "https://a.example/x": {"https://a.example/x": (1, []), "https://A.example/x": (1, ["scheme/host case"])}
    }


def test_a_missing_input_is_one_line_and_exit_code_4(tmp_path):
    result = run([tmp_path / "missing.log"], tmp_path)
    assert result.returncode == 4
    assert result.stderr.decode().splitlines() == [
        f"crawldedup: error: cannot read input {tmp_path / 'missing.log'}: No such file or directory"
    ]
    assert result.stdout == b""


def test_no_page_fetched_twice_is_an_empty_list(tmp_path):
    result = run(["--json"], tmp_path, stdin=b"https://a.example/1\nhttps://a.example/2\n")
    report = json.loads(result.stdout)
    assert (report["pages_fetched_more_than_once"], report["extra_fetches"], report["repeated"]) == (0, 0, [])
    shown = run([], tmp_path, stdin=b"https://a.example/1\n").stdout.decode().splitlines()
    assert shown[-1].split() == ["extra", "fetches", "0"]  # the totals, and no list of pages
