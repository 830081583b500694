"""A page is seen only once its line is written: ``crawldedup filter`` through outputs that fail.

For every strategy the command offers, a run whose output fails (a pipe closed early by
``head``, ``/dev/full``, a file that outgrows its disk or its size limit), then a rerun to a
good output. Exact strategies: together the two runs print every page, each once. RedisBloom
(which cannot take a claim back): every page is printed or kept in the unwritten-pages file,
none silently dropped. Each summary's counts add up.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Sequence

import pytest
from conftest import summary_counts

from crawldedup import canonicalize

COMMAND = [sys.executable, "-m", "crawldedup", "filter"]
PAGES = 6_000
#: Lines per claim: the first batch prints ~1,980 new pages, ~90 KB, more than a pipe holds
#: (64 KiB on Linux), so ``head`` exits with the first batch still being written.
BATCH = 2_000
STRATEGIES = ["local", "sqlite", "set", "sharded-set", "redisbloom"]
EXACT = {"local", "sqlite", "set", "sharded-set"}
posix_only = pytest.mark.skipif(os.name != "posix", reason="pipes, /dev/full and RLIMIT_FSIZE are POSIX")


def frontier() -> List[str]:
    """Every page twice (two spellings), and an invalid line every 97 lines."""
    lines: List[str] = []
    for variant in ("https://shop.example/item/{}?a=1&b=2", "HTTPS://Shop.Example:443/item/{}?b=2&a=1#top"):
        for page in range(PAGES):
            lines.append(variant.format(page))
            if len(lines) % 97 == 0:
                lines.append(f"mailto:sales{page}@shop.example")
    return lines


LINES = frontier()
EVERY_PAGE = sorted(canonicalize(f"https://shop.example/item/{page}?a=1&b=2") for page in range(PAGES))
INVALID = sum(line.startswith("mailto:") for line in LINES)
#: The pages the first batch prints (all new), and their bytes.
FIRST_BATCH = [canonicalize(line) for line in LINES[:BATCH] if not line.startswith("mailto:")]
FIRST_BATCH_BYTES = sum(len(url) + 1 for url in FIRST_BATCH)


@pytest.fixture(params=STRATEGIES)
def strategy(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def workdir(tmp_path: Path, strategy: str, request: pytest.FixtureRequest) -> Path:
    """A directory with the frontier, and ``args`` (the options of the strategy) beside it."""
    (tmp_path / "frontier.txt").write_text("".join(line + "\n" for line in LINES))
    # Capacity 10,000: a 68 KB state file (the five slots of the default window), under the
    # file size limit below.
    options = [
        "--strategy",
        strategy,
        "--batch-size",
        str(BATCH),
        "--capacity",
        "10000",
        "--state",
        "s.bloom",
        "--jobs",
        "2",
    ]  # worker processes prepare the batches, whatever the machine's cores
    if strategy == "sqlite":
        options += ["--sqlite", "claims.sqlite"]
    elif strategy != "local":
        url = request.getfixturevalue("redisbloom_url" if strategy == "redisbloom" else "redis_url")
        options += ["--redis-url", url, "--namespace", "unwritten"]
    (tmp_path / "args").write_text("\n".join(options))
    return tmp_path


def options(workdir: Path) -> List[str]:
    return (workdir / "args").read_text().split("\n")


def summary(stderr: bytes) -> Dict[str, int]:
    """The summary's counts by label (``lines read``, ``invalid``...)."""
    counts = summary_counts(stderr)
    assert {"lines read", "invalid", "duplicates dropped", "new"} <= set(counts), stderr.decode()
    return counts


def unwritten_pages(workdir: Path) -> List[str]:
    path = workdir / "crawldedup.unwritten"
    return path.read_text().splitlines() if path.exists() else []


def rerun_and_check(workdir: Path, strategy: str, printed_before: Sequence[str]) -> None:
    """Rerun to a good output; check that no page was lost nor printed twice, and the summary."""
    again = subprocess.run([*COMMAND, "frontier.txt", *options(workdir)], cwd=workdir, capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr.decode()
    printed = again.stdout.decode().splitlines()
    assert len(printed) == len(set(printed))
    kept = unwritten_pages(workdir)
    if strategy in EXACT:
        assert kept == []
        assert sorted(set(printed_before) | set(printed)) == EVERY_PAGE
        assert not set(printed_before) & set(printed)
    else:  # nothing silently dropped: printed, or kept in the unwritten-pages file
        assert sorted(set(printed_before) | set(printed) | set(kept)) == EVERY_PAGE
        assert not set(printed) & set(kept)
    counts = summary(again.stderr)
    assert counts["lines read"] == len(LINES)
    assert counts["invalid"] == INVALID
    assert counts["new"] == len(printed)
    assert counts["lines read"] == counts["invalid"] + counts["duplicates dropped"] + counts["new"]


@posix_only
def test_a_pipe_closed_by_head_loses_no_page(workdir: Path, strategy: str) -> None:
    shown = subprocess.run(
        f"{' '.join(COMMAND)} frontier.txt {' '.join(options(workdir))} | head -2; echo ${{PIPESTATUS[0]}} >&2",
        shell=True,
        executable="/bin/bash",
        cwd=workdir,
        capture_output=True,
        timeout=120,
    )
    err = shown.stderr.decode().splitlines()
    assert err[-1] == str(128 + signal.SIGPIPE), err  # crawldedup's own exit code: its reader went away
    assert "Traceback" not in shown.stderr.decode()
    head = shown.stdout.decode().splitlines()
    assert len(head) == 2 and set(head) <= set(EVERY_PAGE)
    kept = unwritten_pages(workdir)
    if strategy in EXACT:
        assert kept == []
    else:  # the batch head cut short: claimed in RedisBloom for good, so kept, and said so
        assert sorted(kept) == sorted(FIRST_BATCH)
        assert (
            f"{len(kept):,} pages claimed in the store, not written: their URLs are in crawldedup.unwritten"
            in shown.stderr.decode()
        )
    # What head showed may come again (the pipe cannot tell what head read from what it showed).
    again = subprocess.run([*COMMAND, "frontier.txt", *options(workdir)], cwd=workdir, capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr.decode()
    printed = again.stdout.decode().splitlines()
    assert len(printed) == len(set(printed))
    assert sorted(set(printed) | set(kept)) == EVERY_PAGE
    assert not set(printed) & set(kept)
    counts = summary(again.stderr)
    assert counts["new"] == len(printed)
    assert counts["lines read"] == counts["invalid"] + counts["duplicates dropped"] + counts["new"] == len(LINES)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_dev_full_loses_no_page(workdir: Path, strategy: str) -> None:
    with open("/dev/full", "wb") as full:
        failed = subprocess.run(
            [*COMMAND, "frontier.txt", *options(workdir)], cwd=workdir, stdout=full, stderr=subprocess.PIPE, timeout=120
        )
    err = failed.stderr.decode()
    assert failed.returncode == 4, err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == "crawldedup: error: cannot write stdout: No space left on device"
    kept = unwritten_pages(workdir)
    if strategy in EXACT:
        assert kept == [] and len(err.splitlines()) == 1
    else:
        assert kept == FIRST_BATCH  # the first batch: its pages, all new
        assert f"{len(kept):,} pages claimed in the store, not written: their URLs are in crawldedup.unwritten" in err
    rerun_and_check(workdir, strategy, [])


def run_with_file_size_limit(
    workdir: Path, limit: int, output: Path, extra: Sequence[str] = ()
) -> subprocess.CompletedProcess:
    """The command with RLIMIT_FSIZE (any POSIX user): writing past ``limit`` bytes fails with EFBIG."""
    child = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        from crawldedup.cli import main
        sys.exit(main(sys.argv[1:]))
    """)
    with open(output, "wb") as out:
        return subprocess.run(
            [sys.executable, "-c", child, "filter", "frontier.txt", *options(workdir), *extra],
            cwd=workdir,
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=120,
        )


@posix_only
def test_an_output_file_past_its_size_limit_holds_whole_batches(workdir: Path, strategy: str) -> None:
    if strategy in ("sqlite", "redisbloom"):
        pytest.skip(
            "the limit is every file's: it would stop the database or the unwritten-pages file too "
            "(the full disk test covers this strategy)"
        )
    # Room for the first batch's ~90 KB of output, not for the second one's.
    output = workdir / "out.txt"
    failed = run_with_file_size_limit(workdir, FIRST_BATCH_BYTES + 1_000, output)
    err = failed.stderr.decode()
    assert failed.returncode == 4, err
    assert err.splitlines()[-1] == f"crawldedup: error: cannot write stdout: {os.strerror(errno.EFBIG)}"
    printed = output.read_text().splitlines()
    assert printed == FIRST_BATCH  # the first batch, whole: the second one was cut off again
    rerun_and_check(workdir, strategy, printed)


def test_an_output_file_on_a_full_disk_holds_whole_batches(workdir: Path, strategy: str, small_fs: Path, fill) -> None:
    fill(small_fs, leave_bytes=FIRST_BATCH_BYTES + 8 * 1024)  # the first batch fits, not the second
    output = small_fs / "out.txt"
    with open(output, "wb") as out:
        failed = subprocess.run(
            [*COMMAND, "frontier.txt", *options(workdir)], cwd=workdir, stdout=out, stderr=subprocess.PIPE, timeout=120
        )
    err = failed.stderr.decode()
    assert failed.returncode == 4, err
    assert err.splitlines()[-1] == "crawldedup: error: cannot write stdout: No space left on device"
    printed = output.read_text().splitlines()
    assert printed == FIRST_BATCH
    rerun_and_check(workdir, strategy, printed)


@pytest.mark.parametrize("strategy", ["redisbloom"])  # the exact strategies hand their pages back
def test_unwritten_pages_on_a_full_disk_are_counted_as_lost(workdir: Path, strategy: str, small_fs: Path, fill) -> None:
    """Where the pages a store keeps cannot be kept either, the command says how many were lost."""
    fill(small_fs, leave_bytes=16 * 1024)
    unwritten = small_fs / "unwritten.txt"
    with open("/dev/full", "wb") as full:
        failed = subprocess.run(
            [*COMMAND, "frontier.txt", *options(workdir), "--unwritten", str(unwritten)],
            cwd=workdir,
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    err = failed.stderr.decode()
    assert failed.returncode == 4, err
    assert (
        f"{len(FIRST_BATCH):,} pages claimed in the store, not written, could not be kept in {unwritten} "
        "(No space left on device): lost to this crawl"
    ) in err
    assert not unwritten.exists() or unwritten.read_text() == ""  # no half-written batch
