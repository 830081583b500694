"""Every exit code of the ``crawldedup`` command, from its one table, met through the real command."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict

import pytest

import crawldedup.cli
from crawldedup.cli.exits import EXIT_CODES
from crawldedup.stores import SQLiteStore

COMMAND = [sys.executable, "-m", "crawldedup"]
DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
LINK = b"https://shop.example/item/1\n"


def one_line(text: str) -> str:
    return " ".join(text.split())


def run(args, cwd: Path, stdin: bytes = LINK) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, input=stdin, capture_output=True, timeout=60)


def test_the_docstring_the_help_and_the_docs_list_the_same_codes():
    expected = [(code, one_line(meaning)) for code, meaning in EXIT_CODES]
    docs = [
        (int(code), one_line(meaning))
        for code, meaning in re.findall(r"^\| (\d+) \| (.*) \|$", DOCS.read_text(encoding="utf-8"), re.MULTILINE)
    ]
    assert docs == expected
    doc = one_line(crawldedup.cli.__doc__ or "")
    for command in ([], ["filter"], ["canonicalize"], ["audit"], ["info"], ["merge"]):
        shown = run([*command, "--help"], Path.cwd(), b"")
        assert shown.returncode == 0
        text = one_line(shown.stdout.decode())
        for code, meaning in expected:
            assert f"{code} {meaning}" in text, (command, code)
            assert f"{code} {meaning}" in doc, code


def _stopped_by(signum: int, cwd: Path) -> int:
    """Exit code of a filter run that gets ``signum`` while its input keeps coming."""
    worker = subprocess.Popen(
        [*COMMAND, "filter", "--state", "s.bloom", "--batch-size", "1"],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert worker.stdin is not None and worker.stdout is not None
    try:
        worker.stdin.write(LINK)
        assert worker.stdout.readline() == LINK  # running: the first batch is out
        worker.send_signal(signum)
        worker.communicate(timeout=60)
    finally:
        worker.kill()
    return worker.returncode


def _closed_stdout(cwd: Path) -> int:
    source = cwd / "links.txt"
    source.write_text("".join(f"https://shop.example/item/{i}\n" for i in range(50_000)))
    worker = subprocess.Popen(
        [*COMMAND, "filter", source, "--state", "s.bloom", "--batch-size", "100"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert worker.stdout is not None
    try:
        assert worker.stdout.readline().startswith(b"https://")
        worker.stdout.close()  # the reader went away, as `| head -1` does
        worker.communicate(timeout=60)
    finally:
        worker.kill()
    return worker.returncode


def _unreachable_redis(cwd: Path) -> int:
    with socket.socket() as sock:  # a port nobody listens on once the socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return run(
        ["filter", "--strategy", "set", "--redis-url", f"redis://127.0.0.1:{port}/0", "--state", "s.bloom"], cwd
    ).returncode


def _namespace_conflict(cwd: Path) -> int:
    SQLiteStore(cwd / "claims.sqlite", namespace="crawldedup", policy_digest="fedcba9876543210").close()
    return run(["filter", "--strategy", "sqlite", "--sqlite", "claims.sqlite", "--state", "s.bloom"], cwd).returncode


def _not_a_database(cwd: Path) -> int:
    (cwd / "claims.sqlite").write_text("not a database\n" * 500)
    return run(["filter", "--strategy", "sqlite", "--sqlite", "claims.sqlite", "--state", "s.bloom"], cwd).returncode


#: One way to meet each exit code, as a user would.
SCENARIOS: Dict[int, Callable[[Path], int]] = {
    0: lambda cwd: run(["filter", "--state", "s.bloom"], cwd).returncode,
    1: lambda cwd: run(["canonicalize"], cwd, b"mailto:sales@shop.example\n").returncode,
    2: lambda cwd: run(["filter", "--capacity", "0"], cwd).returncode,
    3: _namespace_conflict,
    4: lambda cwd: run(["filter", "missing.txt", "--state", "s.bloom"], cwd).returncode,
    5: _unreachable_redis,
    6: _not_a_database,
    130: lambda cwd: _stopped_by(signal.SIGINT, cwd),
    141: _closed_stdout,
    143: lambda cwd: _stopped_by(signal.SIGTERM, cwd),
}


def test_every_code_of_the_table_has_a_scenario():
    assert sorted(SCENARIOS) == [code for code, _ in EXIT_CODES]


@pytest.mark.skipif(os.name != "posix", reason="signals and closed pipes as on POSIX")
@pytest.mark.parametrize("code", sorted(SCENARIOS))
def test_exit_code(tmp_path: Path, code: int):
    assert SCENARIOS[code](tmp_path) == code


@pytest.mark.parametrize(
    "args, hint",
    [
        (["filter", "--capacity", "0"], "see crawldedup filter --help"),
        (["filter", "--error-rate", "1.5"], "see crawldedup filter --help"),
        (["filter", "--output", "fancy"], "see crawldedup filter --help"),
        (["filter", "--strategy", "redis"], "see crawldedup filter --help"),
        (["filter", "--no-such-option"], "see crawldedup filter --help"),
        (["canonicalize", "--no-such-option"], "see crawldedup canonicalize --help"),
        (["merge", "a.bloom"], "see crawldedup merge --help"),
        (["info"], "see crawldedup info --help"),
        (["frobnicate"], "see crawldedup --help"),
        ([], "see crawldedup --help"),
    ],
    ids=[
        "capacity",
        "error-rate",
        "output",
        "strategy",
        "unknown-option",
        "canonicalize",
        "merge",
        "info",
        "command",
        "nothing",
    ],
)
def test_usage_errors_are_one_line_with_the_help_to_read(tmp_path: Path, args, hint):
    result = run(args, tmp_path)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert err.count("\n") == 1 and err.startswith("crawldedup: error: ") and err.rstrip().endswith(hint), err
    assert "usage:" not in err and "Traceback" not in err
    assert not (tmp_path / "crawldedup.bloom").exists()
