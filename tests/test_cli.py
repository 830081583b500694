"""The ``crawldedup`` command, run as a subprocess exactly as a user runs it."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import pytest
from conftest import interrupt_after_first_line, stop_reading_after_first_line, summary_count

from crawldedup.bloom import open_filter
from crawldedup.canonical import DEFAULT_POLICY, canonicalize_each
from crawldedup.cli._io import Lines, as_read
from crawldedup.cli._lines import canonicalize_lines

COMMAND = [sys.executable, "-m", "crawldedup"]
PAGES = 300


def spellings(page: int) -> List[str]:
    """Several spellings of one page (CANONICAL.md rules 1-9); the first is its canonical form."""
    return [
        f"https://shop.example/item/{page}?a=1&b=2",
        f"HTTPS://Shop.Example:443/item/{page}?b=2&a=1&utm_source=news#reviews",
        f"https%3A%2F%2Fshop.example%2Fitem%2F{page}%3Fa%3D1%26b%3D2%26gclid%3D{page}",
        f"https://shop.example/./item/{page}/?a=1&&b=2",
    ]


def canonical(page: int) -> str:
    return spellings(page)[0]


def frontier(pages: range) -> List[str]:
    """Every spelling of every page, interleaved as links arrive in a crawl."""
    return [spellings(page)[variant] for variant in range(4) for page in pages]


def write_lines(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def run(
    args: Sequence[str], cwd: Path, stdin: Optional[bytes] = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, input=stdin, capture_output=True, timeout=timeout)


def out_lines(result: subprocess.CompletedProcess) -> List[str]:
    return result.stdout.decode("utf-8").splitlines()


def assert_clean_error(result: subprocess.CompletedProcess, code: int, *words: str) -> None:
    """A non-zero exit with one clear line on stderr and no traceback."""
    err = result.stderr.decode()
    assert result.returncode == code, (result.returncode, err)
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]


def block_area(path: Path) -> bytes:
    """The filter's bits: the last num_bits / 8 bytes of the file (the header comes first)."""
    with open_filter(path) as bf:
        size = bf.num_bits // 8
    data = path.read_bytes()
    return data[len(data) - size :]


# ---------------------------------------------------------------------------- filter


def test_filter_prints_each_page_once_then_nothing(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "links.txt", frontier(range(PAGES)))
    first = run(["filter", source, "--state", "s.bloom"], tmp_path)
    assert first.returncode == 0, first.stderr.decode()
    assert out_lines(first) == [canonical(page) for page in range(PAGES)]
    assert summary_count(first, "lines read") == 4 * PAGES
    assert summary_count(first, "new") == PAGES
    assert summary_count(first, "duplicates dropped") == 3 * PAGES

    second = run(["filter", source, "--state", "s.bloom"], tmp_path)
    assert second.returncode == 0, second.stderr.decode()
    assert second.stdout == b""
    assert summary_count(second, "new") == 0
    assert summary_count(second, "duplicates dropped") == 4 * PAGES


def test_filter_default_state_file_is_created_in_the_working_directory(tmp_path: Path) -> None:
    result = run(["filter", "--capacity", "1000"], tmp_path, stdin=b"https://a.example/x\n")
    assert result.returncode == 0, result.stderr.decode()
    with open_filter(tmp_path / "crawldedup.bloom") as bf:
        assert bf.capacity == 1000
        assert "https://a.example/x" in bf


def test_filter_output_raw_keeps_the_first_spelling(tmp_path: Path) -> None:
    lines = [spellings(7)[1], spellings(7)[0], spellings(8)[2]]
    crlf = "".join(line + "\r\n" for line in lines).encode()  # a file written on Windows
    result = run(["filter", "--output", "raw", "--state", "s.bloom"], tmp_path, stdin=crlf)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == f"{lines[0]}\n{lines[2]}\n"


def test_stdin_plain_and_gzip_files_give_the_same_output(tmp_path: Path) -> None:
    lines = frontier(range(50))
    text = "".join(line + "\n" for line in lines).encode()
    half = len(text) // 2
    cut = text.index(b"\n", half) + 1
    # gzip is recognised by its magic bytes, not the name; two members as `cat a.gz b.gz` makes.
    (tmp_path / "links.data").write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:]))
    from_stdin = run(["filter", "--state", "a.bloom"], tmp_path, stdin=text)
    from_gzip = run(["filter", "links.data", "--state", "b.bloom"], tmp_path)
    from_gzip_stdin = run(["filter", "-", "--state", "c.bloom"], tmp_path, stdin=gzip.compress(text))
    for result in (from_stdin, from_gzip, from_gzip_stdin):
        assert result.returncode == 0, result.stderr.decode()
        assert out_lines(result) == [canonical(page) for page in range(50)]


def test_truncated_gzip_input_is_an_input_error(tmp_path: Path) -> None:
    data = gzip.compress("".join(line + "\n" for line in frontier(range(50))).encode())
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    result = run(["filter", "cut.gz", "--state", "s.bloom"], tmp_path)
    assert_clean_error(result, 4, "cut.gz", "gzip")


def test_rejects_file_gets_each_invalid_line_with_its_reason(tmp_path: Path) -> None:
    bad = ["mailto:someone@example.com", "javascript:void(0)", "http://host:99999/", "not a url"]
    lines = [canonical(1), *bad, canonical(2)]
    result = run(
        ["filter", "--rejects", "rejects.tsv", "--state", "s.bloom"], tmp_path, stdin="\n".join(lines).encode()
    )
    assert result.returncode == 0, result.stderr.decode()
    assert out_lines(result) == [canonical(1), canonical(2)]
    assert summary_count(result, "invalid") == len(bad)
    rejected = (tmp_path / "rejects.tsv").read_text(encoding="utf-8").splitlines()
    assert [line.rsplit("\t", 1)[0] for line in rejected] == bad
    reasons = [line.rsplit("\t", 1)[1] for line in rejected]
    assert "mailto" in reasons[0] and "99999" in reasons[2]
    assert all(reasons)


def test_relative_links_with_a_base_on_the_line_or_for_the_run(tmp_path: Path) -> None:
    lines = [
        "https://shop.example/list/a\t../item/3?b=2&a=1",
        "https://shop.example/list/a\t/item/4?a=1&b=2#x",
        "https://shop.example/list/a\t//shop.example/item/3?a=1&b=2",
        "https://shop.example/list/a\t",  # an empty link is no link (CANONICAL.md rule 1)
    ]
    result = run(["filter", "--state", "s.bloom"], tmp_path, stdin="\n".join(lines).encode())
    assert result.returncode == 0, result.stderr.decode()
    assert out_lines(result) == [canonical(3), canonical(4)]
    assert summary_count(result, "invalid") == 1

    with_base = run(
        ["filter", "--base", "https://shop.example/item/", "--state", "t.bloom"],
        tmp_path,
        stdin=b"5?a=1&b=2\n./5?b=2&a=1\n",
    )
    assert with_base.returncode == 0, with_base.stderr.decode()
    assert out_lines(with_base) == [canonical(5)]


@pytest.mark.parametrize("base", [None, "https://shop.example/item/"])
def test_lines_with_and_without_a_base_are_canonicalized_in_input_order(base: Optional[str]) -> None:
    # The lines without a tab go to one call, those with one are grouped by base: every line's
    # canonical form and error must come back at its own index, as one line at a time gives.
    lines = [
        "https://shop.example/item/1?b=2&a=1",
        "https://shop.example/list/a\t../item/3",
        "mailto:someone@shop.example",  # refused, among the lines without a tab
        "7?a=1",  # relative: needs --base
        "https://shop.example/list/b\tjavascript:void(0)",  # refused, among the lines with one
        "http://exa\udcffmple.test/",  # a byte that is not UTF-8 (surrogateescape)
        "not a base\t../item/4",  # a refused base
        "https://shop.example/list/a\t/item/5#x",
        "HTTPS://SHOP.EXAMPLE:443/item/6",
    ]
    found = canonicalize_lines(Lines(lines, True, {}), base, DEFAULT_POLICY)
    for index, line in enumerate(lines):
        page, tab, link = line.partition("\t")
        one = canonicalize_each(as_read([link if tab else line]), as_read([page if tab else base]))
        assert found.urls[index] == one.urls[0], line
        assert str(found.errors.get(index)) == str(one.errors.get(0)), line
    assert list(found.errors) == sorted(found.errors)
    assert len(found.errors) == (5 if base is None else 4)


def test_relative_link_without_base_is_invalid(tmp_path: Path) -> None:
    result = run(["filter", "--state", "s.bloom"], tmp_path, stdin=b"../item/3\n")
    assert result.returncode == 0
    assert result.stdout == b""
    assert summary_count(result, "invalid") == 1


# ---------------------------------------------------------------------------- merge and info


def test_merge_of_filters_built_in_parallel_equals_one_filter_of_both(tmp_path: Path) -> None:
    write_lines(tmp_path / "a.txt", frontier(range(0, 200)))
    write_lines(tmp_path / "b.txt", frontier(range(150, 400)))
    options = ["--capacity", "5000", "--error-rate", "0.01"]
    workers = [
        subprocess.Popen(
            [*COMMAND, "filter", name, "--state", f"{name}.bloom", *options],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for name in ("a.txt", "b.txt")
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err.decode()
    both = run(["filter", "a.txt", "b.txt", "--state", "both.bloom", *options], tmp_path)
    assert both.returncode == 0, both.stderr.decode()

    merged = run(["merge", "a.txt.bloom", "b.txt.bloom", "-o", "merged.bloom"], tmp_path)
    assert merged.returncode == 0, merged.stderr.decode()
    assert block_area(tmp_path / "merged.bloom") == block_area(tmp_path / "both.bloom")
    assert block_area(tmp_path / "merged.bloom") != block_area(tmp_path / "a.txt.bloom")
    # The merged filter is a working state file: nothing of either input is new to it.
    again = run(["filter", "a.txt", "b.txt", "--state", "merged.bloom"], tmp_path)
    assert again.returncode == 0 and again.stdout == b"", again.stderr.decode()


def test_merge_refuses_incompatible_filters_and_keeps_outputs(tmp_path: Path) -> None:
    for name, capacity in (("small.bloom", "1000"), ("large.bloom", "100000")):
        made = run(["filter", "--state", name, "--capacity", capacity], tmp_path, stdin=b"https://a.example/\n")
        assert made.returncode == 0, made.stderr.decode()
    result = run(["merge", "small.bloom", "large.bloom", "-o", "out.bloom"], tmp_path)
    assert_clean_error(result, 3, "large.bloom")
    assert not (tmp_path / "out.bloom").exists()

    (tmp_path / "taken.bloom").write_bytes(b"keep me")
    refused = run(["merge", "small.bloom", "small.bloom", "-o", "taken.bloom"], tmp_path)
    assert_clean_error(refused, 3, "taken.bloom")
    assert (tmp_path / "taken.bloom").read_bytes() == b"keep me"


def test_info_describes_a_filter_file(tmp_path: Path) -> None:
    made = run(
        ["filter", "--state", "s.bloom", "--capacity", "20000", "--error-rate", "0.001"],
        tmp_path,
        stdin="\n".join(canonical(page) for page in range(100)).encode(),
    )
    assert made.returncode == 0, made.stderr.decode()
    result = run(["info", "s.bloom"], tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    text = result.stdout.decode()
    with open_filter(tmp_path / "s.bloom") as bf:
        expected_bits = bf.num_bits
        expected_items = bf.approx_items
    assert re.search(r"capacity\s+20,000\b", text), text
    assert re.search(r"error rate\s+0\.001\b", text), text
    assert f"{expected_bits:,}" in text
    assert re.search(rf"estimated items\s+{expected_items:,}\b", text), text
    assert f"{(tmp_path / 's.bloom').stat().st_size:,}" in text


def test_a_grown_filter_in_the_summary_info_and_merge(tmp_path: Path) -> None:
    made = run(
        ["filter", "--state", "s.bloom", "--capacity", "1000", "--ttl-days", "0"],
        tmp_path,
        stdin="\n".join(canonical(page) for page in range(6_000)).encode(),
    )
    assert made.returncode == 0, made.stderr.decode()
    assert summary_count(made, "new") >= 6_000 * 0.99
    assert re.search(
        r"filter grew\s+2 stages\s+past its capacity of 1,000: 21,000 items in all, in "
        r"s\.bloom\.stage1 \.\. \.stage2$",
        made.stderr.decode(),
        re.MULTILINE,
    ), made.stderr.decode()
    text = run(["info", "s.bloom"], tmp_path).stdout.decode()
    assert re.search(r"format\s+crawldedup filter v3\b", text), text
    assert re.search(r"grown\s+2 stages past its capacity: holds 21,000 keys in all", text), text
    assert re.search(r"stage 2\s+s\.bloom\.stage2: capacity 16,000 at error rate 0\.00125, ~[\d,]+ items", text), text
    refused = run(["merge", "s.bloom", "s.bloom", "-o", "out.bloom"], tmp_path)
    assert_clean_error(refused, 3, "cannot merge s.bloom: it grew past its capacity into 2 stage files")
    assert not (tmp_path / "out.bloom").exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"not a filter at all" * 300, b"CDDBLOOM" + bytes(100)],
    ids=["empty", "foreign", "truncated"],
)
def test_info_on_a_bad_file_is_one_clear_line(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "bad.bloom").write_bytes(content)
    assert_clean_error(run(["info", "bad.bloom"], tmp_path), 3, "bad.bloom")


# ---------------------------------------------------------------------------- canonicalize


def test_canonicalize_prints_one_line_per_input_and_reasons_on_stderr(tmp_path: Path) -> None:
    lines = [spellings(1)[1], "mailto:x@example.com", spellings(2)[2]]
    result = run(["canonicalize"], tmp_path, stdin="\n".join(lines).encode())
    assert result.returncode == 1
    # Line-aligned with the input: an invalid line leaves an empty line.
    assert result.stdout.decode().split("\n") == [canonical(1), "", canonical(2), ""]
    err = result.stderr.decode()
    assert "<stdin>:2:" in err and "mailto" in err and "Traceback" not in err

    good = run(["canonicalize"], tmp_path, stdin="\n".join(spellings(3)).encode())
    assert good.returncode == 0
    assert out_lines(good) == [canonical(3)] * 4


# ---------------------------------------------------------------------------- errors and exit codes


def test_missing_input_file_is_an_input_error(tmp_path: Path) -> None:
    assert_clean_error(run(["filter", "nope.txt", "--state", "s.bloom"], tmp_path), 4, "nope.txt")


def test_corrupt_state_file_is_a_state_error_and_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "s.bloom").write_bytes(b"garbage" * 1000)
    result = run(["filter", "--state", "s.bloom"], tmp_path, stdin=b"https://a.example/\n")
    assert_clean_error(result, 3, "s.bloom")
    assert (tmp_path / "s.bloom").read_bytes() == b"garbage" * 1000


def test_info_and_merge_need_existing_files(tmp_path: Path) -> None:
    assert_clean_error(run(["info", "missing.bloom"], tmp_path), 3, "missing.bloom")
    assert_clean_error(run(["merge", "missing.bloom", "-o", "out.bloom"], tmp_path), 3, "missing.bloom")


@pytest.mark.parametrize(
    "args",
    [["filter", "--capacity", "0"], ["filter", "--error-rate", "1.5"], ["filter", "--output", "fancy"], ["frobnicate"]],
    ids=["capacity", "error-rate", "output", "command"],
)
def test_bad_usage_exits_2(tmp_path: Path, args: List[str]) -> None:
    result = run(args, tmp_path, stdin=b"")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr.decode()
    assert not (tmp_path / "crawldedup.bloom").exists()


def test_bad_environment_variable_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [*COMMAND, "filter", "--state", "s.bloom"],
        cwd=tmp_path,
        input=b"https://a.example/\n",
        capture_output=True,
        timeout=60,
        env={**os.environ, "BLOOM_CAPACITY": "lots"},
    )
    assert_clean_error(result, 2, "BLOOM_CAPACITY", "lots")
    assert not (tmp_path / "s.bloom").exists()


def test_unwritable_state_path_is_a_state_error(tmp_path: Path) -> None:
    result = run(["filter", "--state", tmp_path / "missing-dir" / "s.bloom"], tmp_path, stdin=b"https://a.example/\n")
    assert_clean_error(result, 3, "missing-dir")


def test_unreachable_redis_is_a_store_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on once the socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run(
        ["filter", "--strategy", "set", "--redis-url", f"redis://127.0.0.1:{port}/0", "--state", "s.bloom"],
        tmp_path,
        stdin=b"https://a.example/\n",
    )
    assert_clean_error(result, 5, f"127.0.0.1:{port}")
    assert not (tmp_path / "s.bloom").exists()  # the state file comes after the store answered


def test_a_round_is_a_fresh_dedup_space(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "links.txt", frontier(range(50)))
    every_page = [canonical(page) for page in range(50)]
    first = run(["filter", source, "--strategy", "sqlite", "--round", "2026-12", "--state", "a.bloom"], tmp_path)
    assert first.returncode == 0, first.stderr.decode()
    assert out_lines(first) == every_page
    again = run(["filter", source, "--strategy", "sqlite", "--round", "2026-12", "--state", "b.bloom"], tmp_path)
    assert again.returncode == 0 and again.stdout == b""  # the store remembers the round
    other = run(["filter", source, "--strategy", "sqlite", "--round", "2027-01", "--state", "c.bloom"], tmp_path)
    assert other.returncode == 0 and out_lines(other) == every_page
    # A state file belongs to its round: it cannot follow the crawl into the next one.
    follow = run(["filter", source, "--strategy", "sqlite", "--round", "2027-02", "--state", "a.bloom"], tmp_path)
    assert_clean_error(follow, 3, "a.bloom", "crawldedup:2026-12", "crawldedup:2027-02")
    bad = run(["filter", source, "--round", "no spaces"], tmp_path)
    assert_clean_error(bad, 2, "--round", "'no spaces'")


@pytest.mark.redis
def test_filter_claims_through_redis(tmp_path: Path, redis_url: str) -> None:
    source = write_lines(tmp_path / "links.txt", frontier(range(100)))
    first = run(["filter", source, "--strategy", "set", "--redis-url", redis_url, "--state", "a.bloom"], tmp_path)
    assert first.returncode == 0, first.stderr.decode()
    assert out_lines(first) == [canonical(page) for page in range(100)]
    # Another worker with an empty local filter: Redis remembers every claim.
    second = run(["filter", source, "--strategy", "set", "--redis-url", redis_url, "--state", "b.bloom"], tmp_path)
    assert second.returncode == 0, second.stderr.decode()
    assert second.stdout == b""


def test_verify_hits_needs_a_store(tmp_path: Path) -> None:
    result = run(["filter", "--verify-hits", "--state", "s.bloom"], tmp_path, stdin=b"https://a.example/\n")
    assert_clean_error(result, 2, "verify_hits")


def test_filter_claims_through_sqlite(tmp_path: Path) -> None:
    source = write_lines(tmp_path / "links.txt", frontier(range(100)))
    first = run(["filter", source, "--strategy", "sqlite", "--state", "a.bloom"], tmp_path)
    assert first.returncode == 0, first.stderr.decode()
    assert out_lines(first) == [canonical(page) for page in range(100)]
    second = run(["filter", source, "--strategy", "sqlite", "--state", "b.bloom", "--verify-hits"], tmp_path)
    assert second.returncode == 0, second.stderr.decode()
    assert second.stdout == b""
    assert "sqlite" in second.stderr.decode()  # the summary names the store


# ---------------------------------------------------------------------------- interruption


def _start_long_run(tmp_path: Path, pages: int) -> subprocess.Popen:
    source = write_lines(tmp_path / "long.txt", frontier(range(pages)))
    return subprocess.Popen(
        [*COMMAND, "filter", source, "--state", "s.bloom", "--batch-size", "200"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # bufsize=0: no read-ahead
    )


@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT to a child process")
def test_sigint_while_waiting_for_input(tmp_path: Path) -> None:
    worker = subprocess.Popen(
        [*COMMAND, "filter", "--state", "s.bloom", "--batch-size", "500"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert worker.stdin is not None
    # A crawl that is still running: links keep coming, stdin stays open.
    worker.stdin.write("".join(canonical(page) + "\n" for page in range(2000)).encode())
    worker.stdin.flush()
    printed = interrupt_after_first_line(worker, tmp_path / "s.bloom")
    assert len(printed) >= 500
    again = run(["filter", "--state", "s.bloom"], tmp_path, stdin="\n".join(printed).encode())
    assert again.returncode == 0 and again.stdout == b""


@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT to a child process")
def test_sigint_while_claiming(tmp_path: Path) -> None:
    worker = _start_long_run(tmp_path, 25_000)  # 100,000 lines in batches of 200: busy for seconds
    assert 1 <= len(interrupt_after_first_line(worker, tmp_path / "s.bloom")) < 25_000


@pytest.mark.skipif(os.name != "posix", reason="exit code of a closed pipe on POSIX")
def test_closed_stdout_stops_quietly(tmp_path: Path) -> None:
    worker = _start_long_run(tmp_path, 25_000)
    stop_reading_after_first_line(worker)  # the reader went away, as `crawldedup filter | head -1` does
    # A valid state file, without the batch its reader left unread: a rerun prints every page once.
    again = run(["filter", tmp_path / "long.txt", "--state", "s.bloom", "--batch-size", "5000"], tmp_path)
    assert again.returncode == 0, again.stderr.decode()
    assert sorted(out_lines(again)) == sorted(canonical(page) for page in range(25_000))
